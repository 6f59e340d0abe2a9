"""Reading a partition: batches in offset order, with seeks through the indexes as Kafka does them.

Offset seek (docs/format.md §6.5): the segment is the one with the largest base offset <= target; its
sparse `.index` gives the largest indexed offset <= target and a position; batches are scanned from
there, skipping (without decoding) those whose last offset is below the target.
Timestamp seek (LogSegment.findOffsetByTimestamp): the first segment whose largest timestamp (its last
`.timeindex` entry) is >= target; its `.timeindex` then `.index` give a start position; the answer
is the first record with timestamp >= target, and reading continues from there.

Consumer view (`from_log_start=True`): seeks start at the partition's log start offset
(PartitionDir.log_start_offset), as a broker serves the partition after DeleteRecords or retention:
an offset below it is read from the log start (a consumer's reset to earliest), and a timestamp
seek answers with the first record at or after both the timestamp and the log start offset
(LogSegment.findOffsetByTimestamp with the log start offset as its starting offset).

Segments before the target are never read; a missing or implausible index costs a scan of its one
segment, never of the partition. Only the byte range from the start position is read.
"""
from __future__ import annotations

import bisect
from collections import OrderedDict
from dataclasses import dataclass
from typing import Iterator, Protocol

import numpy as np

from kfmt.format import segment
from kfmt.format.message_formats import STRICT, ReadOptions
from kfmt.format.layout import HEADER_SIZE_UP_TO_MAGIC, LOG_OVERHEAD, MAGIC_AT, MIN_ENTRY_SIZE
from kfmt.format.model import INT32_MAX, NO_TIMESTAMP, Batch, BatchHeader
from kfmt.format.wire import OFFSET_AND_SIZE
from kfmt.partition import indexes
from kfmt.partition.layout import PartitionDir, Segment
from kfmt.partition.live import is_gone, read_companion, segment_bytes
from kfmt.plugin import registry


@dataclass
class SegmentData:
    """Bytes of a segment from file position `base` to its end."""

    segment: Segment
    buf: object
    base: int
    file: str


class SegmentWalker(Protocol):
    """What sees a partition's segments entry by entry, a chunk of frame rows (kfmt.format.frames) at a
    time, in file order: PartitionReader.walk shows them, and so does verify's log check, so that one
    pass over the bytes feeds verify, info and the report's per-segment facts at once."""

    done: bool  # nothing more wanted (info stops at its first error)

    def on_segment(self, seg: Segment, data: SegmentData) -> None: ...

    def on_chunk(self, seg: Segment, data: SegmentData, rows: np.ndarray) -> None: ...

    def on_tail(self, seg: Segment, data: SegmentData, tail: segment.Tail) -> None: ...


