"""The sparse `.index` and `.timeindex` files (docs/format.md §6).

    .index entry (8 bytes):      relativeOffset int32, position int32
    .timeindex entry (12 bytes): timestamp int64, relativeOffset int32

Relative offsets are against the segment's base offset. A file copied from a running broker is
preallocated and zero-filled past its last entry: reading stops at the first entry after slot 0 whose
relative offset is 0 (what kafka-dump-log does), and a partial trailing entry is ignored.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

OFFSET_ENTRY = struct.Struct(">ii")
TIME_ENTRY = struct.Struct(">qi")


@dataclass(frozen=True, slots=True)
class OffsetEntry:
    offset: int  # absolute
    position: int


@dataclass(frozen=True, slots=True)
class TimeEntry:
    timestamp: int
    offset: int  # absolute


def _entries(data, entry: struct.Struct, base_offset: int):
    n = len(data) // entry.size
    for slot, fields in enumerate(entry.iter_unpack(memoryview(data)[:n * entry.size])):
        relative = fields[0] if entry is OFFSET_ENTRY else fields[1]
        if relative == 0 and slot > 0:
            return  # zero-filled (preallocated) tail
        yield slot, fields


def read_offset_index(data, base_offset: int) -> list[OffsetEntry]:
    return [OffsetEntry(base_offset + rel, pos) for _, (rel, pos) in _entries(data, OFFSET_ENTRY, base_offset)]


def read_time_index(data, base_offset: int) -> list[TimeEntry]:
    return [TimeEntry(ts, base_offset + rel) for _, (ts, rel) in _entries(data, TIME_ENTRY, base_offset)]


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
