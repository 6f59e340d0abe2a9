"""The Spark job of `kfmt compact`: one task per partition (kfmt.compaction.compact_partition).

The driver plans (kfmt.cleanup: the partitions, their cleaner checkpoints, log start offsets and high
watermarks), runs the tasks through kfmt.pipelines.runner (each opens SRC from its StorageSpec, builds
its own bounded offset map and writes its partition directory through the staged output's picklable
target), adopts the files they wrote, writes the log directory's files (cleaner-offset-checkpoint
with where each cleaning stopped) and the report, and publishes DST whole. A dry run performs the
same cleaning, encoding what it would write to count it, and writes nothing.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace

from kfmt.cleanup import (CLEANER_OFFSET_CHECKPOINT, CleanupPlan, PartitionJob, check_destination_empty,
                          plan_cleanup, write_log_dir_files)
from kfmt.compaction import CompactOptions, CompactResult, compact_partition
from kfmt.report import REPORT_NAME, make_report, report_bytes
from kfmt.staging import StagedOutput, StagingTarget
from kfmt.storage import open_storage

from .runner import run_tasks


@dataclass(frozen=True)
class CompactTask:
    job: PartitionJob
    target: StagingTarget | None  # None: a dry run
    options: CompactOptions


def run_task(task: CompactTask) -> CompactResult:
    files = task.target.files() if task.target is not None else None
    return compact_partition(task.job, files, task.options, dry_run=task.target is None)


def compact(src: str, dst: str, options: CompactOptions, *, src_options: dict | None = None,
            dst_options: dict | None = None, topic: str | None = None, partition: int | None = None,
            dry_run: bool = False, master: str | None = None,
            progress: bool = True) -> tuple[CleanupPlan, dict]:
    """Compact SRC into DST; returns the plan and the report (for a dry run, what would be removed;
    nothing is written)."""
    if not options.now_ms:  # one clock for the whole run: delete horizons, producer expiry
        options = replace(options, now_ms=int(time.time() * 1000))
    src_storage, src_path = open_storage(src, src_options)
    dst_storage, dst_path = open_storage(dst, dst_options if dst_options is not None else src_options)
    plan = plan_cleanup(src_storage, src_path, dst_storage, dst_path, topic, partition)
    layout = plan.layout
    if dry_run:
        check_destination_empty(dst_storage, dst_path)
        results = run_tasks(run_task, [CompactTask(j, None, options) for j in plan.jobs], master=master,
                            description="compact (dry run)", progress=progress)
        return plan, {"command": "compact", "dry_run": True, "source": layout.source,
                      "destination": layout.destination, "options": _options_json(options, topic, partition),
                      "partitions": [r.report_entry() for r in results], "notes": _notes(plan)}
    with StagedOutput(dst_storage, dst_path) as out:
        target = out.target()
        results = run_tasks(run_task, [CompactTask(j, target, options) for j in plan.jobs],
                            master=master, description="compact", progress=progress)
        for result in results:
            out.adopt(result.files)
        if plan.log_dir:
            updates = {CLEANER_OFFSET_CHECKPOINT: {(r.topic, r.partition): r.cleaner_offset for r in results}}
            write_log_dir_files(plan, src_storage, src_path, out, updates)
        outputs = [replace(r.output, path=dst_storage.url_of(dst_storage.join(dst_path, r.rel) if r.rel
                                                              else dst_path)) for r in results]
        report = make_report("compact", layout.source, layout.destination,
                             _options_json(options, topic, partition), [r.input for r in results], outputs,
                             out.files, _notes(plan))
        report["partitions"] = [r.report_entry() for r in results]
        out.write(REPORT_NAME, report_bytes(report))
    return plan, report


def _options_json(options: CompactOptions, topic, partition) -> dict:
    return {**{k: getattr(options, k) for k in options.__dataclass_fields__}, "topic": topic,
            "partition": partition}


def _notes(plan: CleanupPlan) -> list[str]:
    notes = ["each partition is cleaned as one round of Kafka's log cleaner cleans it: the latest record "
             "of each key over the cleanable range, tombstones and transaction markers until their "
             "delete horizon, offsets preserved; segments beyond the cleaned range copied byte for byte"]
    sources = {j.checkpoints_from for j in plan.jobs if j.checkpoints_from}
    notes += [f"cleaner checkpoints, log start offsets and high watermarks read from the checkpoint "
              f"files in {s}" for s in sorted(sources)]
    notes += [f"log directory: {f.action} {f.name} ({f.reason})" for f in plan.layout.log_dir_files
              if f.name != CLEANER_OFFSET_CHECKPOINT]
    if plan.log_dir:
        notes.append(f"log directory: {CLEANER_OFFSET_CHECKPOINT} written with where the cleaning of "
                     f"each partition stopped (its next first dirty offset)")
    return notes
