"""A whole salvage run: the plan (a partition directory or a log directory), the staged output, the
log directory's own files, and the report. Partitions are salvaged in parallel, one task per
partition, on the engine `--master` chooses (kfmt.pipelines.engine, kfmt.pipelines.runner)."""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Callable

from kfmt.errors import DataError, KfmtWarning, UsageError
from kfmt.partition.checkpoints import checkpoint_text, read_offset_checkpoint, write_offset_checkpoint
from kfmt.partition.layout import PartitionDir
from kfmt.partition.topic_identity import TargetTopics, TopicIdentity
from kfmt.pipelines.engine import Engine
from kfmt.pipelines.runner import run_tasks
from kfmt.storage.staging import StagedOutput, StagingTarget
from kfmt.storage.store import Storage, open_storage
from kfmt.transforms.directory_plan import (
    COPIED_LOG_DIR_FILES,
    LOG_START_OFFSET_CHECKPOINT,
    OFFSET_CHECKPOINTS,
    source_partitions,
)
from kfmt.transforms.metadata_log import (
    CARRIED,
    is_node_file,
    metadata_log_files,
    node_files_left_out,
    split_metadata_log,
)
from kfmt.transforms.report import REPORT_NAME, make_report, report_bytes
from kfmt.transforms.run import plan_engine

from .partition import PartitionSalvage, SalvageOptions, salvage_partition


@dataclass
class SalvagePlan:
    source: str
    destination: str
    log_dir: bool
    partitions: list[tuple[PartitionDir, str, int]]  # (partition, its directory in DST, log start)
    log_dir_files: list[str]  # names of log-directory files carried over
    notes: list[str] = field(default_factory=list)
    # partition name -> its partition.metadata for the target cluster, when one is given
    # (kfmt.partition.topic_identity); otherwise salvage copies the source's when it parses
    identities: dict[str, TopicIdentity] = field(default_factory=dict)
    other_cluster: str | None = None  # the warning that SRC's node files were left out

    def warn(self) -> None:
        """The stray and other-cluster warnings, once the run succeeded (a failure stays one line)."""
        for identity in self.identities.values():
            if identity.warning:
                warnings.warn(identity.warning, KfmtWarning, stacklevel=2)
        if self.other_cluster:
            warnings.warn(self.other_cluster, KfmtWarning, stacklevel=2)


def plan_salvage(src_storage: Storage, src_path: str, dst_storage: Storage, dst_path: str,
                 topic: str | None = None, partition: int | None = None,
                 target: TargetTopics | None = None) -> SalvagePlan:
    parts, source, destination, log_dir = source_partitions(src_storage, src_path, dst_storage, dst_path,
                                                            topic, partition)
    parts, metadata = split_metadata_log(parts, log_dir, src_storage, src_path)
    notes, log_starts, files = [], {}, []
    if log_dir:
        names = {info.name for info in src_storage.listdir(src_path) if not info.is_dir}
        files = [n for n in (*COPIED_LOG_DIR_FILES, *OFFSET_CHECKPOINTS) if n in names]
        if metadata is not None:
            files += metadata_log_files(metadata)
            notes.append(f"{metadata.name}: {CARRIED}")
        if LOG_START_OFFSET_CHECKPOINT in names:
            log_starts = _tolerant_checkpoint(src_storage, src_path, LOG_START_OFFSET_CHECKPOINT, notes)
    plans = [(p, p.name if log_dir else "", log_starts.get((p.topic, p.partition), 0)) for p in parts]
    plan = SalvagePlan(source, destination, log_dir, plans, files, notes)
    if target is not None and target.given:
        _plan_target(plan, target, parts, src_storage, src_path)
    return plan


