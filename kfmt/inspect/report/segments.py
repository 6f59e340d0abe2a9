"""Where a partition's segments lie, from their entry headers only (the frame walk, kfmt.format.frames):
per segment its offsets, timestamps, entries, transactional and control batches and the offset gaps
between its entries -- what the report draws on its time axis. Nothing is inflated or decoded: a
report of a multi-GB directory walks headers, as `kfmt info` does for its uncompressed runs.

Header facts are what a broker itself keeps per segment: the largest timestamp of a segment is the
greatest `max_timestamp` of its entries (what time retention compares, LogSegment.largestTimestamp);
the first timestamp is a v2 batch's base timestamp, else a legacy entry's own timestamp. A legacy
compressed wrapper's offset field is its LAST inner offset (docs/format.md §3.4), so a segment whose
first entry is one starts, as far as headers tell, there; offset gaps are only counted between
entries whose first offset the header states (v2 batches, uncompressed legacy messages).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from kfmt.format.frames import ATTR_CONTROL, ATTR_TRANSACTIONAL
from kfmt.format.layout import MAGIC_V2
from kfmt.partition.layout import PartitionDir, Segment


@dataclass
class SegmentFacts:
    base_offset: int
    size: int
    entries: int = 0
    first_offset: int | None = None  # the first entry's first offset (a legacy wrapper's: the segment's base)
    last_offset: int | None = None  # the last entry's last offset
    first_timestamp: int | None = None  # the least entry timestamp >= 0 the headers state
    largest_timestamp: int | None = None  # LogSegment.largestTimestamp (None: no entry carries one)
    transactional_batches: int = 0
    control_batches: int = 0
    gaps: int = 0  # offset gaps between consecutive entries
    missing_offsets: int = 0  # offsets inside those gaps
    unreadable_at: int | None = None  # the file position where the framing broke (verify says why)

    def to_json(self) -> dict:
        return asdict(self)


class SegmentWalk:
    """The facts of each segment of a partition, as a SegmentWalker (kfmt.partition.reader) is shown
    its entries: by PartitionReader.walk beside info's walk, or by verify's log check. A segment
    whose framing breaks keeps what came before the break, and `unreadable_at` says where; a bad
    tail of the last segment, which log recovery truncates, ends it without one (info warns)."""

    done = False  # every segment is wanted

    def __init__(self, part: PartitionDir):
        self.part = part
        self.segments: list[SegmentFacts] = []

    def on_segment(self, seg: Segment, d) -> None:
        self.segments.append(SegmentFacts(seg.base_offset, seg.size))

    def on_chunk(self, seg: Segment, d, rows: np.ndarray) -> None:
        if len(rows):
            _add(self.segments[-1], np.ascontiguousarray(rows))

    def on_tail(self, seg: Segment, d, tail) -> None:
        if tail.is_error and seg is not self.part.segments[-1]:
            self.segments[-1].unreadable_at = tail.position


def _add(facts: SegmentFacts, rows: np.ndarray) -> None:
    magic, attrs = rows["magic"], rows["attributes"]
    v2 = magic == MAGIC_V2
    facts.entries += len(rows)
    # gaps: the previous chunk's last entry, then each entry whose first offset its header states
    stated = v2 | (rows["compression"] == 0)
    if facts.first_offset is None:
        facts.first_offset = int(rows["base_offset"][0]) if stated[0] else facts.base_offset
    previous_last = np.concatenate(([facts.last_offset if facts.last_offset is not None else -1],
                                    rows["last_offset"][:-1]))
    jumps = (rows["base_offset"] - previous_last - 1)[stated & (previous_last >= 0)]
    jumps = jumps[jumps > 0]
    facts.gaps += len(jumps)
    facts.missing_offsets += int(jumps.sum())
    facts.last_offset = int(rows["last_offset"][-1])
    first_ts = np.where(v2 & (rows["base_timestamp"] >= 0), rows["base_timestamp"], rows["max_timestamp"])
    first_ts = first_ts[first_ts >= 0]
    if len(first_ts):
        low = int(first_ts.min())
        facts.first_timestamp = low if facts.first_timestamp is None else min(facts.first_timestamp, low)
    largest = rows["max_timestamp"][rows["max_timestamp"] >= 0]
    if len(largest):
        high = int(largest.max())
        facts.largest_timestamp = high if facts.largest_timestamp is None else max(facts.largest_timestamp, high)
    facts.transactional_batches += int(np.count_nonzero(v2 & ((attrs & ATTR_TRANSACTIONAL) != 0)))
    facts.control_batches += int(np.count_nonzero(v2 & ((attrs & ATTR_CONTROL) != 0)))
