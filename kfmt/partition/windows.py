"""Which bytes of a segment can hold the records a query wants: offsets in some intervals and (or)
timestamps at or after some instant. Used to prune what the `kafka-log` data source reads
(kfmt.pipelines.pushdown); every skip is proven from bytes of the log itself, so a stale or missing
`.index` / `.timeindex` costs bytes read, never records.

What may be skipped (docs/format.md §6):
* Offsets are strictly increasing through a segment. The bytes before an entry whose stored offset
  (v2: base offset; legacy: its own, a wrapper's last inner offset) is <= the first wanted offset
  hold smaller offsets only: the start is an offset seek (PartitionReader._index_position, whose
  entry is checked against the header it points at). The bytes after an entry whose stored offset
  is >= the end of the wanted offsets minus one hold larger offsets only: the end is found through
  the `.index` and checked against the header there.
* A `.timeindex` entry (t, o) is written as (maxTimestampSoFar, offsetOfMaxTimestampSoFar): every
  record at an offset <= o has a timestamp <= t. For a lower bound L on timestamps, the last entry
  with t < L lets the read start at offset o + 1. The entry is trusted only if the batch holding o
  has maxTimestamp == t (a stale index from another incarnation of the segment fails that).
* Nothing bounds the timestamps of later records from below (a producer may send any timestamp, and
  a v2 batch's baseTimestamp is its first record's, not its smallest), so an upper bound on
  timestamps never cuts bytes: it only filters rows, and leaves out entries whose frame gives their
  one record's timestamp exactly (an uncompressed v0/v1 message, a single-record v2 batch).
* Where the indexes cannot narrow a segment (missing, stale, zeros) and the store maps files, the
  window is narrowed further by a scan of the frames inside it (headers only,
  kfmt/csrc/frames.c): from the first frame that may hold a wanted record to the end of the last
  one -- the same rule as `frame_mask`, applied before planning, so a partition without index files
  is not read (nor split into tasks) where the window cannot be.
Inside the bytes read, `frame_mask` leaves out (undecoded) the batches that cannot hold a wanted
record: offsets outside the intervals, a maxTimestamp below the lower bound, a single record above
the upper one.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kfmt.format import segment
from kfmt.format.layout import LOG_OVERHEAD, MAGIC_V2, MIN_ENTRY_SIZE
from kfmt.format.wire import OFFSET_AND_SIZE
from kfmt.partition import indexes
from kfmt.partition.layout import Segment
from kfmt.partition.live import maps_files

# bytes read at a time when looking for the batch that holds an offset (one index interval is 4 KiB
# by default; a batch is at most about 1 MiB)
PROBE_BYTES = 64 << 10
CHECKED_ENTRIES = 4  # index entries tried for an end cut before reading to the segment's end


@dataclass(frozen=True)
class Wanted:
    """What a query wants of one partition: offsets in `intervals` (sorted, disjoint, half-open
    [lo, hi), None for an open side; None: every offset) with a timestamp >= `min_timestamp` and <=
    `max_timestamp` (ms; None: any)."""

    intervals: tuple | None = None
    min_timestamp: int | None = None
    max_timestamp: int | None = None

    @property
    def nothing(self) -> bool:
        return self.intervals is not None and not self.intervals

    @property
    def offset_hull(self) -> tuple[int | None, int | None]:
        if not self.intervals:
            return None, None
        return self.intervals[0][0], self.intervals[-1][1]

    @property
    def is_everything(self) -> bool:
        return (self.min_timestamp is None and self.max_timestamp is None
                and self.offset_hull == (None, None))

    @property
    def timed(self) -> bool:
        return self.min_timestamp is not None or self.max_timestamp is not None


def frame_mask(rows: np.ndarray, wanted: Wanted) -> np.ndarray | None:
    """Which frames (FRAME_DTYPE rows) may hold a wanted record; None: all of them."""
    keep = None
    if wanted.min_timestamp is not None:
        keep = rows["max_timestamp"] >= wanted.min_timestamp
    if wanted.max_timestamp is not None:
        # one record whose timestamp the frame gives: a v0/v1 message, a v2 batch of one record
        single = (((rows["magic"] < 2) & (rows["compression"] == 0))
                  | ((rows["magic"] >= 2) & (rows["records_count"] == 1)))
        late = single & (rows["max_timestamp"] > wanted.max_timestamp)
        keep = ~late if keep is None else keep & ~late
    if wanted.intervals is not None:
        # a legacy wrapper's first inner offset is unknown before decompression: taken as unbounded
        wrapper = (rows["magic"] < MAGIC_V2) & (rows["compression"] != 0)
        first = np.where(wrapper, np.iinfo(np.int64).min, rows["base_offset"])
        hit = overlaps(wanted.intervals, first, rows["last_offset"])
        keep = hit if keep is None else keep & hit
    return keep


def overlaps(intervals: tuple, first: np.ndarray, last: np.ndarray) -> np.ndarray:
    """Which [first, last] spans meet one of the sorted, disjoint half-open `intervals` (None: an
    open side). The interval with the largest start <= last has the largest end of those that could
    meet a span: only it needs checking (a binary search, however long an IN list)."""
    if not intervals:
        return np.zeros(len(last), dtype=bool)
    lows = np.array([np.iinfo(np.int64).min if lo is None else lo for lo, _ in intervals], dtype=np.int64)
    highs = np.array([np.iinfo(np.int64).max if hi is None else hi for _, hi in intervals], dtype=np.int64)
    k = np.searchsorted(lows, last, side="right") - 1
    return (k >= 0) & (highs[np.maximum(k, 0)] > first)


def byte_window(reader, seg: Segment, wanted: Wanted) -> tuple[int, int] | None:
    """[start, end) of the bytes of `seg` that can hold wanted records (entry boundaries), or None
    when none can. `reader` is the partition's PartitionReader."""
    lo, hi = wanted.offset_hull
    start, end = 0, seg.size
    if lo is not None and lo > seg.base_offset:
        start = _seek(reader, seg, lo)
    if wanted.min_timestamp is not None:
        after = _last_offset_before(reader, seg, wanted.min_timestamp)
        if after is not None:
            start = max(start, _seek(reader, seg, after + 1))
    if hi is not None:
        end = _end_position(reader, seg, hi)
    if start < end and maps_files(reader.storage) and _unindexed(reader, seg, wanted):
        return _scanned(reader, seg, wanted, start, end)
    return (start, end) if start < end else None


