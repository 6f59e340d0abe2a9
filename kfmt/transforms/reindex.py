"""reindex: copy partitions with every companion file regenerated as Kafka 3.6's log recovery builds
it (kfmt.partition.companions), the `.log` segments byte for byte with their modification times.

SRC is a partition directory or a log directory; it is only read. DST gets the same layout (the
partition itself, or one directory per partition) through kfmt.storage.staging: it is published whole or not
at all. Every batch is decoded and checked (CRCs, record structure) on the way, so bad data stops the
run (DataError, exit 65) before anything is published; the report (kfmt.transforms.report) records counts and
the content digest of every partition.

Partitions are reindexed in parallel, one task per partition (a partition's companion files carry
producer state and leader epochs from one segment to the next), on the engine `--master` chooses
(kfmt.pipelines.engine, kfmt.pipelines.runner): tasks write through the staged output's picklable
target and hand back the partition's summary and the records of the files they wrote.

Log-directory files (docs/format.md §11), for a log-directory SRC:
* `meta.properties` is copied: it ties the directory to its broker and cluster, and the segments
  are unchanged.
* The offset checkpoints (`recovery-point-`, `log-start-offset-`, `replication-offset-`,
  `cleaner-offset-checkpoint`) are copied, keeping only the lines of the partitions written (copied
  byte for byte when none is dropped). Offsets do not change, so their values stay valid; the log
  start offsets must not be lost (a lost one re-exposes deleted records), and they also decide which
  snapshots and leader epochs recovery keeps, so they are given to the companion builder.
* `bootstrap.checkpoint` and the KRaft metadata log `__cluster_metadata-0/` are copied byte for byte
  (kfmt.transforms.metadata_log).
* `.kafka_cleanshutdown` is not copied: without it a broker recovers the directory on first load,
  validating every batch and rebuilding these same files (docs/format.md §17 item 9) instead of trusting them.
  `.lock` and anything else are left out too; the report lists what was skipped.
"""
from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np

from kfmt.errors import DataError, KfmtWarning, UsageError
from kfmt.format import batch_runs, segment
from kfmt.format.batch_runs import CheckedRun
from kfmt.format.model import Batch
from kfmt.partition.checkpoints import checkpoint_text, read_offset_checkpoint, write_offset_checkpoint
from kfmt.partition.companions import CompanionBuilder, CompanionOptions, existing_leader_epochs
from kfmt.partition.layout import (
    LEADER_EPOCH_CHECKPOINT,
    PARTITION_METADATA,
    SEGMENT_NAME,
    PartitionDir,
    find_partitions,
    is_log_dir,
    segment_file_name,
)
from kfmt.partition.log_start import (
    BelowLogStart,
    below_log_start,
    first_kept_position,
    kept_segments,
    left_out_entries,
    segment_start,
    segment_start_note,
)
from kfmt.partition.summary import PartitionSummary, PartitionTally
from kfmt.partition.topic_identity import TargetTopics, TopicIdentity
from kfmt.pipelines.engine import Engine, choose_engine, is_process_local
from kfmt.pipelines.runner import run_tasks
from kfmt.storage.staging import StagedOutput, StagingTarget
from kfmt.storage.store import Storage, open_storage
from kfmt.transforms.metadata_log import (
    BOOTSTRAP_CHECKPOINT,
    BOOTSTRAP_REASON,
    CARRIED,
    is_node_file,
    metadata_log_files,
    node_files_left_out,
    split_metadata_log,
)
from kfmt.transforms.report import REPORT_NAME, make_report, report_bytes

COPIED_LOG_DIR_FILES = ("meta.properties", BOOTSTRAP_CHECKPOINT)
OFFSET_CHECKPOINTS = ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
                      "replication-offset-checkpoint", "cleaner-offset-checkpoint")
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REGENERATED_SUFFIXES = ("index", "timeindex", "txnindex", "snapshot")


