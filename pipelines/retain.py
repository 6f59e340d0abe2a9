"""The Spark job of `kfmt retain`: one task per partition (kfmt.retention.retain_partition).

The driver plans (kfmt.cleanup: the partitions, their log directory's offsets), runs the tasks
through kfmt.pipelines.runner (each opens SRC from its StorageSpec and writes its partition directory
through the staged output's picklable target), adopts the files they wrote, writes the log
directory's files (the new log start offsets in log-start-offset-checkpoint) and the report, and
publishes DST whole. A dry run runs the same decisions and writes nothing.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace

from kfmt.cleanup import (LOG_START_OFFSET_CHECKPOINT, CleanupPlan, PartitionJob, check_destination_empty,
                          plan_cleanup, write_log_dir_files)
from kfmt.report import REPORT_NAME, PartitionSummary, make_report, report_bytes
from kfmt.retention import RetainResult, RetentionOptions, checkpoint_updates, retain_partition
from kfmt.staging import StagedOutput, StagingTarget
from kfmt.storage import open_storage

from .runner import run_tasks


@dataclass(frozen=True)
class RetainTask:
    job: PartitionJob
    target: StagingTarget | None  # None: a dry run
    options: RetentionOptions


def run_task(task: RetainTask) -> RetainResult:
    files = task.target.files() if task.target is not None else None
    return retain_partition(task.job, files, task.options, dry_run=task.target is None)


def retain(src: str, dst: str, options: RetentionOptions, *, src_options: dict | None = None,
           dst_options: dict | None = None, topic: str | None = None, partition: int | None = None,
           dry_run: bool = False, master: str | None = None,
           progress: bool = True) -> tuple[CleanupPlan, dict]:
    """Apply retention to SRC into DST; returns the plan and the report (for a dry run, what would be
    deleted; nothing is written)."""
    if not options.now_ms:  # one clock for the whole run, recorded in the report
        options = replace(options, now_ms=int(time.time() * 1000))
    src_storage, src_path = open_storage(src, src_options)
    dst_storage, dst_path = open_storage(dst, dst_options if dst_options is not None else src_options)
    plan = plan_cleanup(src_storage, src_path, dst_storage, dst_path, topic, partition)
    layout = plan.layout
    if dry_run:
        check_destination_empty(dst_storage, dst_path)
        results = run_tasks(run_task, [RetainTask(j, None, options) for j in plan.jobs], master=master,
                            description="retain (dry run)", progress=progress)
        return plan, dry_run_report(plan, options, results)
    with StagedOutput(dst_storage, dst_path) as out:
        target = out.target()
        results = run_tasks(run_task, [RetainTask(j, target, options) for j in plan.jobs],
                            master=master, description="retain", progress=progress)
        for result in results:
            out.adopt(result.files)
        if plan.log_dir:
            write_log_dir_files(plan, src_storage, src_path, out, checkpoint_updates(results))
        inputs = [_input_summary(r) for r in results]
        outputs = [replace(r.output, path=dst_storage.url_of(dst_storage.join(dst_path, r.rel) if r.rel
                                                              else dst_path)) for r in results]
        report = make_report("retain", layout.source, layout.destination,
                             _options_json(options, topic, partition), inputs, outputs, out.files,
                             _notes(plan, results))
        report["partitions"] = [r.report_entry() for r in results]
        out.write(REPORT_NAME, report_bytes(report))
    return plan, report


def dry_run_report(plan: CleanupPlan, options: RetentionOptions, results: list[RetainResult]) -> dict:
    return {"command": "retain", "dry_run": True, "source": plan.layout.source,
            "destination": plan.layout.destination, "options": _options_json(options, None, None),
            "partitions": [r.report_entry() for r in results], "notes": _notes(plan, results)}


def _input_summary(r: RetainResult) -> PartitionSummary:
    """The source partition: its removed part (counted from batch headers) and its kept part. The
    content digest is only known when nothing was removed (removed data is not decoded)."""
    kept, removed = r.output, r.removed
    if removed is None or not removed.segments:
        return replace(kept)
    return PartitionSummary(
        removed.path, kept.topic, kept.partition, removed.segments + kept.segments,
        removed.batches + kept.batches, removed.records + kept.records,
        removed.control_records + kept.control_records, removed.log_bytes + kept.log_bytes,
        removed.first_offset if removed.first_offset is not None else kept.first_offset,
        kept.next_offset if kept.next_offset is not None else removed.next_offset, None)


def _options_json(options: RetentionOptions, topic, partition) -> dict:
    return {"retention_ms": options.retention_ms, "retention_bytes": options.retention_bytes,
            "log_start_offset": options.log_start_offset, "now_ms": options.now_ms,
            "include_active": options.include_active,
            "index_interval_bytes": options.index_interval_bytes,
            "producer_expiration_ms": options.producer_expiration_ms, "topic": topic,
            "partition": partition}


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
    notes += [f"log directory: {f.action} {f.name} ({f.reason})" for f in plan.layout.log_dir_files
              if f.name != LOG_START_OFFSET_CHECKPOINT]
    if plan.log_dir:
        notes.append(f"log directory: {LOG_START_OFFSET_CHECKPOINT} written with the new log start "
                     f"offsets that lie above their partition's first segment (as Kafka writes it)")
    return notes
