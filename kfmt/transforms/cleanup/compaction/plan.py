"""What a cleaning covers: the cleanable range, the dirty ratio, the groups of segments it rewrites
(docs/format.md §14; Kafka's `LogCleanerManager.cleanableOffsets`, `LogToClean`, `Cleaner.doClean` and
`groupSegmentsBySize`).

* The dirty section starts at the cleaner's checkpoint (`cleaner-offset-checkpoint`), or at the log
  start offset when there is none or it lies outside [log start, log end].
* It ends at the first uncleanable offset: the least of the last stable offset (nothing undecided
  is cleaned, nor anything past the high watermark), the active segment's base offset, the base of
  the first dirty segment newer than `min.compaction.lag.ms`, and kfmt's `--clean-until`; rounded
  down to the base offset of the segment holding it, so a cleaning always ends at a segment boundary.
* The dirty ratio is cleanable bytes / (clean bytes + cleanable bytes), by whole segments.
* The cleaning rewrites every segment from the start of the log up to the end of the mapped range, in
  groups of consecutive segments whose `.log` sizes add up to at most `segment.bytes`, whose `.index`
  and `.timeindex` sizes each to at most `segment.index.bytes`, and whose offsets span at most
  Integer.MAX_VALUE; each group becomes one segment named after its first segment.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass

from kfmt.format.model import INT32_MAX
from kfmt.transforms.cleanup.compaction.facts import SegmentInfo


@dataclass(frozen=True)
class CleanableRange:
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    bounded_by: str  # what the first uncleanable offset is
    checkpoint_note: str | None = None  # why the checkpoint was not used as it is

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.cleanable_bytes
        return self.cleanable_bytes / total if total else 0.0

    @property
    def cleanable(self) -> bool:
        return self.first_uncleanable_offset > self.first_dirty_offset


def segments_between(segments: list[SegmentInfo], start: int, end: int) -> list[SegmentInfo]:
    """LogSegments.values(from, to): the segment holding `start` (the first one if `start` lies
    below it) and the following ones whose base offset is below `end`."""
    if start == end:
        return []
    bases = [s.base_offset for s in segments]
    first = max(bisect.bisect_right(bases, start) - 1, 0)
    return [s for s in segments[first:] if s.base_offset < end]


def cleanable_range(segments: list[SegmentInfo], *, log_start_offset: int, log_end_offset: int,
                    checkpoint: int | None, last_stable_offset: int, clean_until: int | None,
                    min_compaction_lag_ms: int, now_ms: int, compacts: bool = True) -> CleanableRange:
    """`compacts`: the topic's cleanup.policy includes compact (without it the cleaner never takes
    the log: nothing is cleanable)."""
    note = None
    first_dirty = log_start_offset if checkpoint is None else checkpoint
    if checkpoint is not None and checkpoint < log_start_offset:
        note = f"cleaner checkpoint {checkpoint} lies below the log start offset {log_start_offset}"
        first_dirty = log_start_offset
    elif checkpoint is not None and checkpoint > log_end_offset:
        note = f"cleaner checkpoint {checkpoint} lies beyond the log end offset {log_end_offset}"
        first_dirty = log_start_offset
    active = segments[-1]
    bounds = [(last_stable_offset, "the last stable offset"), (active.base_offset, "the active segment")]
    if clean_until is not None:
        bounds.append((clean_until, "--clean-until"))
    if not compacts:  # first, so that it names the bound when others coincide
        bounds.insert(0, (first_dirty, "cleanup.policy without compact"))
    if min_compaction_lag_ms > 0:
        for seg in _non_active_from(segments, first_dirty):
            if seg.largest_timestamp > now_ms - min_compaction_lag_ms:
                bounds.append((seg.base_offset, "min.compaction.lag.ms"))
                break
    uncleanable, bounded_by = min(bounds, key=lambda b: b[0])
    uncleanable = max(first_dirty, uncleanable)
    # LogCleanerManager.calculateCleanableBytes: round down to the base of the segment holding it
    holders = _non_active_from(segments, uncleanable)
    first_uncleanable = (holders[0] if holders else active).base_offset
    clean = sum(s.size for s in segments if s.base_offset < first_dirty)
    cleanable = sum(s.size for s in segments_between(segments, min(first_dirty, first_uncleanable),
                                                      first_uncleanable))
    return CleanableRange(first_dirty, first_uncleanable, clean, cleanable, bounded_by, note)


def _non_active_from(segments: list[SegmentInfo], offset: int) -> list[SegmentInfo]:
    """LocalLog.nonActiveLogSegmentsFrom."""
    active = segments[-1]
    if offset > active.base_offset:
        return []
    return segments_between(segments, offset, active.base_offset)


def group_segments(segments: list[SegmentInfo], max_size: int, max_index_size: int,
                   first_uncleanable_offset: int) -> list[list[SegmentInfo]]:
    """Cleaner.groupSegmentsBySize."""
    groups = []
    rest = list(segments)
    while rest:
        group = [rest.pop(0)]
        log_size, index_size, time_size = group[0].size, group[0].index_bytes, group[0].timeindex_bytes
        while rest:
            nxt = rest[0]
            # the last offset of `nxt`, bounded by the next segment's base (or the cleaning's end)
            last = rest[1].base_offset - 1 if len(rest) > 1 else first_uncleanable_offset - 1
            if not (log_size + nxt.size <= max_size
                    and index_size + nxt.index_bytes <= max_index_size
                    and time_size + nxt.timeindex_bytes <= max_index_size
                    and (nxt.size == 0 or last - group[0].base_offset <= INT32_MAX)):
                break
            group.append(rest.pop(0))
            log_size += nxt.size
            index_size += nxt.index_bytes
            time_size += nxt.timeindex_bytes
        groups.append(group)
    return groups


def legacy_delete_horizon(segments: list[SegmentInfo], first_dirty_offset: int,
                          delete_retention_ms: int) -> int:
    """Cleaner.doClean: v0/v1 tombstones (and, in such segments, markers) are kept while their
    segment's modification time lies after this: the last clean segment's mtime minus
    delete.retention.ms (0 when nothing is clean yet, so a first cleaning keeps them all)."""
    clean = segments_between(segments, 0, first_dirty_offset)
    return clean[-1].mtime_ms - delete_retention_ms if clean else 0