@dataclass
class PartitionPlan:
    part: PartitionDir
    rel: str  # its directory inside DST ('' when SRC is the partition directory itself)
    log_start_offset: int  # from SRC's log-start-offset-checkpoint; 0 when it has no entry
    skipped: list[str] = field(default_factory=list)  # files neither copied nor regenerated
    # a partition-directory DST: the first segment begins here, named after the log start offset
    # (kfmt.partition.log_start.segment_start); None: the segments as they are
    segment_start: int | None = None
    below: BelowLogStart | None = None  # what the first segment's new start leaves out (reindex counts it)
    # the partition.metadata written (kfmt.partition.topic_identity); None: the source's, as it is
    identity: TopicIdentity | None = None

    def rel_path(self, name: str) -> str:
        return f"{self.rel}/{name}" if self.rel else name

    def write_identity(self, out) -> None:
        """partition.metadata into the partition's directory of `out` (staged output or files)."""
        TopicIdentity.of(self.identity, self.part).write_into(out, self.rel_path(PARTITION_METADATA))


@dataclass
class LogDirFile:
    name: str
    action: str  # "copy" | "filter" (an offset checkpoint whose other lines are dropped) | "skip"
    reason: str


@dataclass
class DirectoryPlan:
    source: str
    destination: str
    log_dir: bool
    partitions: list[PartitionPlan]
    log_dir_files: list[LogDirFile]
    other_cluster: str | None = None  # the warning that SRC's node files were left out (metadata_log)

    def warn_strays(self) -> None:
        """A warning for each partition written (or planned, in a dry run) that a KRaft broker would
        set aside as a stray, and one when SRC's node files were left out; called once the run
        succeeded, so that a failure stays one line."""
        for p in self.partitions:
            if p.identity is not None and p.identity.warning:
                warnings.warn(p.identity.warning, KfmtWarning, stacklevel=2)
        if self.other_cluster:
            warnings.warn(self.other_cluster, KfmtWarning, stacklevel=2)

    def identity_notes(self) -> list[str]:
        """What each partition's partition.metadata is (and a warning's text where it is a stray)."""
        return [p.identity.note(p.part.name) for p in self.partitions if p.identity is not None]

    def lines(self) -> list[str]:
        """The plan as text (--dry-run)."""
        out = [f"reindex {self.source} -> {self.destination} "
               f"({'log directory' if self.log_dir else 'partition directory'}, "
               f"{len(self.partitions)} partition(s))"]
        for p in self.partitions:
            log_bytes = sum(s.size for s in p.part.segments)
            target = p.rel or "."
            out.append(f"  {p.part.name} -> {target}/: {len(p.part.segments)} segment(s), "
                       f"{log_bytes} bytes of .log copied byte for byte; .index, .timeindex, "
                       f".txnindex, .snapshot and {LEADER_EPOCH_CHECKPOINT} regenerated"
                       + (f"; {PARTITION_METADATA} {p.identity.origin}" if p.identity else ""))
            if p.log_start_offset:
                out.append(f"    log start offset {p.log_start_offset} (log-start-offset-checkpoint)")
            for name in p.skipped:
                out.append(f"    skip {name}")
        for f in self.log_dir_files:
            out.append(f"  {f.action} {f.name}: {f.reason}")
        return out

    def to_json(self) -> dict:
        return {"source": self.source, "destination": self.destination, "log_dir": self.log_dir,
                "partitions": [{"name": p.part.name, "destination": p.rel or ".",
                                "segments": len(p.part.segments),
                                "log_bytes": sum(s.size for s in p.part.segments),
                                "log_start_offset": p.log_start_offset, "skipped": p.skipped}
                               for p in self.partitions],
                "log_dir_files": [vars(f) for f in self.log_dir_files]}


def _skipped_files(part: PartitionDir) -> list[str]:
    kept = {PARTITION_METADATA, LEADER_EPOCH_CHECKPOINT}
    out = []
    for name in sorted(part.files):
        m = SEGMENT_NAME.match(name)
        if name in kept or (m and m[2] in ("log", *REGENERATED_SUFFIXES)):
            continue
        out.append(name)
    return out


