"""retain: Kafka's delete cleanup policy applied offline (docs/format.md §13).

A broker's retention check (`UnifiedLog.deleteOldSegments`, Kafka 3.6) runs three rules in this order,
each deleting a *prefix* of the segments (the oldest first, stopping at the first segment that must
stay), each seeing what the previous one left:
1. log start offset: a segment goes when the *next* segment's base offset is <= the log start offset
   (DeleteRecords raised it; the segment holding it stays and the log start offset lies inside it);
2. retention.bytes: with `diff = log size - retention.bytes`, a segment goes while
   `diff - segment size >= 0` (then `diff -= segment size`): the log stays at least retention.bytes;
3. retention.ms: a segment goes when `now - largest timestamp > retention.ms`. The largest timestamp is
   the segment's largest record timestamp (its last `.timeindex` entry), or the `.log` file's
   modification time when the segment has no timestamps (v0 data).
A segment qualifies only if the high watermark has reached the next segment's base offset (the log
end offset for the last one), and an empty last segment never goes. After deletions the log start
offset is at least the first remaining segment's base offset. Segments go whole; nothing is cut.

Where kfmt differs on purpose: the last (active) segment stays unless `include_active` (a broker
deletes it too when it qualifies, rolling a new empty segment at the log end offset first, which
`include_active` reproduces). retention.ms and retention.bytes apply only when given (a broker's
defaults are 7 days and unlimited): an offline run should do only what it was asked.

The output is DST: the remaining segments' `.log` files byte for byte with their modification times,
and every companion file regenerated (kfmt.transforms.reindex, through kfmt.partition.companions) with the new log start
offset, so the leader-epoch-checkpoint starts there as the broker's does. The log start offset is
recorded for the broker in DST's `log-start-offset-checkpoint` when DST is a log directory, and only
when it lies above the first segment's base offset (as Kafka writes it); always in the report.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from kfmt.format import inflated_runs
from kfmt.format.copied_runs import header_counts
from kfmt.format.frames import header_of
from kfmt.format.layout import ATTR_CONTROL, MAGIC_V2
from kfmt.partition.companions import CompanionBuilder, CompanionOptions, existing_leader_epochs
from kfmt.partition.layout import Segment, segment_file_name
from kfmt.partition.log_start import BelowLogStart, below_log_start, segment_start
from kfmt.partition.reader import PartitionReader, log_end_offset
from kfmt.partition.summary import ENTRIES_CHECK, PartitionCounts
from kfmt.storage.manifest import FileRecord
from kfmt.transforms.cleanup.plan import LOG_START_OFFSET_CHECKPOINT, PartitionJob
from kfmt.transforms.cleanup.retention_rules import (
    Deletion,
    RetentionDecision,
    RetentionOptions,
    SegmentAge,
    decide_retention,
)
from kfmt.transforms.directory_plan import PartitionPlan
from kfmt.transforms.reindex import reindex_partition

def segment_largest_timestamp(reader: PartitionReader, seg: Segment, scanned: int | None = None) -> int:
    """Kafka's `LogSegment.largestTimestamp`: the largest record timestamp (the last time-index
    entry; kfmt.partition.reader scans the frames where the index cannot say, or takes `scanned`,
    the caller's own scan of them), else the `.log` file's modification time, as for v0 data, which
    has no timestamps."""
    return _largest_timestamp(reader, seg, scanned)[0]


def _largest_timestamp(reader: PartitionReader, seg: Segment, scanned: int | None = None) -> tuple[int, bool]:
    largest = reader.largest_timestamp(seg, scanned)
    if largest >= 0 or seg.log.mtime_ms is None:
        return largest, False
    return seg.log.mtime_ms, True


def segment_ages(reader: PartitionReader) -> list[SegmentAge]:
    return [SegmentAge(seg.base_offset, seg.size, *_largest_timestamp(reader, seg))
            for seg in reader.part.segments]


# --- one partition ---

@dataclass
class RetainResult:
    """What one partition's run returns to the driver (small and picklable)."""

    label: str
    rel: str
    topic: str | None
    partition: int | None
    decision: RetentionDecision
    removed: PartitionCounts | None  # counted from batch headers; no content digest
    output: PartitionCounts | None
    files: list[FileRecord]
    log_start_offset_entry: int | None  # what DST's log-start-offset-checkpoint holds for it
    segment_start: int | None = None  # a partition-directory DST: its first segment's new base offset
    below: BelowLogStart | None = None  # what that first segment's new start leaves out

    def report_entry(self) -> dict:
        return {"partition": self.label, "destination": self.rel or ".",
                **self.decision.to_json(),
                "log_start_offset_checkpoint": self.log_start_offset_entry,
                "first_segment_renamed_to": self.segment_start,
                "removed": None if self.removed is None else {
                    "segments": self.removed.segments, "batches": self.removed.batches,
                    "records": self.removed.records, "control_records": self.removed.control_records,
                    "log_bytes": self.removed.log_bytes,
                    **({"uncounted_wrappers": self.removed.uncounted_wrappers}
                       if self.removed.check == ENTRIES_CHECK else {})}}


