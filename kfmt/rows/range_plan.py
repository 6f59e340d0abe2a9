"""Segments as units of parallel work: the byte ranges of a partition's segments that tasks read
(kfmt.rows.ranges reads them), cut at index entries checked as a seek checks them, and packed into
tasks of about a split's size (kfmt.rows.ranges's description says why the cuts are safe)."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from kfmt.defaults import DEFAULT_SPLIT_BYTES
from kfmt.errors import UsageError
from kfmt.partition.indexes import OffsetEntry
from kfmt.partition.layout import PartitionDir
from kfmt.partition.reader import PartitionReader
from kfmt.storage.store import StorageSpec


@dataclass(frozen=True)
class SegmentRange:
    """One unit of work: bytes [start, end) of one segment, starting on an entry boundary."""

    source: StorageSpec  # opens the storage holding the segment
    log_path: str  # the .log inside that storage
    file: str  # how messages name the file
    topic: str
    partition: int
    segment_base: int
    index: int  # its number among the ranges of its segment (0 when the segment is not cut)
    start: int
    end: int
    log_start: int | None = None  # the partition's log start offset (PartitionDir.log_start_offset)
    ends_log: bool = False  # the last range of the partition's last segment: a bad tail there is
    # what log recovery truncates (kfmt.partition.segment), left out with a warning
    segment_size: int | None = None  # the .log's size when listed (None: not checked)
    last_segment: bool = False  # of the partition's last segment (which may grow while read)
    resume_from: int | None = None  # an appending run: the offset it resumes from, which may lie inside
    # a batch; the records below it were exported before and are left out (kfmt.rows.resume)


def partition_identity(part: PartitionDir) -> tuple[str, int]:
    """(topic, partition) of a partition directory, from its `<topic>-<partition>` name."""
    if part.topic is None or part.partition is None:
        raise UsageError(f"{part.storage.url_of(part.path)}: cannot tell the topic and partition from "
                         f"the directory name {part.name!r} (a partition directory is named "
                         f"<topic>-<partition>)")
    return part.topic, part.partition


def plan_ranges(part: PartitionDir, split_bytes: int = DEFAULT_SPLIT_BYTES,
                reader: PartitionReader | None = None) -> list[SegmentRange]:
    """The units of a partition, in offset order; empty segments give none. `reader`: the
    partition's PartitionReader where the caller has one."""
    if split_bytes <= 0:
        raise UsageError(f"the split size must be positive, not {split_bytes}")
    topic, partition = partition_identity(part)
    reader = reader or PartitionReader(part)
    spec = part.storage.spec
    if spec is None:
        raise UsageError("units of work need storage opened with open_storage()")
    out = []
    for seg in part.segments:
        if seg.size == 0:
            continue
        last = seg is part.segments[-1]
        offset_at = {}  # position -> indexed offset (the last entry at a position, as a lookup finds it)
        if seg.size > split_bytes:
            columns = reader.offset_columns(seg)
            offset_at = dict(zip(columns.positions.tolist(), columns.offsets.tolist()))
        cuts = split_points(seg.size, list(offset_at), split_bytes,
                            lambda position: reader.plausible_entry(seg, OffsetEntry(offset_at[position], position)))
        for i, (start, end) in enumerate(zip(cuts, cuts[1:])):
            out.append(SegmentRange(spec, seg.log.path, part.display(seg.log), topic, partition,
                                    seg.base_offset, i, start, end, part.log_start_offset,
                                    last and end == seg.size, seg.size, last))
    return out


def split_points(end: int, entry_starts: list[int], split_bytes: int,
                 usable: Callable[[int], bool] = lambda position: True, start: int = 0) -> list[int]:
    """Range boundaries [start, ..., end] cutting bytes [start, end) of a segment about every
    `split_bytes`, only at known entry starts that are `usable` (asked only of the candidates), so
    that each range begins on an entry boundary: each cut is the first usable entry start at least
    `split_bytes` after the one before."""
    starts = np.unique(np.asarray(entry_starts, dtype=np.int64))
    cuts = [start]
    i = int(np.searchsorted(starts, start + split_bytes))
    while i < len(starts) and starts[i] < end:
        position = int(starts[i])
        if usable(position):
            cuts.append(position)
            i = int(np.searchsorted(starts, position + split_bytes))
        else:
            i += 1
    cuts.append(end)
    return cuts


def split_ranges(ranges: list[SegmentRange], split_bytes: int, reader: PartitionReader) -> list[SegmentRange]:
    """One partition's ranges (offset order, `reader` its PartitionReader) cut further into pieces of
    about `split_bytes`, at index entries checked as plan_ranges checks its cuts; each range is cut
    from its own start, so that what a query narrowed to (kfmt.pipelines.pushdown) is shared evenly.
    The ranges of a segment are numbered again in order."""
    segments = {seg.base_offset: seg for seg in reader.part.segments}
    offsets_at: dict[int, dict] = {}  # segment base -> {entry start: indexed offset}
    pieces = []
    for rng in ranges:
        if rng.end - rng.start <= split_bytes:
            pieces.append(rng)
            continue
        seg = segments[rng.segment_base]
        if seg.base_offset not in offsets_at:
            columns = reader.offset_columns(seg)
            offsets_at[seg.base_offset] = dict(zip(columns.positions.tolist(), columns.offsets.tolist()))
        offset_at = offsets_at[seg.base_offset]
        cuts = split_points(rng.end, list(offset_at), split_bytes,
                            lambda position: reader.plausible_entry(seg, OffsetEntry(offset_at[position], position)),
                            start=rng.start)
        pieces += [replace(rng, start=a, end=b, ends_log=rng.ends_log and b == rng.end)
                   for a, b in zip(cuts, cuts[1:])]
    numbered, seen = [], {}
    for rng in pieces:
        n = seen[rng.segment_base] = seen.get(rng.segment_base, -1) + 1
        numbered.append(rng if rng.index == n else replace(rng, index=n))
    return numbered


def pack_ranges(ranges: list[SegmentRange], target_bytes: int = DEFAULT_SPLIT_BYTES
                ) -> list[tuple[SegmentRange, ...]]:
    """Consecutive ranges of one partition grouped into units of about `target_bytes` at most.

    A Spark task costs tens of milliseconds however little it reads, so segments much smaller than
    a task's worth (time-rolled segments of a quiet topic, compacted ones) share one; a range of a
    cut segment is about `target_bytes` already and stays alone.
    """
    units: list[list[SegmentRange]] = []
    size = 0
    for rng in ranges:
        length = rng.end - rng.start
        last = units[-1][-1] if units else None
        if (last is None or (last.topic, last.partition) != (rng.topic, rng.partition)
                or size + length > target_bytes):
            units.append([])
            size = 0
        units[-1].append(rng)
        size += length
    return [tuple(unit) for unit in units]