def _log_dir_files(storage: Storage, path: str, parts: list[PartitionDir],
                   metadata: PartitionDir | None = None) -> list[LogDirFile]:
    """What becomes of each entry of SRC's log directory besides the partitions transformed (the
    KRaft metadata log `metadata`, when selected, is carried file by file: kfmt.transforms.metadata_log)."""
    names = {p.name for p in parts}
    out = []
    for info in storage.listdir(path):
        if info.is_dir:
            if metadata is not None and info.name == metadata.name:
                out += [LogDirFile(rel, "copy", CARRIED) for rel in metadata_log_files(metadata)]
            elif info.name not in names:
                out.append(LogDirFile(info.name + "/", "skip", "not a selected partition directory"))
        elif info.name == BOOTSTRAP_CHECKPOINT:
            out.append(LogDirFile(info.name, "copy", BOOTSTRAP_REASON))
        elif info.name in COPIED_LOG_DIR_FILES:
            out.append(LogDirFile(info.name, "copy", "the broker and cluster identity of the log directory"))
        elif info.name in OFFSET_CHECKPOINTS:
            out.append(LogDirFile(info.name, "filter", "offsets are unchanged; lines of partitions "
                                                       "not written are dropped"))
        elif info.name == ".kafka_cleanshutdown":
            out.append(LogDirFile(info.name, "skip", "without it a broker recovers DST, rebuilding "
                                                     "these same files, rather than trusting them"))
        else:
            out.append(LogDirFile(info.name, "skip", "not a file a broker needs"))
    return out


def check_not_inside(src_url: str, dst_url: str) -> None:
    if "://" not in src_url and "://" not in dst_url:
        src_url, dst_url = os.path.realpath(src_url), os.path.realpath(dst_url)
    src, dst = src_url.rstrip("/"), dst_url.rstrip("/")
    if dst == src or dst.startswith(src + "/"):
        raise UsageError(f"{dst_url}: the destination lies inside the source {src_url}")


def source_partitions(src_storage: Storage, src_path: str, dst_storage: Storage, dst_path: str,
                      topic: str | None, partition: int | None) -> tuple[list[PartitionDir], str, str, bool]:
    """What a transform reads: (the partitions selected, SRC's URL, DST's URL, whether SRC is a log
    directory). A usage error when nothing is selected or DST lies inside SRC."""
    parts = find_partitions(src_storage, src_path, topic, partition)
    source, destination = src_storage.url_of(src_path), dst_storage.url_of(dst_path)
    check_not_inside(source, destination)
    return parts, source, destination, is_log_dir(parts, src_storage, src_path)


def plan_reindex(src_storage: Storage, src_path: str, dst_storage: Storage, dst_path: str,
                 topic: str | None = None, partition: int | None = None,
                 include_deleted: bool = False, target: TargetTopics | None = None) -> DirectoryPlan:
    """What a transform reads and writes. `include_deleted`: a partition-directory DST keeps its
    segments as they are, the records below the log start offset too (served again: no log directory
    keeps the offset). `target`: the topic ids the output is for (kfmt.partition.topic_identity; None:
    every partition keeps its own partition.metadata)."""
    parts, source, destination, log_dir = source_partitions(src_storage, src_path, dst_storage, dst_path,
                                                            topic, partition)
    parts, metadata = split_metadata_log(parts, log_dir, src_storage, src_path)
    log_starts: dict = {}
    log_dir_files: list[LogDirFile] = []
    if log_dir:
        log_dir_files = _log_dir_files(src_storage, src_path, parts, metadata)
        checkpoint = src_storage.join(src_path, LOG_START_OFFSET_CHECKPOINT)
        if src_storage.exists(checkpoint):
            log_starts = read_offset_checkpoint(_text(src_storage, checkpoint),
                                                src_storage.url_of(checkpoint))
    target = target or TargetTopics()
    target.check_topics({p.topic for p in parts if p.topic is not None})
    plans = []
    for p in parts:
        # a partition directory's log start offset is its parent's checkpoint entry (PartitionDir)
        entry = log_starts.get((p.topic, p.partition), 0) if log_dir else p.log_start_entry or 0
        start = None if include_deleted else segment_start(p, p.log_start_offset, log_dir)
        plans.append(PartitionPlan(p, p.name if log_dir else "", entry, _skipped_files(p), start,
                                   identity=target.identity(p)))
    left_out = log_dir and node_files_left_out(target, src_storage, src_path, [p.identity for p in plans],
                                               destination)
    if not left_out:
        return DirectoryPlan(source, destination, log_dir, plans, log_dir_files)
    for f in log_dir_files:
        if is_node_file(f.name):
            f.action, f.reason = "skip", left_out.reason
    return DirectoryPlan(source, destination, log_dir, plans, log_dir_files, left_out.warning)


