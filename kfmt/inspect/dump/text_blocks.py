"""kafka-dump-log's record lines a batch at a time (kfmt.format.record_text.dump_record_lines: the
compiled kernel of kfmt/csrc/dump_text.c).

`--deep-iteration` prints a line per record: made one by one in Python (DumpRecord, record_line), a
64 MiB segment of small records took seconds. For the common case, a v2 data batch printed by the
text form with its record metadata and no payload decoder, `record_lines` gives the batch's lines
as one string, the same text record_line makes (tests/test_dump.py holds them together); anything
else (legacy and control batches, decoders, --skip-record-metadata, bytes that are not valid UTF-8,
where Java's replacement rules apply) is left to the per-record path, which stays the definition.
"""
from __future__ import annotations

import numpy as np

from kfmt.format.layout import MAGIC_V2
from kfmt.format.model import Batch
from kfmt.format.record_text import dump_record_lines

_INT64_MAX = (1 << 63) - 1


def record_lines(batch: Batch, options) -> bytes | str | None:
    """The record lines of `batch` (each ending in a newline) as the text form prints them, or None
    where the per-record path must make them. ASCII lines come as bytes, for the sink to write
    without a decode and an encode (most of what its text stream costs); other lines as text."""
    h = batch.header
    if h.magic < MAGIC_V2 or h.is_control or options.decoder is not None or options.skip_record_metadata:
        return None
    return dump_record_lines(batch.records, h.base_offset, h.base_sequence, h.timestamp_type.java_name,
                             options.print_data_log)


def non_consecutive(offsets: np.ndarray, last_offset: int) -> tuple[list[tuple[int, int]], int] | None:
    """dump_log's check over a batch's record offsets at once: the (previous, next) pairs it reports
    and the last offset after them; `last_offset` -1 means none yet (the next offset is not compared,
    as in Kafka's loop). None where numpy's int64 cannot follow Python's arithmetic."""
    if not len(offsets):
        return [], last_offset
    first, last = int(offsets[0]), int(offsets[-1])
    if ((last_offset == -1 or first == last_offset + 1) and last - first == len(offsets) - 1
            and (len(offsets) == 1 or (np.diff(offsets) == 1).all())):
        return [], last  # the usual case: consecutive from the offset before
    previous = np.empty_like(offsets)
    previous[0] = last_offset
    previous[1:] = offsets[:-1]
    if (previous == _INT64_MAX).any():
        return None
    broken = np.flatnonzero((previous != -1) & (offsets != previous + 1))
    return [(int(previous[i]), int(offsets[i])) for i in broken], int(offsets[-1])
