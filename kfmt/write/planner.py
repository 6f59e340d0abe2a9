"""Where segments start: the broker's roll conditions applied to batch headers alone (docs/format.md
§12.2, checked before each batch): (1) the segment would grow past `segment.bytes` (a larger batch
gets a segment of its own; batches are never split); (2) the batch's max timestamp lies more than
`segment.ms` after the segment's first batch's (record time, KIP-33); (3) its offset or time index is
full (docs/format.md §6.4); (4) the batch's last offset would not fit the index's int32 relative
offset. A new segment's base is the batch's base offset, so base <= first offset and
`lastOffset - base` fits in int32 (docs/format.md §12.1, §17 item 1)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import numpy as np

from kfmt.defaults import (
    DEFAULT_INDEX_INTERVAL_BYTES,
    DEFAULT_MAX_INDEX_BYTES,
    DEFAULT_SEGMENT_BYTES,
    DEFAULT_SEGMENT_MS,
)
from kfmt.errors import DataError, UsageError
from kfmt.format.frames import header_of
from kfmt.format.index_walk import PAIR_SIZE, IndexWalk, walk_frames
from kfmt.format.model import INT32_MAX, NO_TIMESTAMP, BatchHeader
from kfmt.partition.indexes import OFFSET_ENTRY, TIME_ENTRY

_INT64_MAX = 2**63 - 1



# segment.bytes has a floor of 1 MiB from Kafka 4.0 (LogConfig: atLeast(1024 * 1024); 3.x: 14, the
# smallest v0 message): a 4.x broker refuses a topic configured below it, and rolls no smaller segment.
KAFKA4_MIN_SEGMENT_BYTES = 1024 * 1024


def kafka_version(value: str) -> tuple[int, int]:
    """'3.9', '4.1.0', '4' -> (major, minor)."""
    parts = str(value).split(".")
    try:
        numbers = [int(p) for p in parts[:2]] + [0] * (2 - len(parts[:2]))
    except ValueError:
        numbers = []
    if len(numbers) != 2 or min(numbers) < 0:
        raise UsageError(f"--kafka-version {value!r}: expected a Kafka version such as 3.9 or 4.1")
    return numbers[0], numbers[1]


def check_segment_bytes_for(segment_bytes: int, version: tuple[int, int]) -> None:
    """A segment.bytes the target Kafka version accepts as a topic config."""
    if version >= (4, 0) and segment_bytes < KAFKA4_MIN_SEGMENT_BYTES:
        raise UsageError(f"segment.bytes {segment_bytes} is below Kafka 4's floor of "
                         f"{KAFKA4_MIN_SEGMENT_BYTES} (1 MiB): a 4.x broker neither accepts such a topic "
                         f"config nor rolls such segments; give --kafka-version 3.9 (or older) to cut "
                         f"segments for a 3.x broker")


# Why a segment starts (SegmentPlan.reason)
FIRST = "first"
SEGMENT_BYTES = "segment.bytes"
SEGMENT_MS = "segment.ms"
INDEX_FULL = "index full"
OFFSET_OVERFLOW = "offset overflow"
REQUESTED = "requested"  # by the caller: a transform keeping given boundaries (the cleaner's groups)


@dataclass(frozen=True)
class RollPolicy:
    """The topic configs that decide where segments roll."""

    segment_bytes: int = DEFAULT_SEGMENT_BYTES
    segment_ms: int = DEFAULT_SEGMENT_MS
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES
    max_index_bytes: int = DEFAULT_MAX_INDEX_BYTES

    def __post_init__(self):
        if not 14 <= self.segment_bytes <= INT32_MAX:
            raise UsageError(f"segment.bytes must be between 14 and {INT32_MAX}, got {self.segment_bytes}")
        if self.segment_ms < 1:
            raise UsageError(f"segment.ms must be at least 1, got {self.segment_ms}")
        if self.index_interval_bytes < 0:
            raise UsageError(f"index.interval.bytes must be >= 0, got {self.index_interval_bytes}")
        if self.max_index_bytes < TIME_ENTRY.size:
            # below one time-index entry a segment could not hold the entry every closed segment gets
            raise UsageError(f"segment.index.bytes must be at least {TIME_ENTRY.size}, got "
                             f"{self.max_index_bytes}")

    @property
    def max_offset_entries(self) -> int:
        return self.max_index_bytes // OFFSET_ENTRY.size

    @property
    def max_time_entries(self) -> int:
        return self.max_index_bytes // TIME_ENTRY.size


class SegmentPlanner:
    """The roll decision, batch by batch, from headers alone (picklable, no I/O).

    To know when an index is full it counts the entries recovery will give the segment (docs/format.md §6.3: an
    offset entry when more than index.interval.bytes lie between a batch's position and the last
    indexed one, a time entry there when the running maximum timestamp is new). It only counts: the
    entries themselves come from CompanionBuilder, and the tests check that both counts agree.
    """

    def __init__(self, policy: RollPolicy = RollPolicy(), start_offset: int | None = None):
        self.policy = policy
        self.start_offset = start_offset
        self.base_offset: int | None = None  # of the current segment
        self._walk = IndexWalk(0, policy.index_interval_bytes)  # the current segment's index walk
        self._first_max_timestamp = NO_TIMESTAMP
        self._offset_entries = self._time_entries = 0
        self._roll_requested = False
        self._last_placed: int | None = None  # the last offset placed before the current segment

    @property
    def size(self) -> int:
        """The current segment's size so far."""
        return self._walk.position

    @property
    def last_offset(self) -> int | None:
        """Of the last batch placed."""
        return self._last_placed if self._walk.last_offset is None else self._walk.last_offset

    @property
    def _max_timestamp(self) -> int:
        return self._walk.max_timestamp

    def request_roll(self, base_offset: int | None = None) -> None:
        """Start a new segment: now, at `base_offset` (it may stay empty, as the log cleaner's
        segments may), or else before the next batch, at that batch's base offset."""
        if base_offset is None:
            self._roll_requested = True
            return
        if self.last_offset is not None and base_offset <= self.last_offset:
            raise UsageError(f"a segment base offset {base_offset} must lie above the last offset "
                             f"written, {self.last_offset}")
        if self.base_offset is not None and base_offset <= self.base_offset:
            raise UsageError(f"a segment base offset {base_offset} must lie above the current "
                             f"segment's, {self.base_offset}")
        self._start(base_offset)

    def roll_reason(self, header: BatchHeader) -> str | None:
        """Why `header`'s batch must start a new segment (None: it joins the current one)."""
        if self.base_offset is None:
            return FIRST
        if self._roll_requested:
            return REQUESTED
        if self.size == 0:  # a segment started at a requested base takes the next batch
            first = header.base_offset if header.base_offset is not None else header.last_offset
            # its first batch may begin below the base, as loading checks the last offset (a first
            # segment named after a log start offset inside it: docs/format.md §12.1)
            if header.last_offset < self.base_offset or header.last_offset - self.base_offset > INT32_MAX:
                raise UsageError(f"batch {first}..{header.last_offset} cannot open the segment "
                                 f"requested at base offset {self.base_offset}")
            return None
        p = self.policy
        if self.size > p.segment_bytes - header.size:
            return SEGMENT_BYTES
        if (self._first_max_timestamp >= 0
                and header.max_timestamp - self._first_max_timestamp > p.segment_ms):
            return SEGMENT_MS
        if (self._offset_entries >= p.max_offset_entries
                or self._time_entries >= p.max_time_entries - 1):  # last slot: the closing entry
            return INDEX_FULL
        if header.last_offset - self.base_offset > INT32_MAX:
            return OFFSET_OVERFLOW
        return None

    def place(self, header: BatchHeader) -> str | None:
        """Place the next batch: returns the roll reason if it starts a new segment (whose base is
        then `base_offset`), else None. Offsets must increase from batch to batch."""
        if header.size is None:
            raise UsageError("a batch header needs its size to be placed in a segment")
        first = header.base_offset if header.base_offset is not None else header.last_offset
        if self.last_offset is not None and first <= self.last_offset:
            raise DataError(f"batch {first}..{header.last_offset} does not follow the previous batch's "
                            f"last offset {self.last_offset}: offsets must increase", offset=first)
        reason = self.roll_reason(header)
        if reason is not None:
            self._start(self._new_base(header, reason))
        if header.last_offset < self.base_offset:  # a legacy wrapper's first offset is not known yet
            raise DataError(f"batch ending at offset {header.last_offset} lies below its segment's base "
                            f"offset {self.base_offset} (docs/format.md §12.1)", offset=header.last_offset)
        self._count(header)
        return reason

    def place_frames(self, rows: np.ndarray) -> int:
        """place() for the leading rows of frames (kfmt.format.frames) that join the current segment, many
        at a time: how many it placed, each as place() would have; 0 when the next row must go
        through place() (it starts a segment, or is refused). The rows' positions must be the ones
        they get in the segment (from `size` on)."""
        if not len(rows) or self.base_offset is None or self._roll_requested or self.size == 0:
            return 0
        p = self.policy
        last = rows["last_offset"].astype(np.int64)
        ends = self.size + np.cumsum(rows["size"], dtype=np.int64)
        previous = np.concatenate(([self.last_offset], last[:-1]))
        joins = (rows["base_offset"] > previous) & (last >= self.base_offset) & (ends <= p.segment_bytes)
        if self.base_offset + INT32_MAX <= _INT64_MAX:
            joins &= last <= self.base_offset + INT32_MAX
        if self._first_max_timestamp >= 0 and self._first_max_timestamp + p.segment_ms <= _INT64_MAX:
            joins &= rows["max_timestamp"] <= self._first_max_timestamp + p.segment_ms
        # a full index: each row adds at most one entry of each kind
        room = min(p.max_offset_entries - self._offset_entries,
                   p.max_time_entries - 1 - self._time_entries)
        refused = np.flatnonzero(~joins)
        placed = max(0, min(int(refused[0]) if len(refused) else len(rows), room))
        self._count_rows(rows[:placed])
        return placed

    def _count_rows(self, rows: np.ndarray) -> None:
        """_count() over rows: the index walk over many rows at once (kfmt.format.index_walk)."""
        stop, offsets, times = walk_frames(self._walk, rows)
        self._offset_entries += len(offsets) // PAIR_SIZE
        self._time_entries += len(times) // PAIR_SIZE
        for row in rows[stop:].tolist():  # rows it left (positions other than the segment's)
            self._count(header_of(row))

    def _new_base(self, header: BatchHeader, reason: str) -> int:
        if header.base_offset is not None:
            base = header.base_offset
        else:
            # A legacy compressed wrapper's first offset is unknown without decompressing it (docs/format.md §3.4):
            # like LocalLog.roll, take the log end offset, at least lastOffset - Integer.MAX_VALUE.
            leo = self.last_offset + 1 if self.last_offset is not None else self.start_offset or 0
            base = max(leo, header.last_offset - INT32_MAX)
        if reason == FIRST and self.start_offset is not None:
            if self.start_offset > header.last_offset:
                # Transforms take the start offset from the source's first segment (or a log start
                # offset, which may lie inside the first batch: docs/format.md §12.1); a batch
                # ending below it breaks the rule loading checks.
                raise DataError(f"the first batch's offset {base} lies below the start offset "
                                f"{self.start_offset} (the first segment's base offset)",
                                offset=header.last_offset)
            if header.last_offset - self.start_offset <= INT32_MAX:
                base = self.start_offset
        return base

    def _start(self, base_offset: int) -> None:
        self._last_placed = self.last_offset
        self.base_offset = base_offset
        self._roll_requested = False
        self._walk = IndexWalk(base_offset, self.policy.index_interval_bytes)
        self._first_max_timestamp = NO_TIMESTAMP
        self._offset_entries = self._time_entries = 0

    def _count(self, header: BatchHeader) -> None:
        if self.size == 0:
            self._first_max_timestamp = header.max_timestamp
        offset_entry, time_entry = self._walk.add(header.last_offset, header.max_timestamp, header.size)
        self._offset_entries += offset_entry is not None
        self._time_entries += time_entry is not None