def _plan_target(plan: SalvagePlan, target: TargetTopics, parts: list[PartitionDir], storage: Storage,
                 path: str) -> None:
    """The partition.metadata each partition gets for the target cluster, and SRC's node files left
    out when that cluster is another (kfmt.transforms.metadata_log), as the other writers do."""
    target.check_topics({p.topic for p in parts if p.topic is not None})
    for part in parts:
        try:
            plan.identities[part.name] = target.identity(part)
        except OSError:
            continue  # an unreadable partition.metadata: salvage's own copy says so (partition.py)
    plan.notes += [identity.note(name) for name, identity in plan.identities.items()]
    left_out = plan.log_dir and node_files_left_out(target, storage, path, list(plan.identities.values()),
                                                    plan.destination)
    if left_out:
        plan.notes = [n for n in plan.notes if not n.endswith(CARRIED)]
        plan.notes += [f"{name}: {left_out.reason}" for name in plan.log_dir_files if is_node_file(name)]
        plan.log_dir_files = [name for name in plan.log_dir_files if not is_node_file(name)]
        plan.other_cluster = left_out.warning


def _tolerant_checkpoint(storage: Storage, directory: str, name: str, notes: list[str]) -> dict:
    """An offset checkpoint's entries, or {} (with a note) when it cannot be read."""
    path = storage.join(directory, name)
    try:
        return read_offset_checkpoint(checkpoint_text(storage.read(path), storage.url_of(path)),
                                      storage.url_of(path))
    except (OSError, DataError) as err:
        notes.append(f"{storage.url_of(path)} not used: {getattr(err, 'message', err)}")
        return {}


def write_salvaged_log_dir_files(plan: SalvagePlan, storage: Storage, path: str, out: StagedOutput,
                         log_ends: dict[tuple, int]) -> None:
    """meta.properties, bootstrap.checkpoint and the KRaft metadata log are copied byte for byte
    (kfmt.transforms.metadata_log); the offset checkpoints keep the lines of the partitions written,
    each offset at most the partition's new log end offset (docs/format.md §17 item 8: a log start offset above it
    would delete the whole partition on load, a recovery point or high watermark above it claims
    data the log no longer holds). An unreadable checkpoint is left out: the broker recovers."""
    for name in plan.log_dir_files:
        info = storage.info(storage.join(path, name))
        if name in COPIED_LOG_DIR_FILES or "/" in name:  # the metadata log's files too
            try:
                out.write(name, bytes(storage.read(info.path)), info.mtime_ms)
            except OSError as err:
                plan.notes.append(f"{storage.url_of(info.path)} not carried over: {err.strerror or err}")
            continue
        offsets = _tolerant_checkpoint(storage, path, name, plan.notes)
        kept = {tp: min(o, log_ends[tp]) for tp, o in offsets.items() if tp in log_ends}
        for tp, o in sorted(offsets.items()):
            if tp in kept and kept[tp] != o:
                plan.notes.append(f"{name}: {tp[0]}-{tp[1]} {o} lowered to the new log end offset {kept[tp]}")
        if offsets or kept:
            out.write(name, write_offset_checkpoint(kept).encode("utf-8"), info.mtime_ms)


@dataclass(frozen=True)
class SalvageTask:
    """One partition's salvage, as a task of kfmt.pipelines.runner (picklable). No target: a dry run."""

    part: PartitionDir
    rel: str
    log_start_offset: int
    destination: str  # the partition's URL in DST, as the report names it
    options: SalvageOptions
    target: StagingTarget | None
    identity: TopicIdentity | None = None  # the target cluster's partition.metadata, when given

    def run(self) -> tuple[PartitionSalvage, list]:
        files = self.target.files() if self.target is not None else None
        result = salvage_partition(self.part, self.rel, files, self.options, self.log_start_offset,
                                   self.destination, identity=self.identity)
        return result, list(files.records.values()) if files is not None else []


def run_salvage_task(task: SalvageTask):
    return task.run()


