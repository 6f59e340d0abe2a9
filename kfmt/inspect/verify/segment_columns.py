"""What verify's log check keeps of a segment's batches (kfmt.inspect.verify.log): one batch's facts
as the other checks see it, and a segment's batches as columns, which the index, transaction and
checkpoint checks compare their files with."""
from __future__ import annotations

import bisect
from array import array
from dataclasses import dataclass

from kfmt.format.control import ControlType
from kfmt.format.model import NO_PRODUCER_ID
from kfmt.partition.layout import Segment


@dataclass(slots=True)
class BatchFacts:
    """What the other checks need to know about one batch (or legacy entry) of a segment."""

    position: int
    size: int
    #: first offset; for a legacy compressed wrapper only known after decoding (its last offset if
    #: the wrapper could not be decoded, or was not: verify's default depth, docs/format.md §3.4)
    base_offset: int
    last_offset: int
    max_timestamp: int
    magic: int
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = -1
    is_transactional: bool = False
    is_control: bool = False
    partition_leader_epoch: int = -1
    #: the type of a control batch's record; None for data batches and empty/undecodable ones
    control: ControlType | None = None

    def describe(self) -> str:
        """How a message names this batch: "a data batch (offsets 5..9) of producer 7", ..."""
        owner = f" of producer {self.producer_id}" if self.producer_id != NO_PRODUCER_ID else ""
        if self.is_control:
            kind = self.control.name if self.control is not None else "empty or unreadable"
            return f"a control batch ({kind}) at offset {self.base_offset}{owner}"
        return f"a data batch (offsets {self.base_offset}..{self.last_offset}){owner}"


@dataclass(frozen=True, slots=True)
class BatchSpan:
    """Where a batch of a checked segment lies: what the index checks compare entries with."""

    position: int
    size: int
    base_offset: int
    last_offset: int
    max_timestamp: int


class SegmentColumns:
    """The batches of one segment as columns (a segment of small legacy messages holds millions)."""

    def __init__(self, segment: Segment, file: str):
        self.segment = segment
        self.file = file
        self.positions, self.sizes = array("q"), array("q")
        self.base_offsets, self.last_offsets, self.max_timestamps = array("q"), array("q"), array("q")
        #: where the readable entries end: the file size when the framing is intact
        self.readable_end = 0
        #: the partition's last segment ends in a bad tail, which log recovery truncates
        self.recovered_tail = False
        #: every batch's base offset is known: False when the default depth took a compressed v0/v1
        #: wrapper from its header, which carries only its last offset (docs/format.md §3.4)
        self.exact_bases = True

    def add(self, facts: BatchFacts) -> None:
        self.positions.append(facts.position)
        self.sizes.append(facts.size)
        self.base_offsets.append(facts.base_offset)
        self.last_offsets.append(facts.last_offset)
        self.max_timestamps.append(facts.max_timestamp)

    def __len__(self) -> int:
        return len(self.positions)

    def __getitem__(self, i: int) -> BatchSpan:
        return BatchSpan(self.positions[i], self.sizes[i], self.base_offsets[i], self.last_offsets[i],
                         self.max_timestamps[i])

    @property
    def first_offset(self) -> int | None:
        return self.base_offsets[0] if self.positions else None

    @property
    def last_offset(self) -> int | None:
        return self.last_offsets[-1] if self.positions else None

    @property
    def max_timestamp(self) -> int:
        return max(self.max_timestamps, default=-1)

    def index_at(self, position: int) -> int | None:
        """The index of the batch starting exactly at `position`."""
        i = bisect.bisect_left(self.positions, position)
        return i if i < len(self) and self.positions[i] == position else None

    def index_before(self, position: int) -> int:
        """The index of the last batch starting before `position` (-1 if none)."""
        return bisect.bisect_left(self.positions, position) - 1

    def index_holding(self, offset: int) -> int | None:
        """The index of the batch whose offsets [base, last] include `offset`; where a wrapper's
        base is unknown (exact_bases), a batch holds what lies between the previous batch's last
        offset and its own (an older broker's time index names a wrapper's inner offsets)."""
        i = bisect.bisect_left(self.last_offsets, offset)
        if i >= len(self):
            return None
        return i if not self.exact_bases or self.base_offsets[i] <= offset else None