class PartitionReader:
    def __init__(self, part: PartitionDir, options: ReadOptions = STRICT, cache_segments: int = 3,
                 from_log_start: bool = False, recover_tail: bool = False):
        self.part = part
        # A bad tail of the last segment: left out with a warning, as log recovery truncates it
        # (kfmt.partition.segment), rather than an error.
        self.recover_tail = recover_tail
        # The first offset read (None: everything, the deleted records below the log start too).
        self.floor = part.log_start_offset if from_log_start else None
        self.storage = part.storage
        self.options = options
        self._cache: OrderedDict = OrderedDict()
        self._cache_size = cache_segments
        self._base_offsets = [seg.base_offset for seg in part.segments]

    # --- bytes ---
    def data(self, seg: Segment, start: int = 0) -> SegmentData:
        """The bytes of `seg` from `start` on (cached: look-ahead readers share them). Raises
        SegmentGone (kfmt.partition.live) for a segment the broker deleted or replaced since the
        listing."""
        key = seg.base_offset
        hit = self._cache.get(key)
        if hit is not None and hit.base <= start:
            self._cache.move_to_end(key)
            return hit
        file = self.part.display(seg.log)
        buf, base = segment_bytes(self.storage, seg.log.path, file, seg.log.size,
                                  seg is self.part.segments[-1], start)
        data = SegmentData(seg, buf, base, file)
        self._cache[key] = data
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return data

    def frames(self, seg: Segment, start: int = 0) -> Iterator[BatchHeader]:
        d = self.data(seg, start)
        return segment.scan(d.buf, d.file, start, None, d.base,
                            recover_tail=self.recover_tail and seg is self.part.segments[-1])

    def frame_chunks(self, seg: Segment) -> Iterator[np.ndarray]:
        """frames() as arrays of frame rows (kfmt.format.frames), a chunk at a time: for whoever wants
        a column of the headers, without a BatchHeader per entry."""
        d = self.data(seg)
        scanner = segment.FrameScanner(d.buf, d.file, None, None, d.base)
        yield from scanner.chunks()
        if scanner.tail.is_error:
            if not (self.recover_tail and seg is self.part.segments[-1]):
                raise scanner.tail.error(d.file)
            scanner.tail.recovered(d.file)

    def walk(self, walkers: list) -> None:
        """Show every segment's entries, as chunks of frame rows, to each of `walkers` (SegmentWalker)
        in one pass over the bytes, until every walker is done: what `kfmt info` and the report's
        per-segment facts are computed from. A bad tail is shown to the walkers, not raised."""
        for seg in self.part.segments:
            if all(w.done for w in walkers):
                return
            d = self.data(seg)
            for w in walkers:
                w.on_segment(seg, d)
            scanner = segment.FrameScanner(d.buf, d.file, None, None, d.base)
            for rows in scanner.chunks():
                for w in walkers:
                    if not w.done:
                        w.on_chunk(seg, d, rows)
            for w in walkers:
                w.on_tail(seg, d, scanner.tail)

    def decode(self, seg: Segment, header: BatchHeader) -> Batch:
        d = self.data(seg, header.position)
        return segment.decode(d.buf, header, d.file, self.options, d.base)

    # --- batches ---
    def start_point(self, from_offset: int | None = None, from_timestamp: int | None = None
                    ) -> tuple[int, int, int | None] | None:
        """(segment index, file position, first offset wanted) of a seek; None if nothing qualifies."""
        if from_timestamp is not None:
            return self._seek_timestamp(from_timestamp)
        # also at the first segment's base offset: its first batch may begin below (docs/format.md §12.1)
        if self.floor is not None and self.part.segments and self.floor >= self.part.segments[0].base_offset:
            from_offset = self.floor if from_offset is None else max(from_offset, self.floor)
        if from_offset is not None:
            return (*self._seek_offset(from_offset), from_offset)
        return 0, 0, None

    def batches(self, from_offset: int | None = None, from_timestamp: int | None = None
                ) -> Iterator[tuple[Segment, Batch, int]]:
        """(segment, batch, index of its first record wanted) in offset order from the seek point."""
        start = self.start_point(from_offset, from_timestamp)
        if start is not None:
            yield from self.batches_from(*start)

    def batches_from(self, seg_index: int, position: int, from_offset: int | None
                     ) -> Iterator[tuple[Segment, Batch, int]]:
        segs = self.part.segments
        for i in range(seg_index, len(segs)):
            seg = segs[i]
            for header in self.frames(seg, position if i == seg_index else 0):
                if from_offset is not None and header.last_offset < from_offset:
                    continue  # before the target: skipped on its header alone
                batch = self.decode(seg, header)
                skip = 0
                if from_offset is not None and batch.header.base_offset < from_offset:
                    offsets = batch.records.column(0).to_pylist()
                    while skip < len(offsets) and offsets[skip] < from_offset:
                        skip += 1
                yield seg, batch, skip

    def _segment_for_offset(self, target: int) -> int:
        """The last segment whose base offset is <= target (the first one for earlier targets)."""
        return max(bisect.bisect_right(self._base_offsets, target) - 1, 0)

    def _seek_offset(self, target: int) -> tuple[int, int]:
        i = self._segment_for_offset(target)
        if not self.part.segments:
            return 0, 0
        return i, self._index_position(self.part.segments[i], target)

    def offset_index(self, seg: Segment) -> list[indexes.OffsetEntry]:
        return indexes.offset_entries(self.offset_columns(seg))

    def offset_columns(self, seg: Segment) -> indexes.OffsetColumns:
        """The segment's `.index` as columns (empty when the file is missing or gone)."""
        data = None
        if seg.index is not None and seg.index.size:
            data = read_companion(self.storage, seg.index.path)
        return indexes.offset_columns(b"" if data is None else data, seg.base_offset)

    def time_index(self, seg: Segment) -> list[indexes.TimeEntry] | None:
        """The segment's time index; None if the file is missing or fails the checks below (the
        caller must scan the segment instead)."""
        columns = self.time_columns(seg)
        return None if columns is None else indexes.time_entries(columns)

    def time_columns(self, seg: Segment) -> indexes.TimeColumns | None:
        """time_index as columns."""
        if seg.timeindex is None:
            return None
        if seg.timeindex.size == 0:
            return indexes.time_columns(b"", seg.base_offset)
        data = read_companion(self.storage, seg.timeindex.path)
        if data is None:  # deleted or replaced since the listing
            return None
        columns = indexes.time_columns(data, seg.base_offset)
        return columns if self._sane_time_index(seg, data, columns) else None

    def _sane_time_index(self, seg: Segment, data, columns: indexes.TimeColumns) -> bool:
        """Kafka's TimeIndex.sanityCheck (whole entries, last entry not before the first or the
        base offset) plus the invariants of §6.3: timestamps strictly increasing, offsets
        non-decreasing and inside the segment. A file of zeros (a preallocated index with no entry
        yet, or a wiped one) says nothing about the segment's timestamps."""
        if len(data) % indexes.TIME_ENTRY.size or not any(data):
            return False
        offsets = columns.offsets
        following = self._next_base_offset(seg)
        if not np.all((offsets >= seg.base_offset) & (offsets < following)):
            return False
        return bool(np.all(np.diff(columns.timestamps) > 0) and np.all(np.diff(offsets) >= 0))

    def _next_base_offset(self, seg: Segment) -> int:
        """Where the next segment starts (the last segment may hold int32 offsets, §18.16)."""
        i = bisect.bisect_right(self._base_offsets, seg.base_offset)
        return self._base_offsets[i] if i < len(self._base_offsets) else seg.base_offset + INT32_MAX + 1

    def _index_position(self, seg: Segment, target: int) -> int:
        """Where to start scanning for `target` in `seg`: the index's answer if it is plausible."""
        entry = self.offset_columns(seg).lookup(target)  # lookup_offset, without an object per entry
        if entry.position == 0:
            return 0
        if self.plausible_entry(seg, entry):
            return entry.position
        return 0  # a stale or corrupt index: scan this one segment instead

    def plausible_entry(self, seg: Segment, entry: indexes.OffsetEntry) -> bool:
        """An index entry must point at an entry boundary holding offsets up to the indexed one.

        Bytes 0-7 of every entry hold the v2 base offset or the legacy (last) offset: either way at
        most the indexed offset, which is the last offset of the batch (or append) there.
        """
        if not 0 < entry.position < seg.log.size or entry.offset < seg.base_offset:
            return False
        try:
            head = self.storage.read(seg.log.path, entry.position, entry.position + HEADER_SIZE_UP_TO_MAGIC)
        except OSError as err:
            if is_gone(err):
                return False  # reading the segment itself says so
            raise
        if len(head) < HEADER_SIZE_UP_TO_MAGIC:
            return False
        offset, size = OFFSET_AND_SIZE.unpack_from(head)
        return (head[MAGIC_AT] in registry.get().formats and size >= MIN_ENTRY_SIZE
                and entry.position + LOG_OVERHEAD + size <= seg.log.size
                and seg.base_offset <= offset <= entry.offset)

    def largest_timestamp(self, seg: Segment, scanned: int | None = None) -> int:
        """The segment's largest timestamp: its last time-index entry (docs/format.md §6.3), or a frame scan of
        the segment when the index cannot say. The last segment is always scanned: while it is
        active its time index lacks the final entry Kafka adds at roll or close, so the copy of a
        running broker's partition holds records newer than the index's last entry. `scanned`: that
        scan's answer (frames_largest_timestamp), where the caller has just walked the frames."""
        entries = self.time_index(seg)
        if entries and seg is not self.part.segments[-1]:
            return entries[-1].timestamp
        if scanned is not None:
            return scanned
        return frames_largest_timestamp(self.frame_chunks(seg))

    def _seek_timestamp(self, target: int) -> tuple[int, int, int] | None:
        floor = self.floor if self.floor is not None else -1
        first = self._segment_for_offset(floor) if self.floor is not None else 0
        for i, seg in enumerate(self.part.segments[first:], first):
            if self.largest_timestamp(seg) < target:
                continue
            entries = self.time_index(seg) or []
            hint = indexes.lookup_time(entries, target, seg.base_offset)
            start = self._index_position(seg, max(hint.offset, seg.base_offset, floor))
            for header in self.frames(seg, start):
                if header.max_timestamp < target or header.last_offset < floor:
                    continue
                batch = self.decode(seg, header)
                for offset, ts in zip(batch.records.column(0).to_pylist(),
                                      batch.records.column(1).to_pylist()):
                    if ts >= target and offset >= floor:
                        return i, header.position, offset
            # The index promised a timestamp the data does not hold: keep looking in later segments.
        return None


def frames_largest_timestamp(chunks) -> int:
    """The largest max_timestamp of chunks of frame rows (NO_TIMESTAMP when they hold none)."""
    return max((int(rows["max_timestamp"].max()) for rows in chunks if len(rows)), default=NO_TIMESTAMP)


def log_end_offset(reader: PartitionReader) -> int:
    """The offset after the last batch (the last segment's base offset if it holds none)."""
    segs = reader.part.segments
    if not segs:
        return 0
    end = segs[-1].base_offset
    for rows in reader.frame_chunks(segs[-1]):
        if len(rows):
            end = int(rows["last_offset"][-1]) + 1  # the last header's next offset
    return end