def _salvage_all(plan: SalvagePlan, out: StagedOutput | None, options: SalvageOptions, dst_storage: Storage,
                 dst_path: str, engine: Engine, progress: bool, on_progress) -> list[PartitionSalvage]:
    if engine.engine == "inprocess" and on_progress is not None:
        return [salvage_partition(p, rel, out, options, start, _dst_url(dst_storage, dst_path, rel), on_progress,
                                  plan.identities.get(p.name))
                for p, rel, start in plan.partitions]
    target = out.target() if out is not None else None
    tasks = [SalvageTask(p, rel, start, _dst_url(dst_storage, dst_path, rel), options, target,
                         plan.identities.get(p.name))
             for p, rel, start in plan.partitions]
    results = []
    for result, records in run_tasks(run_salvage_task, tasks, master=engine, description="salvage",
                                      progress=progress):
        if out is not None:
            out.adopt(records)
        results.append(result)
    return results


def salvage(src: str, dst: str, *, src_options: dict | None = None, dst_options: dict | None = None,
            topic: str | None = None, partition: int | None = None,
            options: SalvageOptions | None = None, master: "str | Engine | None" = None,
            dry_run: bool = False, progress: bool = True,
            on_progress: Callable[[int], None] | None = None,
            target: TargetTopics | None = None) -> tuple[SalvagePlan, dict]:
    """Salvage SRC into DST. Returns the plan and the report (a dry run writes nothing and returns
    what the run would do, without a destination). `on_progress(bytes)` is called as segments are
    scanned when the work runs in this process; `target`: the cluster the output is for
    (kfmt.partition.topic_identity; None: each partition.metadata copied when it parses)."""
    options = (options or SalvageOptions()).with_clock()
    src_storage, src_path = open_storage(src, src_options)
    dst_storage, dst_path = open_storage(dst, dst_options if dst_options is not None else src_options)
    plan = plan_salvage(src_storage, src_path, dst_storage, dst_path, topic, partition, target)
    run_options = {**options.builder_options(), "max_decompressed_bytes": options.read.max_decompressed,
                   "topic": topic, "partition": partition, "dry_run": dry_run}
    engine = plan_engine(master, sum(s.size for p, _, _ in plan.partitions for s in p.segments),
                         src_storage, dst_storage)
    run = dict(engine=engine, progress=progress, on_progress=on_progress)
    if dry_run:
        if dst_storage.exists(dst_path) and (not dst_storage.isdir(dst_path)
                                             or dst_storage.listdir(dst_path)):
            raise UsageError(f"{plan.destination}: the destination exists and is not empty")
        results = _salvage_all(plan, None, options, dst_storage, dst_path, **run)
        plan.warn()
        return plan, _report(plan, run_options, results, {}, engine)
    with StagedOutput(dst_storage, dst_path) as out:
        results = _salvage_all(plan, out, options, dst_storage, dst_path, **run)
        if plan.log_dir:
            log_ends = {(p.topic, p.partition): r.log_end_offset
                        for (p, _, _), r in zip(plan.partitions, results)}
            write_salvaged_log_dir_files(plan, src_storage, src_path, out, log_ends)
        report = _report(plan, run_options, results, out.files, engine)
        out.write(REPORT_NAME, report_bytes(report))
    plan.warn()
    return plan, report


def _dst_url(storage: Storage, path: str, rel: str) -> str:
    return storage.url_of(storage.join(path, rel) if rel else path)


def _report(plan: SalvagePlan, run_options: dict, results: list[PartitionSalvage], files: dict,
            engine: Engine) -> dict:
    notes = [".log entries that are intact (framing, CRC, strict decoding, plausible offsets) copied byte "
             "for byte in offset order; every other byte range dropped and listed under salvage.dropped "
             "with the offsets it may have held; .index, .timeindex, .txnindex, producer .snapshot files "
             "and leader-epoch-checkpoint regenerated from the entries kept; partition.metadata copied "
             "when it parses"] + plan.notes
    for r in results:
        notes += [f"{r.name}: {n}" for n in r.notes]
    report = make_report("salvage", plan.source, plan.destination, run_options,
                         [r.input for r in results], [r.output for r in results], files, notes)
    report["salvage"] = {
        "partitions": [r.to_json() for r in results],
        "dropped_ranges": sum(len(r.dropped) for r in results),
        "dropped_bytes": sum(d.length for r in results for d in r.dropped),
        "log_dir_files": plan.log_dir_files,
    }
    report["engine"] = engine.to_json()
    return report
