"""Log recovery's index walk (Kafka's `LogSegment.recover`, docs/format.md §6.3), stated once: which
batches of a segment get an `.index` entry and which a `.timeindex` entry.

Batch by batch, in file order: the batch with the greatest max timestamp so far is remembered
(timestamp and its last offset); when more than `index.interval.bytes` lie between the batch's
position and the last indexed one, the batch gets an offset entry (last offset, position) and, when
the greatest timestamp is above the last time entry's (TimeIndex.maybeAppend), a time entry
(timestamp, offset of the greatest). Closing the segment appends the greatest timestamp once more
("a normally closed segment always appends the biggest timestamp ever seen").

Two users walk it: kfmt.partition.segment_recovery.SegmentIndexer builds the entries, and
kfmt.write.planner.SegmentPlanner counts them to know when an index is full. Both hold an
`IndexWalk` (the state, named) and call `IndexWalk.add` for one batch (the reference) or
`walk_frames` for rows of frames: the compiled kernel (kfmt/csrc/frames.c `index_frames`) when it is
built, else the same loop here. `walk_frames` stops at the first row SegmentIndexer would refuse
(`refuses`); the caller decides what that row means (the indexer raises, the planner counts it).
Entries are int64 pairs in native byte order (`wire.NATIVE_INT64_PAIR`), as the kernel makes them.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kfmt.format.frames import FRAME_DTYPE
from kfmt.format.kernels import native
from kfmt.format.model import INT32_MAX, NO_TIMESTAMP
from kfmt.format.wire import NATIVE_INT64_PAIR

PAIR_SIZE = NATIVE_INT64_PAIR.size


@dataclass(slots=True)
class IndexWalk:
    """The walk's state over one segment (the kernel takes and returns it as a tuple in this order)."""

    base_offset: int
    interval: int  # index.interval.bytes
    position: int = 0  # Kafka's validBytes: where the next batch starts
    last_indexed_position: int = 0
    max_timestamp: int = NO_TIMESTAMP  # the greatest max timestamp so far
    offset_of_max: int | None = None  # the last offset of the batch that holds it (base offset first)
    last_offset: int | None = None  # of the last batch walked
    last_time_entry: int = NO_TIMESTAMP  # the timestamp of the last time entry

    def __post_init__(self):
        if self.offset_of_max is None:
            self.offset_of_max = self.base_offset

    def add(self, last_offset: int, max_timestamp: int, size: int) -> tuple[tuple | None, tuple | None]:
        """One batch (the definition): its (offset entry, time entry), each None when it gets none."""
        if max_timestamp > self.max_timestamp:
            self.max_timestamp, self.offset_of_max = max_timestamp, last_offset
        offset_entry = time_entry = None
        if self.position - self.last_indexed_position > self.interval:
            offset_entry = (last_offset, self.position)
            time_entry = self.close()
            self.last_indexed_position = self.position
        self.position += size
        self.last_offset = last_offset
        return offset_entry, time_entry

    def close(self) -> tuple | None:
        """The time entry TimeIndex.maybeAppend adds now (at an offset entry, and when the segment
        closes): the greatest timestamp, if it is above the last entry's."""
        if self.max_timestamp <= self.last_time_entry:
            return None
        self.last_time_entry = self.max_timestamp
        return self.max_timestamp, self.offset_of_max

    def refuses(self, position: int, last_offset: int) -> bool:
        """Whether a batch at `position` ending at `last_offset` cannot be the segment's next one:
        not where the last ended, its offset beyond the index's int32 relative offset, or not above
        the last batch's (SegmentIndexer._check says which, and raises)."""
        return (position != self.position or not 0 <= last_offset - self.base_offset <= INT32_MAX
                or (self.last_offset is not None and last_offset <= self.last_offset))

    def _as_tuple(self) -> tuple:
        return (self.base_offset, self.interval, self.position, self.last_indexed_position,
                self.max_timestamp, self.offset_of_max, self.last_offset, self.last_time_entry)


def walk_frames(walk: IndexWalk, rows: np.ndarray, start: int = 0) -> tuple[int, bytes, bytes]:
    """`walk` over rows[start:] of frames (kfmt.format.frames) up to the first row it `refuses`:
    (where it stopped, offset entries, time entries), the entries as int64 pairs (offset, position)
    and (timestamp, offset). One compiled call when the kernels are built."""
    if start >= len(rows):
        return start, b"", b""
    if native is not None and rows.dtype == FRAME_DTYPE:
        stop, state, offsets, times = native.index_frames(np.ascontiguousarray(rows), start, len(rows),
                                                          walk._as_tuple())
        (_, _, walk.position, walk.last_indexed_position, walk.max_timestamp, walk.offset_of_max,
         walk.last_offset, walk.last_time_entry) = state
        return stop, offsets, times
    return _walk_frames_reference(walk, rows, start)


def _walk_frames_reference(walk: IndexWalk, rows: np.ndarray, start: int) -> tuple[int, bytes, bytes]:
    offsets, times, stop = bytearray(), bytearray(), start
    columns = (rows[name][start:].tolist() for name in ("position", "last_offset", "max_timestamp", "size"))
    for position, last_offset, max_timestamp, size in zip(*columns):
        if walk.refuses(position, last_offset):
            break
        offset_entry, time_entry = walk.add(last_offset, max_timestamp, size)
        if offset_entry is not None:
            offsets += NATIVE_INT64_PAIR.pack(*offset_entry)
        if time_entry is not None:
            times += NATIVE_INT64_PAIR.pack(*time_entry)
        stop += 1
    return stop, bytes(offsets), bytes(times)