def _text(storage: Storage, path: str) -> str:
    return checkpoint_text(storage.read(path), storage.url_of(path))


def reindex_partition(plan: PartitionPlan, out: StagedOutput, options: CompanionOptions,
                      on_progress: Callable[[int], None] | None = None,
                      notes: list[str] | None = None) -> PartitionSummary:
    """Copy one partition's segments into `out` and write its regenerated companion files. A bad
    tail of the last segment is left out of the copy, as Kafka's log recovery truncates it, and said
    in `notes` (a warning when None; kfmt.partition.segment); anywhere else it is an error."""
    part, storage = plan.part, plan.part.storage
    builder = CompanionBuilder(**options.builder_options(), log_start_offset=plan.log_start_offset,
                               leader_epochs=existing_leader_epochs(part))
    tally = PartitionTally(PartitionSummary(storage.url_of(part.path), part.topic, part.partition))
    if plan.rel:
        out.makedirs(plan.rel)  # an empty partition directory stays one
    segments = kept_segments(part, plan.segment_start)
    for seg in segments:
        file = part.display(seg.log)
        data, base, name = storage.map(seg.log.path), seg.base_offset, seg.log.name
        checked = storage.checked_sha256(seg.log.path)  # restore: the archive's object, checked whole
        if seg is segments[0] and plan.segment_start is not None and plan.segment_start > base:
            # the log start offset travels in the first segment's name: from the batch holding it
            data = data[first_kept_position(data, file, plan.segment_start):]
            base, name, checked = plan.segment_start, segment_file_name(plan.segment_start, "log"), None
        try:
            builder.begin_segment(base)
        except DataError as err:
            raise err.located(file=file)
        tally.add_segment(len(data))
        tail = _check_segment(data, file, builder, tally)
        if tail.is_error:
            checked = None
            if seg is not segments[-1]:
                raise tail.error(file)
            data = data[:tail.position]
            if notes is None:
                tail.recovered(file)
            else:
                notes.append(tail.recovery_message(file))
        companions = builder.end_segment()
        out.write(plan.rel_path(name), data, seg.log.mtime_ms, checked)
        for name, content in companions.files().items():
            out.write(plan.rel_path(name), content)
        if on_progress is not None:
            on_progress(len(data))
    for name, content in builder.finish().files().items():
        out.write(plan.rel_path(name), content)
    plan.write_identity(out)
    return tally.finish()


def _check_segment(data, file: str, builder: CompanionBuilder, tally: PartitionTally) -> segment.Tail:
    """Every batch of a segment checked (CRCs, record structure) and counted, in file order, and fed
    to the companion builder; returns how the segment ended. Uncompressed v2 data batches and
    uncompressed v0/v1 messages are checked and digested where they lie, many at a time, and reach the
    builder as frames (kfmt.format.batch_runs); every other entry is decoded (segment.decode). Nothing
    of it is written before the whole segment passed."""
    scanner = segment.FrameScanner(data, file)
    for rows in scanner.chunks():
        decoded = _DecodedRows(rows, builder, file)
        for item in decoded.flushed_on_error(batch_runs.checked(data, rows, file, messages=True)):
            if isinstance(item, Batch) and not item.header.is_control:
                decoded.add(item)
            else:
                decoded.flush()
                try:
                    if isinstance(item, CheckedRun):
                        builder.add_frames(item.rows)
                    else:
                        builder.add_decoded_batch(item)
                except DataError as err:
                    raise _located(err, file, item)
            tally.add(item)
        decoded.flush()
    return scanner.tail


