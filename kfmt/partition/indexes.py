"""The sparse `.index` and `.timeindex` files (docs/format.md §6), whose entries kfmt.format.layout
declares (OFFSET_INDEX_ENTRY: relativeOffset int32, position int32; TIME_INDEX_ENTRY: timestamp int64,
relativeOffset int32).

Relative offsets are against the segment's base offset. A file copied from a running broker is
preallocated and zero-filled past its last entry: reading stops at the first entry after slot 0 whose
relative offset is 0 (what kafka-dump-log does), and a partial trailing entry is ignored.

An index is read as columns (`offset_columns`, `time_columns`: numpy arrays, one parse of the whole
file) or as a list of entries built from them; planning a query over many segments needs only a few
entries of each, which the columns give without making an object per entry.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

from kfmt.format.layout import OFFSET_INDEX_ENTRY, TIME_INDEX_ENTRY

OFFSET_ENTRY = OFFSET_INDEX_ENTRY.struct
TIME_ENTRY = TIME_INDEX_ENTRY.struct


@dataclass(frozen=True, slots=True)
class OffsetEntry:
    offset: int  # absolute
    position: int


@dataclass(frozen=True, slots=True)
class TimeEntry:
    timestamp: int
    offset: int  # absolute


OFFSET_ROW = OFFSET_INDEX_ENTRY.dtype()  # relative_offset, position
TIME_ROW = TIME_INDEX_ENTRY.dtype()  # timestamp, relative_offset


def _rows(data, row: np.dtype) -> np.ndarray:
    """The file's whole entries up to the zero-filled tail: the first slot after slot 0 whose
    relative offset is 0 ends them."""
    rows = np.frombuffer(data, row, count=len(data) // row.itemsize)
    ends = np.flatnonzero(rows["relative_offset"][1:] == 0)
    return rows[:ends[0] + 1] if len(ends) else rows


@dataclass(frozen=True)
class OffsetColumns:
    """An `.index` as columns: absolute offsets and positions (int64), in file order."""

    offsets: np.ndarray
    positions: np.ndarray
    base_offset: int

    def __len__(self) -> int:
        return len(self.offsets)

    def entry(self, i: int) -> OffsetEntry:
        return OffsetEntry(int(self.offsets[i]), int(self.positions[i]))

    def lookup(self, target: int) -> OffsetEntry:
        """lookup_offset on the columns (the same binary search, so the same entry even when the
        file is out of order)."""
        i = bisect.bisect_right(self.offsets, target)
        return self.entry(i - 1) if i else OffsetEntry(self.base_offset, 0)


@dataclass(frozen=True)
class TimeColumns:
    """A `.timeindex` as columns: timestamps and absolute offsets (int64), in file order."""

    timestamps: np.ndarray
    offsets: np.ndarray
    base_offset: int

    def __len__(self) -> int:
        return len(self.timestamps)

    def entry(self, i: int) -> TimeEntry:
        return TimeEntry(int(self.timestamps[i]), int(self.offsets[i]))

    def lookup(self, target_ms: int) -> TimeEntry:
        """lookup_time on the columns."""
        i = bisect.bisect_right(self.timestamps, target_ms)
        return self.entry(i - 1) if i else TimeEntry(-1, self.base_offset)


def offset_columns(data, base_offset: int) -> OffsetColumns:
    rows = _rows(data, OFFSET_ROW)
    return OffsetColumns(rows["relative_offset"].astype(np.int64) + base_offset, rows["position"].astype(np.int64),
                         base_offset)


def time_columns(data, base_offset: int) -> TimeColumns:
    rows = _rows(data, TIME_ROW)
    return TimeColumns(rows["timestamp"].astype(np.int64), rows["relative_offset"].astype(np.int64) + base_offset,
                       base_offset)


def offset_entries(columns: OffsetColumns) -> list[OffsetEntry]:
    return [OffsetEntry(o, p) for o, p in zip(columns.offsets.tolist(), columns.positions.tolist())]


def time_entries(columns: TimeColumns) -> list[TimeEntry]:
    return [TimeEntry(t, o) for t, o in zip(columns.timestamps.tolist(), columns.offsets.tolist())]


def read_offset_index(data, base_offset: int) -> list[OffsetEntry]:
    return offset_entries(offset_columns(data, base_offset))


def read_time_index(data, base_offset: int) -> list[TimeEntry]:
    return time_entries(time_columns(data, base_offset))


def write_offset_index(entries, base_offset: int) -> bytes:
    return b"".join(OFFSET_ENTRY.pack(e.offset - base_offset, e.position) for e in entries)


def write_time_index(entries, base_offset: int) -> bytes:
    return b"".join(TIME_ENTRY.pack(e.timestamp, e.offset - base_offset) for e in entries)


def lookup_offset(entries: list[OffsetEntry], target: int, base_offset: int) -> OffsetEntry:
    """The largest entry whose offset is <= target, else (base offset, position 0) (docs/format.md §6.5)."""
    lo, hi = 0, len(entries)
    while lo < hi:
        mid = (lo + hi) // 2
        if entries[mid].offset <= target:
            lo = mid + 1
        else:
            hi = mid
    return entries[lo - 1] if lo else OffsetEntry(base_offset, 0)


def lookup_time(entries: list[TimeEntry], target_ms: int, base_offset: int) -> TimeEntry:
    """The largest entry whose timestamp is <= target, else (-1, base offset) (docs/format.md §6.5)."""
    lo, hi = 0, len(entries)
    while lo < hi:
        mid = (lo + hi) // 2
        if entries[mid].timestamp <= target_ms:
            lo = mid + 1
        else:
            hi = mid
    return entries[lo - 1] if lo else TimeEntry(-1, base_offset)
