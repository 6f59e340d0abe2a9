"""Segment ranges from an offset on: what an incremental export (`kfmt export --append`) reads.

A partition's planned ranges (kfmt.rows.ranges.plan_ranges) are cut to begin at the first batch
holding an offset at or after `from_offset`: segments wholly before it are dropped (a segment ends
where the next one begins, docs/format.md §1), and the range of the segment holding it begins at that
batch's entry, found by walking the segment's headers (cheap: no record is decoded). The marks an
export records are batch boundaries of the log as it read it (the offset after the last batch read, or a
last stable offset, which is a batch's first offset), and Kafka's log cleaner keeps them so (a cleaned
v2 batch keeps its last offset: MemoryRecords.filterTo). But a log rewritten between two runs (batches
regrouped by another tool, a replica truncated and refilled after an unclean leader election) or a
backfill's bound can put `from_offset` inside a batch: every range carries it as `resume_from`, and
the reader leaves out the records of that batch below it (kfmt.rows.ranges: counted as
`below_resume_offset`), so no record is exported twice.
"""
from __future__ import annotations

import bisect
import dataclasses

from kfmt.format import segment
from kfmt.partition.layout import PartitionDir
from kfmt.partition.live import segment_bytes
from kfmt.rows.ranges import SegmentRange


def ranges_from(part: PartitionDir, ranges: list[SegmentRange], from_offset: int | None
                ) -> list[SegmentRange]:
    """The part of `ranges` (a partition's, in offset order) from `from_offset` on (all of them for
    None)."""
    if from_offset is None or not ranges:
        return ranges
    bases = [seg.base_offset for seg in part.segments]
    # the segment holding from_offset: the last whose base offset is at or below it
    holding = bases[max(bisect.bisect_right(bases, from_offset) - 1, 0)]
    start = _first_position_from(part, holding, from_offset)
    out = []
    for rng in ranges:
        if rng.segment_base < holding:
            continue
        if rng.segment_base == holding:
            if start is None or rng.end <= start:
                continue
            if rng.start < start:
                rng = dataclasses.replace(rng, start=start)
        out.append(dataclasses.replace(rng, resume_from=from_offset))
    return out


def _first_position_from(part: PartitionDir, base_offset: int, from_offset: int) -> int | None:
    """The file position of the first entry of segment `base_offset` that holds an offset at or after
    `from_offset`, or None if none does."""
    seg = next(s for s in part.segments if s.base_offset == base_offset)
    file = part.display(seg.log)
    data, base = segment_bytes(part.storage, seg.log.path, file, seg.log.size, seg is part.segments[-1])
    # Only the listed bytes: the ranges end there. A tail that is not an entry (an append in
    # progress, a crash-cut one) holds no offset to start at; reading the ranges reports it.
    for header in segment.FrameScanner(data, file, base, min(base + len(data), seg.log.size), base):
        if header.last_offset >= from_offset:
            return header.position
    return None