class _DecodedRows:
    """Decoded data batches (compressed ones, mostly) given to the companion builder as their
    frames, many at a time, rather than one add_decoded_batch each: what the builder needs of a
    data batch is in its frame (a wrapper's decoded first offset is not). Control batches and
    checked runs flush them first, so the builder sees every batch in file order."""

    def __init__(self, rows: np.ndarray, builder: CompanionBuilder, file: str):
        self.rows, self.builder, self.file = rows, builder, file
        self.positions: list[int] = []

    def flushed_on_error(self, items):
        """`items`, with the batches waiting here given to the builder before an error of a later
        one propagates (the builder's complaint about an earlier batch comes first, as it did when
        each went on its own)."""
        items = iter(items)
        while True:
            try:
                item = next(items)
            except StopIteration:
                return
            except DataError:
                self.flush()
                raise
            yield item

    def add(self, batch: Batch) -> None:
        self.positions.append(batch.header.position)

    def flush(self) -> None:
        if not self.positions:
            return
        at = np.searchsorted(self.rows["position"], self.positions)
        self.positions = []
        run = CheckedRun(self.rows[at], None, None)
        try:
            self.builder.add_frames(run.rows)
        except DataError as err:
            raise _located(err, self.file, run)


def _located(err: DataError, file: str, item) -> DataError:
    """The error of the companion builder about a batch, located at that batch (a row of a run names
    the offset the error names)."""
    if isinstance(item, CheckedRun):
        rows = item.rows[item.rows["last_offset"] == err.offset] if err.offset is not None else item.rows[:0]
        row = rows[0] if len(rows) else item.rows[0]
        return err.located(file=file, base_position=int(row["position"]), offset=int(row["last_offset"]))
    return err.located(file=file, base_position=item.header.position, offset=item.header.last_offset)


def write_log_dir_files(plan: DirectoryPlan, storage: Storage, path: str, out,
                        updates: dict[str, dict[tuple, int | None]] | None = None) -> None:
    """The log directory's own files in DST: meta.properties copied, the offset checkpoints filtered to
    the partitions written. `updates`: checkpoint name -> (topic, partition) -> new offset (None: no
    entry); a checkpoint SRC lacks is created when an update gives it an entry, as a broker creates it."""
    updates = updates or {}
    written = {(p.part.topic, p.part.partition) for p in plan.partitions}
    done = set()
    for f in plan.log_dir_files:
        if f.action == "skip":
            continue
        info = storage.info(storage.join(path, f.name))
        data = bytes(storage.read(info.path))
        if f.action == "filter":
            offsets = read_offset_checkpoint(checkpoint_text(data, storage.url_of(info.path)),
                                             storage.url_of(info.path))
            kept = _updated({tp: o for tp, o in offsets.items() if tp in written}, updates.get(f.name))
            if kept != offsets:
                data = write_offset_checkpoint(kept).encode("utf-8")
            done.add(f.name)
        out.write(f.name, data, info.mtime_ms)
    for name, changes in sorted(updates.items()):
        if name in done or name not in OFFSET_CHECKPOINTS:
            continue
        kept = _updated({}, changes)
        if kept:
            out.write(name, write_offset_checkpoint(kept).encode("utf-8"))


def _updated(offsets: dict, changes: dict | None) -> dict:
    for tp, offset in (changes or {}).items():
        if offset is None:
            offsets.pop(tp, None)
        else:
            offsets[tp] = offset
    return offsets


@dataclass(frozen=True)
class ReindexTask:
    """One partition's reindex, as a task of kfmt.pipelines.runner (picklable)."""

    plan: PartitionPlan
    target: StagingTarget
    options: CompanionOptions

    def run(self) -> tuple[PartitionSummary, list, list[str]]:
        files, notes = self.target.files(), []
        summary = reindex_partition(self.plan, files, self.options, notes=notes)
        return summary, list(files.records.values()), notes


def run_reindex_task(task: ReindexTask):
    return task.run()