def _unindexed(reader, seg: Segment, wanted: Wanted) -> bool:
    """Whether the indexes a window would seek through are missing or unusable (stale, zeros): the
    window of such a segment is found by a scan of its frames instead."""
    offsets, times = _indexes(reader, seg)
    lo, hi = wanted.offset_hull
    return ((wanted.min_timestamp is not None and (times is None or not len(times)))
            or ((lo is not None or hi is not None) and not len(offsets)))


def _scanned(reader, seg: Segment, wanted: Wanted, start: int, end: int) -> tuple[int, int] | None:
    """[start, end) narrowed to the frames inside it that may hold a wanted record (frame_mask), by
    a scan of their headers; as it was where the scan meets bytes it cannot frame (the read reports
    them)."""
    data = reader.data(seg)
    scanner = segment.FrameScanner(data.buf, data.file, start, end, data.base)
    first = last = None
    for rows in scanner.chunks():
        keep = frame_mask(rows, wanted)
        held = np.flatnonzero(keep) if keep is not None else np.arange(len(rows))
        if len(held):
            if first is None:
                first = int(rows["position"][held[0]])
            row = rows[held[-1]]
            last = int(row["position"]) + int(row["size"])
    if scanner.tail.is_error or scanner.tail.position < end:
        return start, end
    return (first, last) if first is not None else None


def _indexes(reader, seg: Segment) -> tuple[indexes.OffsetColumns, indexes.TimeColumns | None]:
    """The segment's `.index` and `.timeindex` as columns (PartitionReader.offset_columns,
    .time_columns), parsed once per reader: a window asks for them several times."""
    cache = reader.__dict__.setdefault("_window_indexes", {})
    if seg.base_offset not in cache:
        cache[seg.base_offset] = (reader.offset_columns(seg), reader.time_columns(seg))
    return cache[seg.base_offset]


def _seek(reader, seg: Segment, target: int) -> int:
    """Where to start scanning `seg` for offset `target`: PartitionReader._index_position's rule (the
    index's entry if the header there agrees with it, else the segment's start), on parsed indexes."""
    entry = _indexes(reader, seg)[0].lookup(target)
    if entry.position == 0 or not reader.plausible_entry(seg, entry):
        return 0
    return entry.position


def _header(reader, seg: Segment, position: int) -> tuple[int, int] | None:
    """(stored offset, size) of the entry at `position` if it looks like one, else None."""
    if not 0 <= position < seg.size:
        return None
    head = reader.storage.read(seg.log.path, position, position + LOG_OVERHEAD)
    if len(head) < LOG_OVERHEAD:
        return None
    offset, size = OFFSET_AND_SIZE.unpack_from(head)
    if size < MIN_ENTRY_SIZE or position + LOG_OVERHEAD + size > seg.size:
        return None
    return offset, size


def _end_position(reader, seg: Segment, hi: int) -> int:
    """A position after which every entry of `seg` holds offsets >= hi (the segment's size if the
    index cannot show one): the end of an entry whose stored offset is >= hi - 1."""
    columns = _indexes(reader, seg)[0]
    at_or_after = np.flatnonzero(columns.offsets >= hi - 1)  # in file order, as the entries lie
    k = int(at_or_after[0]) if len(at_or_after) else len(columns)
    for e in map(columns.entry, range(k, min(k + CHECKED_ENTRIES, len(columns)))):
        if not reader.plausible_entry(seg, e):
            continue
        head = _header(reader, seg, e.position)
        if head is not None and head[0] >= hi - 1:
            return e.position + LOG_OVERHEAD + head[1]
    return seg.size


def _last_offset_before(reader, seg: Segment, min_timestamp: int) -> int | None:
    """An offset o such that every record of `seg` at an offset <= o has a timestamp below
    `min_timestamp` (from a checked `.timeindex` entry), or None."""
    columns = _indexes(reader, seg)[1]
    if columns is None:
        return None
    entry = columns.lookup(min_timestamp - 1)
    if entry.timestamp < 0 or entry.timestamp >= min_timestamp:
        return None
    return entry.offset if _entry_matches_data(reader, seg, entry) else None


def _entry_matches_data(reader, seg: Segment, entry: indexes.TimeEntry) -> bool:
    """The batch holding the entry's offset has the entry's timestamp as its maxTimestamp."""
    position = _seek(reader, seg, entry.offset)
    while position < seg.size:
        end = min(seg.size, position + PROBE_BYTES)
        data = reader.storage.read(seg.log.path, position, end)
        scanner = segment.FrameScanner(data, reader.part.display(seg.log), position, end, position)
        last = None
        for header in scanner:
            last = header
            if header.last_offset >= entry.offset:
                first = header.base_offset if header.base_offset is not None else -1
                return header.max_timestamp == entry.timestamp and first <= entry.offset
        if last is None:
            return False  # no whole entry in the probe (a batch bigger than it, or bad bytes)
        position = last.position + LOG_OVERHEAD + last.size
    return False
