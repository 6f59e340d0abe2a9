"""The Spark job both cleanup policies share (`kfmt compact`, `kfmt retain`): one task per partition.

The driver plans (kfmt.transforms.cleanup.plan: the partitions and their log directory's checkpoints), runs the tasks
through kfmt.pipelines.runner (each opens SRC from its StorageSpec and writes its partition directory
through the staged output's picklable target), adopts the files they wrote, writes the log
directory's files with the checkpoints the policy updates, writes the report, and publishes DST
whole. A dry run runs the same cleaning and writes nothing. What differs between the policies is a
CleanupPolicy: how one partition is cleaned and what the report says.
"""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, replace
from typing import Any, Callable

from kfmt.errors import KfmtWarning
from kfmt.format.codecs import named_levels
from kfmt.partition.log_start import left_out_entries
from kfmt.partition.summary import PartitionCounts
from kfmt.partition.topic_identity import TargetTopics
from kfmt.pipelines.runner import run_tasks
from kfmt.storage.staging import StagedOutput, StagingTarget
from kfmt.storage.store import open_storage
from kfmt.transforms.cleanup.plan import CleanupPlan, PartitionJob, check_destination_empty, plan_cleanup
from kfmt.transforms.directory_plan import write_log_dir_files
from kfmt.transforms.report import REPORT_NAME, make_report, report_bytes
from kfmt.transforms.run import plan_engine


def never_threads(options) -> bool:
    """The default of CleanupPolicy.threads_suffice: the policy's work holds the GIL."""
    return False


@dataclass(frozen=True)
class CleanupPolicy:
    command: str  # the report's "command" and the progress bar's label
    # (job, files or None for a dry run, options, dry_run=) -> a result with .files, .output, .rel,
    # .label, .below (what lies below the log start offset left out of a partition-directory DST),
    # .report_entry(); a module-level function, so that tasks pickle
    clean_partition: Callable[..., Any]
    checkpoint_updates: Callable[[list], dict]  # results -> {checkpoint name: {(topic, partition): offset}}
    notes: Callable[[CleanupPlan, list], list[str]]  # (plan, results) -> the report's notes
    input_summary: Callable[[Any], PartitionCounts]  # a result -> what the source partition held
    # options -> whether the policy's work releases the GIL, so that threads suffice (run_cleanup);
    # module-level too: the policy travels with every task to a pool's workers
    threads_suffice: Callable[[Any], bool] = never_threads


@dataclass(frozen=True)
class CleanupTask:
    policy: CleanupPolicy
    job: PartitionJob
    target: StagingTarget | None  # None: a dry run
    options: Any


def run_task(task: CleanupTask):
    """(the policy's result, its notes): a crash-cut tail of the partition's last segment, which the
    readers leave out with a warning as Kafka's log recovery truncates it (kfmt.format.segment), is
    said in the report too -- an executor's warnings would go nowhere."""
    files = task.target.files() if task.target is not None else None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", KfmtWarning)
        result = task.policy.clean_partition(task.job, files, task.options, dry_run=task.target is None)
    notes = list(dict.fromkeys(str(w.message) for w in caught if issubclass(w.category, KfmtWarning)))
    for w in caught:
        if not issubclass(w.category, KfmtWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return result, notes


def run_cleanup(policy: CleanupPolicy, src: str, dst: str, options, *, src_options: dict | None = None,
                dst_options: dict | None = None, topic: str | None = None, partition: int | None = None,
                dry_run: bool = False, master: str | None = None, progress: bool = True,
                target: TargetTopics | None = None) -> tuple[CleanupPlan, dict]:
    """Clean SRC into DST by `policy`; returns the plan and the report (for a dry run, what would be
    removed; nothing is written). `options` is the policy's options dataclass (with a now_ms field);
    `target` the topic ids the output is for (kfmt.partition.topic_identity)."""
    if not options.now_ms:  # one clock for the whole run, recorded in the report
        options = replace(options, now_ms=int(time.time() * 1000))
    src_storage, src_path = open_storage(src, src_options)
    dst_storage, dst_path = open_storage(dst, dst_options if dst_options is not None else src_options)
    plan = plan_cleanup(src_storage, src_path, dst_storage, dst_path, topic, partition, target)
    layout = plan.layout
    options_json = {**{k: getattr(options, k) for k in options.__dataclass_fields__}, "topic": topic,
                    "partition": partition}
    if "compression_levels" in options_json:  # by codec id inside, by name in the report
        options_json["compression_levels"] = named_levels(options_json["compression_levels"])

    engine = plan_engine(master, sum(s.size for p in layout.partitions for s in p.part.segments),
                         src_storage, dst_storage, lambda: policy.threads_suffice(options))

    tail_notes: list[str] = []

    def tasks(target):
        done = run_tasks(run_task, [CleanupTask(policy, j, target, options) for j in plan.jobs], master=engine,
                         description=policy.command + (" (dry run)" if target is None else ""), progress=progress)
        for _, notes in done:
            for note in notes:
                warnings.warn(note, KfmtWarning, stacklevel=2)
            tail_notes.extend(notes)
        return [result for result, _ in done]

    if dry_run:
        check_destination_empty(dst_storage, dst_path)
        results = tasks(None)
        layout.warn_strays()
        return plan, {"command": policy.command, "dry_run": True, "source": layout.source,
                      "destination": layout.destination, "options": options_json,
                      "partitions": [r.report_entry() for r in results],
                      "below_log_start": left_out_entries((r.label, r.below) for r in results),
                      "notes": policy.notes(plan, results) + layout.identity_notes() + tail_notes,
                      "engine": engine.to_json()}
    with StagedOutput(dst_storage, dst_path) as out:
        results = tasks(out.target())
        for result in results:
            out.adopt(result.files)
        if plan.log_dir:
            write_log_dir_files(plan.layout, src_storage, src_path, out, policy.checkpoint_updates(results))
        outputs = [replace(r.output, path=dst_storage.url_of(dst_storage.join(dst_path, r.rel) if r.rel
                                                              else dst_path)) for r in results]
        report = make_report(policy.command, layout.source, layout.destination, options_json,
                             [policy.input_summary(r) for r in results], outputs, out.files,
                             policy.notes(plan, results) + layout.identity_notes() + tail_notes)
        report["partitions"] = [r.report_entry() for r in results]
        report["below_log_start"] = left_out_entries((r.label, r.below) for r in results)
        report["engine"] = engine.to_json()
        out.write(REPORT_NAME, report_bytes(report))
    layout.warn_strays()
    return plan, report
