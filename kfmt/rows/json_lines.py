"""`kfmt cat --format json`'s lines a batch at a time (kfmt.format.record_text.json_record_lines: the
compiled kernel of kfmt/csrc/json_lines.c).

A dict and a json.dumps per record cost more than an aiokafka decode loop; `record_block` gives a
data batch's lines as one string, the text kfmt.cli.cat.records_of makes record by record
(tests/test_cat_blocks.py holds them together). Control batches and header keys that are not valid
UTF-8 (where Java's replacement rules apply) stay on the per-record path, the definition.
"""
from __future__ import annotations

import json

from kfmt.format.model import Batch
from kfmt.format.record_text import json_record_lines


def _json(value) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def record_block(batch: Batch, skip: int, where: dict) -> bytes | str | None:
    """The JSON lines of the batch's records from `skip` on, joined by newlines (no final one); ""
    when there are none; None where the per-record path must make them. ASCII lines come as bytes,
    the same in any ASCII-compatible encoding, for the caller to write without a decode and an encode
    (most of what a text stream costs); other lines as text."""
    h = batch.header
    if h.is_control:
        return None
    epoch = h.partition_leader_epoch if h.partition_leader_epoch >= 0 else None
    members = _json(where)[1:-1]
    return json_record_lines(batch.records, skip, _json(h.timestamp_type.java_name), _json(epoch),
                             "," + members if members else "")
