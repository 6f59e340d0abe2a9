"""Text a batch's records print as, a batch at a time, by the compiled kernels (kfmt/csrc/json_lines.c,
kfmt/csrc/dump_text.c): `kfmt cat --format json`'s lines and kafka-dump-log's record lines.

Both texts are defined record by record where they are printed (kfmt.cli.cat.records_of, the JSON
line; kfmt.inspect.dump's record_line, Kafka's DumpLogSegments): a dict and a json.dumps, or a
string format, per record. For the common shapes the kernels give a whole batch's lines as one
string instead; each function here returns None wherever the per-record path must make them (no
kernels, a shape the kernel leaves alone, bytes that are not valid UTF-8, where Java's replacement
rules apply), so that path stays the definition (tests/partition/test_cat_blocks.py and
tests/inspect/test_dump_blocks.py hold the two together).

ASCII text comes as bytes, the same in any ASCII-compatible encoding, for the caller to write
without a decode and an encode (most of what a text stream costs); other text as str.
"""
from __future__ import annotations

import pyarrow as pa

from kfmt.format.kernels import native


def json_record_lines(records: pa.RecordBatch, skip: int, timestamp_type_json: str, leader_epoch_json: str,
                      where_members: str) -> bytes | str | None:
    """The JSON lines of `records` from `skip` on, joined by newlines (no final one): each line's
    timestamp type and leader epoch given as JSON text, `where_members` the JSON members (",..." or
    "") that say where the record lies."""
    if native is None or type(records) is not pa.RecordBatch:
        return None
    if skip >= records.num_rows:
        return ""
    return _text(native.json_record_lines(records, skip, timestamp_type_json, leader_epoch_json, where_members))


def dump_record_lines(records: pa.RecordBatch, base_offset: int, base_sequence: int, timestamp_type_name: str,
                      print_data_log: bool) -> bytes | str | None:
    """kafka-dump-log's record lines of a v2 data batch's `records` (each ending in a newline), with
    their metadata and, with `print_data_log`, their keys and values, no payload decoder."""
    if native is None or type(records) is not pa.RecordBatch:
        return None
    return _text(native.v2_record_lines(records, base_offset, base_sequence, timestamp_type_name, print_data_log))


def _text(block) -> bytes | str | None:
    if block is NotImplemented:
        return None
    if block.isascii():
        return block
    try:
        return block.decode("utf-8")
    except UnicodeDecodeError:  # malformed UTF-8 somewhere: Java's decoding rules decide
        return None