@dataclass(frozen=True)
class SegmentPlan:
    """One planned segment: batches [first, first + count) of the planned sequence, and the spacing
    of its index entries."""

    base_offset: int
    first: int
    count: int
    size: int
    last_offset: int
    reason: str
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES

    @property
    def stop(self) -> int:
        return self.first + self.count


def plan_segments(headers: Iterable[BatchHeader], policy: RollPolicy = RollPolicy(),
                  start_offset: int | None = None) -> list[SegmentPlan]:
    """Where the segments of a partition start, from the headers of its batches in order."""
    planner = SegmentPlanner(policy, start_offset)
    starts: list[tuple[int, int, str]] = []  # (first batch, base offset, reason) per segment
    ends: list[tuple[int, int, int]] = []  # (stop, size, last offset) per segment
    count, last_offset = 0, None
    for header in headers:
        size_before = planner.size
        reason = planner.place(header)
        if reason is not None:
            if starts:
                ends.append((count, size_before, last_offset))
            starts.append((count, planner.base_offset, reason))
        count, last_offset = count + 1, header.last_offset
    if starts:
        ends.append((count, planner.size, last_offset))
    return [SegmentPlan(base, first, stop - first, size, last, reason, policy.index_interval_bytes)
            for (first, base, reason), (stop, size, last) in zip(starts, ends)]