def retain_partition(job: PartitionJob, files, options: RetentionOptions, dry_run: bool = False,
                     on_progress=None) -> RetainResult:
    """Apply retention to one partition, writing what remains through `files` (the StagedFiles of
    DST, or a StagingTarget's on an executor) unless `dry_run`."""
    part = job.open()
    reader = PartitionReader(part, recover_tail=True)
    facts = segment_ages(reader)
    decision = decide_retention(facts, log_end_offset=log_end_offset(reader),
                                log_start_offset=job.log_start_offset or 0,
                                high_watermark=job.high_watermark, options=options)
    kept_bases = set(decision.kept)
    kept = [seg for seg in part.segments if seg.base_offset in kept_bases]
    # a partition-directory DST carries the log start offset in its first segment's name
    remaining = replace(part, segments=kept)
    start = None if options.include_deleted else segment_start(remaining, decision.log_start_offset,
                                                               bool(job.rel))
    first_base = start if start is not None else kept[0].base_offset if kept else decision.rolled
    # Kafka checkpoints a log start offset only above the first segment's base offset
    above_first = first_base is not None and decision.log_start_offset > first_base
    entry = decision.log_start_offset if above_first else None
    result = RetainResult(job.label, job.rel, part.topic, part.partition, decision, None, None, [], entry,
                          start, None if start is None else below_log_start(remaining, start))
    if dry_run:
        return result
    result.removed = _count_removed(reader, [s for s in part.segments if s not in kept], options.deep)
    plan = PartitionPlan(remaining, job.rel, decision.log_start_offset, segment_start=start,
                         identity=job.identity)
    before = set(files.records)
    if decision.rolled is None:  # (a partition without segments stays one, as reindex keeps it)
        result.output = reindex_partition(plan, files, options.companions, on_progress, deep=options.deep)
    else:
        result.output = _write_rolled(plan, files, decision, options.companions)
    result.files = [r for rel, r in files.records.items() if rel not in before]
    return result


def _count_removed(reader: PartitionReader, segments: list[Segment], deep: bool = True) -> PartitionCounts:
    """Batches and records of the deleted segments, from their headers; with `deep` legacy compressed
    wrappers, whose headers do not say how many messages they hold, are inflated (a run at a time and
    walked without columns where the kernels are, kfmt.format.inflated_runs.walk; else decoded),
    without it they are counted apart (kfmt.format.copied_runs.header_counts)."""
    part = reader.part
    summary = PartitionCounts(part.storage.url_of(part.path), part.topic, part.partition)
    if not deep:
        summary.check = ENTRIES_CHECK
    for seg in segments:
        summary.segments += 1
        summary.log_bytes += seg.size
        if not deep:
            for rows in reader.frame_chunks(seg):
                _count_headers(rows, summary)
            continue
        if not inflated_runs.can_walk(reader.options):
            for header in reader.frames(seg):
                _count_header(reader, seg, header, summary)
            continue
        d = reader.data(seg)
        for rows in reader.frame_chunks(seg):
            _count_rows(reader, seg, d, np.ascontiguousarray(rows), summary)
    return summary