def plan_engine(master: "str | Engine | None", input_bytes: int, src_storage: Storage,
                dst_storage: Storage, threads_suffice: Callable[[], bool] | None = None) -> Engine:
    """The engine for a run reading `input_bytes` (kfmt.pipelines.engine): memory:// storage stays in
    this process; `threads_suffice`: whether the run's work releases the GIL (choose_engine)."""
    if isinstance(master, Engine):
        return master
    urls = [s.spec.url for s in (src_storage, dst_storage) if getattr(s, "spec", None) is not None]
    return choose_engine(master, input_bytes, process_local=is_process_local(*urls),
                         threads_suffice=threads_suffice)


def reindex(src: str, dst: str, *, src_options: dict | None = None, dst_options: dict | None = None,
            topic: str | None = None, partition: int | None = None,
            options: CompanionOptions | None = None, master: "str | Engine | None" = None,
            dry_run: bool = False, progress: bool = True, include_deleted: bool = False,
            on_progress: Callable[[int], None] | None = None,
            target: TargetTopics | None = None) -> tuple[DirectoryPlan, dict | None]:
    """Reindex SRC into DST. Returns the plan and the report (None for a dry run, which writes
    nothing). `on_progress(bytes)` is called as segments are done when the work runs in this process.
    `include_deleted`: see plan_reindex."""
    options = (options or CompanionOptions()).with_clock()
    src_storage, src_path = open_storage(src, src_options)
    dst_storage, dst_path = open_storage(dst, dst_options if dst_options is not None else src_options)
    plan = plan_reindex(src_storage, src_path, dst_storage, dst_path, topic, partition, include_deleted, target)
    for p in plan.partitions:
        if p.segment_start is not None:
            p.below = below_log_start(p.part, p.segment_start)
    if dry_run:
        if dst_storage.exists(dst_path) and (not dst_storage.isdir(dst_path)
                                             or dst_storage.listdir(dst_path)):
            raise UsageError(f"{plan.destination}: the destination exists and is not empty")
        plan.warn_strays()
        return plan, None
    engine = plan_engine(master, sum(s.size for p in plan.partitions for s in p.part.segments),
                         src_storage, dst_storage)
    inputs, outputs, tails = [], [], []
    with StagedOutput(dst_storage, dst_path) as out:
        if engine.engine == "inprocess" and on_progress is not None:
            summaries = [reindex_partition(p, out, options, on_progress, tails) for p in plan.partitions]
        else:
            target = out.target()
            results = run_tasks(run_reindex_task, [ReindexTask(p, target, options) for p in plan.partitions],
                                master=engine, description="reindex", progress=progress)
            summaries = []
            for summary, records, notes in results:
                out.adopt(records)
                summaries.append(summary)
                tails += notes
        for p, summary in zip(plan.partitions, summaries):
            inputs.append(summary)
            outputs.append(replace(summary, path=dst_storage.url_of(
                dst_storage.join(dst_path, p.rel) if p.rel else dst_path)))
        if plan.log_dir:
            write_log_dir_files(plan, src_storage, src_path, out)
        report = make_report(
            "reindex", plan.source, plan.destination,
            {"index_interval_bytes": options.index_interval_bytes, "now_ms": options.now_ms,
             "producer_expiration_ms": options.producer_expiration_ms, "topic": topic,
             "partition": partition, "include_deleted": include_deleted},
            inputs, outputs, out.files, _notes(plan) + tails)
        report["below_log_start"] = left_out_entries((p.part.label, p.below) for p in plan.partitions)
        report["engine"] = engine.to_json()
        out.write(REPORT_NAME, report_bytes(report))
    plan.warn_strays()
    return plan, report


def _notes(plan: DirectoryPlan) -> list[str]:
    notes = [".log segments copied byte for byte with their modification times; .index, .timeindex, "
             ".txnindex, producer .snapshot files and leader-epoch-checkpoint regenerated as Kafka "
             "3.6's log recovery builds them"]
    notes += plan.identity_notes()
    for p in plan.partitions:
        notes += [f"{p.part.name}: skipped {name}" for name in p.skipped]
        if p.below is not None:
            notes.append(p.below.note(p.part.name, False))
        if p.segment_start is not None:
            notes.append(segment_start_note(p.part.name, p.segment_start))
    notes += [f"log directory: {f.action} {f.name} ({f.reason})" for f in plan.log_dir_files]
    return notes
