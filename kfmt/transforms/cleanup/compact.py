"""The Spark job of `kfmt compact`: kfmt.transforms.cleanup.compaction.compact_partition on every partition, run by
kfmt.transforms.cleanup.job. Each task builds its own bounded offset map; the log directory gets a
cleaner-offset-checkpoint with where each cleaning stopped.
"""
from __future__ import annotations

from kfmt.partition.log_start import segment_start_note
from kfmt.transforms.cleanup.compaction import CompactOptions, CompactResult, compact_partition
from kfmt.transforms.cleanup.job import CleanupPolicy, run_cleanup
from kfmt.transforms.cleanup.plan import CLEANER_OFFSET_CHECKPOINT, CleanupPlan


def compact(src: str, dst: str, options: CompactOptions, **run) -> tuple[CleanupPlan, dict]:
    """Compact SRC into DST; returns the plan and the report (for a dry run, what would be removed;
    nothing is written). `run`: run_cleanup's keyword arguments."""
    return run_cleanup(COMPACT, src, dst, options, **run)


def _checkpoint_updates(results: list[CompactResult]) -> dict:
    return {CLEANER_OFFSET_CHECKPOINT: {(r.topic, r.partition): r.cleaner_offset for r in results}}


def _input_summary(r: CompactResult):
    return r.input


def _notes(plan: CleanupPlan, results: list[CompactResult]) -> list[str]:
    notes = ["each partition is cleaned as one round of Kafka's log cleaner cleans it: the latest record "
             "of each key over the cleanable range, tombstones and transaction markers until their "
             "delete horizon, offsets preserved; segments beyond the cleaned range copied byte for byte"]
    sources = {j.checkpoints_from for j in plan.jobs if j.checkpoints_from}
    notes += [f"cleaner checkpoints, log start offsets and high watermarks read from the checkpoint "
              f"files in {s}" for s in sorted(sources)]
    for r in results:
        if r.segment_start is not None:
            notes += [r.below.note(r.label, False), segment_start_note(r.label, r.segment_start)]
    notes += [f"log directory: {f.action} {f.name} ({f.reason})" for f in plan.layout.log_dir_files
              if f.name != CLEANER_OFFSET_CHECKPOINT]
    if plan.log_dir:
        notes.append(f"log directory: {CLEANER_OFFSET_CHECKPOINT} written with where the cleaning of "
                     f"each partition stopped (its next first dirty offset)")
    return notes


COMPACT = CleanupPolicy("compact", compact_partition, _checkpoint_updates, _notes, _input_summary)
