"""The Spark job of `kfmt retain`: kfmt.transforms.cleanup.retention.retain_partition on every partition, run by
kfmt.transforms.cleanup.job. The log directory gets the new log start offsets in
log-start-offset-checkpoint.
"""
from __future__ import annotations

from dataclasses import replace

from kfmt.format import copied_runs
from kfmt.partition.log_start import segment_start_note
from kfmt.partition.summary import PartitionCounts
from kfmt.transforms.cleanup.job import CleanupPolicy, run_cleanup
from kfmt.transforms.cleanup.plan import LOG_START_OFFSET_CHECKPOINT, CleanupPlan
from kfmt.transforms.cleanup.retention import (
    RetainResult,
    RetentionOptions,
    checkpoint_updates,
    retain_partition,
)


def retain(src: str, dst: str, options: RetentionOptions, **run) -> tuple[CleanupPlan, dict]:
    """Apply retention to SRC into DST; returns the plan and the report (for a dry run, what would be
    deleted; nothing is written). `run`: run_cleanup's keyword arguments."""
    return run_cleanup(RETAIN, src, dst, options, **run)


def _input_summary(r: RetainResult) -> PartitionCounts:
    """The source partition: its removed part (counted from batch headers) and its kept part. The
    content digest is only known when nothing was removed (removed data is not decoded)."""
    kept, removed = r.output, r.removed
    if removed is None or not removed.segments:
        return replace(kept)
    return PartitionCounts(
        removed.path, kept.topic, kept.partition, removed.segments + kept.segments,
        removed.batches + kept.batches, removed.records + kept.records,
        removed.control_records + kept.control_records, removed.log_bytes + kept.log_bytes,
        removed.first_offset if removed.first_offset is not None else kept.first_offset,
        kept.next_offset if kept.next_offset is not None else removed.next_offset, None)


def _notes(plan: CleanupPlan, results: list[RetainResult]) -> list[str]:
    notes = ["segments are deleted whole, oldest first, as Kafka 3.6's retention check "
             "(UnifiedLog.deleteOldSegments) deletes them: log start offset, then retention.bytes, then "
             "retention.ms; the remaining .log segments are copied byte for byte with their "
             "modification times and their companion files regenerated"]
    sources = {j.checkpoints_from for j in plan.jobs if j.checkpoints_from}
    notes += [f"log start offsets and high watermarks read from the checkpoint files in {s}"
              for s in sorted(sources)]
    for r in results:
        if r.decision.rolled is not None:
            notes.append(f"{r.label}: every segment was deleted; an empty segment at the log end offset "
                         f"{r.decision.rolled} replaces them, as the broker rolls one")
    for r in results:
        if r.segment_start is not None:
            notes += [r.below.note(r.label, False), segment_start_note(r.label, r.segment_start)]
    notes += [f"log directory: {f.action} {f.name} ({f.reason})" for f in plan.layout.log_dir_files
              if f.name != LOG_START_OFFSET_CHECKPOINT]
    if plan.log_dir:
        notes.append(f"log directory: {LOG_START_OFFSET_CHECKPOINT} written with the new log start "
                     f"offsets that lie above their partition's first segment (as Kafka writes it)")
    return notes


def _threads_suffice(options: RetentionOptions) -> bool:
    """Retention reads headers and copies what it keeps with the check of a copy: code that releases
    the GIL, unless --deep decodes every record."""
    return not options.deep and copied_runs.in_kernels()


RETAIN = CleanupPolicy("retain", retain_partition, checkpoint_updates, _notes, _input_summary, _threads_suffice)
