"""Frames as arrays: one row per log entry holding its header facts (those of BatchHeader) as numbers.

A frame scan that makes one BatchHeader per entry costs microseconds an entry: fine for v2 batches
of hundreds of records, too slow for the millions of single-message entries of an uncompressed v0/v1
segment. `FrameScanner.chunks()` (kfmt.format.segment) yields the same facts as numpy structured arrays of
FRAME_DTYPE, a bounded number of rows at a time, for array-at-a-time callers: index building
(CompanionBuilder.add_frames), runs of legacy messages (kfmt.format.legacy_runs), plans and statistics.

Row conventions where BatchHeader says None: a legacy compressed wrapper's base_offset is its own
offset field (its LAST inner offset) and its records_count is -1; the first offset and the count are
known only after decompression (docs/format.md §3.4). Legacy rows have base_timestamp, producer fields and
partition_leader_epoch -1, as BatchHeader's defaults; timestamp_type is TimestampType's value.
"""
from __future__ import annotations

import numpy as np

from kfmt.format.kernels import native
from kfmt.format.layout import (
    ATTR_CONTROL,
    ATTR_DELETE_HORIZON,
    ATTR_TRANSACTIONAL,
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_ENTRY,
    LOG_OVERHEAD,
    MAGIC_V2,
)
from kfmt.format.model import BatchHeader, TimestampType

FIELDS = [
    ("position", np.int64), ("base_offset", np.int64), ("last_offset", np.int64),
    ("max_timestamp", np.int64), ("base_timestamp", np.int64), ("producer_id", np.int64),
    ("size", np.int32), ("partition_leader_epoch", np.int32), ("base_sequence", np.int32),
    ("records_count", np.int32), ("crc", np.uint32), ("attributes", np.int16),
    ("producer_epoch", np.int16), ("magic", np.int8), ("compression", np.int8),
    ("timestamp_type", np.int8),
]

def _dtype() -> np.dtype:
    if native is None:
        return np.dtype(FIELDS, align=True)
    # The compiled scanner writes C structs: take their layout from it (same names and types).
    itemsize, layout = native.frame_layout()
    if [name for name, _ in layout] != [name for name, _ in FIELDS]:
        raise ImportError("kfmt._speedups was built from other sources than this kfmt: rebuild it")
    return np.dtype({"names": [n for n, _ in FIELDS], "formats": [t for _, t in FIELDS],
                     "offsets": [offset for _, offset in layout], "itemsize": itemsize}, align=True)


FRAME_DTYPE = _dtype()
_TIMESTAMP_TYPES = {t.value: t for t in TimestampType}


def header_of(row: tuple) -> BatchHeader:
    """The BatchHeader of one row (a tuple in FIELDS order, as `rows.tolist()` gives)."""
    (position, base_offset, last_offset, max_ts, base_ts, producer_id, size, leader_epoch, base_seq,
     count, crc, attrs, producer_epoch, magic, codec, ts_type) = row
    if magic < MAGIC_V2:
        wrapper = codec != 0
        return BatchHeader(magic, None if wrapper else base_offset, last_offset, codec,
                           _TIMESTAMP_TYPES[ts_type], max_ts, records_count=None if wrapper else count,
                           attributes=attrs, position=position, size=size, crc=crc)
    return BatchHeader(magic, base_offset, last_offset, codec, _TIMESTAMP_TYPES[ts_type], max_ts,
                       base_ts, leader_epoch, producer_id, producer_epoch, base_seq, count,
                       bool(attrs & ATTR_TRANSACTIONAL), bool(attrs & ATTR_CONTROL),
                       bool(attrs & ATTR_DELETE_HORIZON), attrs, position, size, crc)


def headers_of(rows: np.ndarray) -> list[BatchHeader]:
    return [header_of(row) for row in rows.tolist()]


def rows_of(headers: list[BatchHeader]) -> np.ndarray:
    """Rows for headers (those of a scan: position and size set)."""
    return np.array([_row(h) for h in headers], dtype=FRAME_DTYPE)


def _row(h: BatchHeader) -> tuple:
    wrapper = h.magic < MAGIC_V2 and h.compression != 0
    return (h.position, h.last_offset if wrapper else h.base_offset, h.last_offset, h.max_timestamp,
            h.base_timestamp, h.producer_id, h.size, h.partition_leader_epoch, h.base_sequence,
            -1 if wrapper else h.records_count, h.crc, h.attributes, h.producer_epoch, h.magic,
            h.compression, int(h.timestamp_type))


EMPTY_ROWS = np.zeros(0, dtype=FRAME_DTYPE)
_ENTRY_START = LOG_ENTRY.dtype()  # offset, size, crc_or_leader_epoch, magic: the reference's view


def first_undescribed(entries, rows: np.ndarray, base: int) -> int:
    """The first of `rows` whose entry (at its position in `entries`, bytes that start at file position
    `base`) does not begin as the row says -- stored offset (a v2 batch's base offset, a legacy
    entry's own), size and magic --, len(rows) when every row does: one compiled call
    (kfmt/csrc/frames.c frames_describe) or the numpy reference. Each row's entry must lie inside
    `entries` and hold HEADER_SIZE_UP_TO_MAGIC bytes at least (the caller checks the sizes)."""
    if native is not None and rows.dtype == FRAME_DTYPE:
        return native.frames_describe(entries, np.ascontiguousarray(rows), 0, len(rows), base)
    starts = rows["position"].astype(np.int64) - base
    head = np.frombuffer(entries, np.uint8)[starts[:, None] + np.arange(HEADER_SIZE_UP_TO_MAGIC)]
    head = head.copy().view(_ENTRY_START).ravel()
    stored = np.where(rows["magic"] >= MAGIC_V2, rows["base_offset"], rows["last_offset"])
    wrong = np.flatnonzero((head["size"].astype(np.int64) + LOG_OVERHEAD != rows["size"])
                           | (head["magic"] != rows["magic"]) | (head["offset"] != stored))
    return int(wrong[0]) if len(wrong) else len(rows)