def _count_headers(rows: np.ndarray, summary: PartitionCounts) -> None:
    """A chunk of frame rows counted from the headers alone (kfmt.format.copied_runs.header_counts)."""
    if not len(rows):
        return
    control = (rows["magic"] >= 2) & (rows["attributes"] & ATTR_CONTROL != 0)
    counts = header_counts(rows[~control])
    if counts.first_known and not summary.records + summary.uncounted_wrappers:  # the first data entry
        summary.first_offset = counts.first_offset
    summary.batches += len(rows)
    summary.control_records += int(rows["records_count"][control].sum())
    summary.records += counts.records
    summary.uncounted_wrappers += counts.uncounted
    summary.next_offset = int(rows["last_offset"][-1]) + 1


def _count_header(reader: PartitionReader, seg: Segment, header, summary: PartitionCounts) -> None:
    """One entry counted (the definition: a wrapper decoded for its count and first offset)."""
    summary.batches += 1
    count = header.records_count
    if count is None:
        count = len(reader.decode(seg, header))
    if header.is_control:
        summary.control_records += count
    else:
        summary.records += count
        if summary.first_offset is None and count:
            summary.first_offset = header.base_offset if header.base_offset is not None \
                else reader.decode(seg, header).header.base_offset
    summary.next_offset = header.next_offset


def _count_rows(reader: PartitionReader, seg: Segment, d, rows: np.ndarray, summary: PartitionCounts) -> None:
    """_count_header for a chunk of frame rows: counts and first offsets from the rows, but for the
    wrappers', which come from their inflated records."""
    if not len(rows):
        return
    counts = rows["records_count"].astype(np.int64)
    firsts = rows["base_offset"].copy()
    edges = np.flatnonzero(np.diff(np.concatenate(([0], (counts < 0).view(np.int8), [0])))).tolist()
    for i, stop in zip(edges[::2], edges[1::2]):  # each run of consecutive wrappers
        while i < stop:
            walked = inflated_runs.walk(d.buf, rows, i, stop, d.base, reader.options, digest=False)
            counts[i:walked.stop] = walked.facts["records"]
            firsts[i:walked.stop] = walked.facts["first"]
            i = walked.stop
            if i < stop:  # the decode decides (and reports a damaged wrapper)
                batch = reader.decode(seg, header_of(rows[i].item()))
                counts[i], firsts[i] = len(batch), batch.header.base_offset
                i += 1
    control = (rows["magic"] >= MAGIC_V2) & (rows["attributes"] & ATTR_CONTROL != 0)
    summary.batches += len(rows)
    summary.control_records += int(counts[control].sum())
    summary.records += int(counts[~control].sum())
    if summary.first_offset is None:
        held = np.flatnonzero(~control & (counts > 0))
        if len(held):
            summary.first_offset = int(firsts[held[0]])
    summary.next_offset = int(rows["last_offset"][-1]) + 1


def _write_rolled(plan: PartitionPlan, files, decision: RetentionDecision,
                  options: CompanionOptions) -> PartitionCounts:
    """A log deleted whole: one empty segment at the log end offset, as the broker rolls it."""
    part, base = plan.part, decision.rolled
    builder = CompanionBuilder(**options.builder_options(), log_start_offset=decision.log_start_offset,
                               leader_epochs=existing_leader_epochs(part))
    builder.begin_segment(base)
    files.write(plan.rel_path(segment_file_name(base, "log")), b"", options.now_ms)
    for name, content in builder.end_segment().files().items():
        files.write(plan.rel_path(name), content, options.now_ms)
    for name, content in builder.finish().files().items():
        files.write(plan.rel_path(name), content)
    plan.write_identity(files)
    summary = PartitionCounts(part.storage.url_of(part.path), part.topic, part.partition, segments=1,
                               next_offset=base)
    return summary


def checkpoint_updates(results: list[RetainResult]) -> dict:
    """DST's log-start-offset-checkpoint entries for the partitions written."""
    return {LOG_START_OFFSET_CHECKPOINT: {(r.topic, r.partition): r.log_start_offset_entry
                                          for r in results}}


__all__ = ["RetentionOptions", "RetentionDecision", "Deletion", "SegmentAge", "decide_retention",
           "retain_partition", "segment_ages", "segment_largest_timestamp", "checkpoint_updates"]
