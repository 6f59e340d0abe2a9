"""A transform run, as upgrade, resegment and recompress share it: plan, dry run, staged output,
parallel tasks, content digests, report, publication.

A run (`run_transform`):
1. finds SRC's partitions and DST's layout as `kfmt reindex` does
   (kfmt.transforms.directory_plan.plan_directory: a partition directory or a log directory, its
   log-directory files and their treatment);
2. lets the transform plan its work, running preparation tasks if it needs them (resegment plans its
   cut points in one task per partition); `--dry-run` stops here and prints the plan;
3. runs the write tasks in parallel (kfmt.pipelines.runner): each writes segments through the staged
   output's picklable target and returns small things only -- file records, facts about each written
   segment (kfmt.partition.companions), record tallies with content digests of what it read
   ("before") and of what it wrote ("after");
4. on the driver, per partition in offset order: the partition-level companion files
   (kfmt.write.segment_writer.write_companions: `.txnindex`, producer snapshots, leader-epoch-checkpoint,
   partition.metadata), then the check that the content digest after equals the digest before (the
   digest adds up across tasks however a partition was split); a mismatch fails the run and nothing
   is published;
5. the log directory's own files (as reindex: offsets are unchanged, so its checkpoints stay valid),
   `kfmt-report.json`, and publication of DST at once (kfmt.storage.staging).

What is carried is what a broker serves (kfmt.partition.log_start): from the log start offset on,
unless `include_deleted`; segments wholly below it are not read, batches ending below it are left
out by the tasks (each task is given the partition's `floor`), and the report's notes count them.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

from kfmt.errors import KfmtError, UsageError
from kfmt.format import segment
from kfmt.partition.companions import CompanionOptions, existing_leader_epochs
from kfmt.partition.layout import Segment
from kfmt.partition.log_start import (
    BelowLogStart,
    below_log_start,
    kept_segments,
    left_out_entries,
    left_out_suffix,
    segment_start,
    segment_start_note,
    transform_floor,
)
from kfmt.partition.summary import ENTRIES_CHECK, PartitionCounts, PartitionTally, merge_tallies
from kfmt.pipelines.engine import Engine, choose_engine, engine_note, is_process_local
from kfmt.pipelines.runner import run_tasks
from kfmt.storage.manifest import FileRecord
from kfmt.storage.staging import StagedOutput, StagingTarget
from kfmt.storage.store import Storage, StorageSpec, open_storage
from kfmt.transforms.directory_plan import DirectoryPlan, PartitionPlan, plan_directory, write_log_dir_files
from kfmt.transforms.job_options import JobOptions
from kfmt.transforms.report import REPORT_NAME, make_report, report_bytes
from kfmt.write.planner import RollPolicy
from kfmt.write.segment_writer import write_companions
from kfmt.write.writer import WrittenSegment


@dataclass(frozen=True)
class SourceSegment:
    """One source `.log`, as a task opens it (picklable)."""

    spec: StorageSpec
    path: str
    file: str  # how errors name it
    base_offset: int
    size: int
    mtime_ms: int | None
    ends_log: bool = False  # the partition's last segment: a bad tail is what log recovery truncates

    @classmethod
    def of(cls, plan: PartitionPlan, seg: Segment) -> "SourceSegment":
        part = plan.part
        return cls(part.storage.spec, seg.log.path, part.display(seg.log), seg.base_offset, seg.size,
                   seg.log.mtime_ms, seg is part.segments[-1])

    def check_tail(self, tail: segment.Tail, notes: list[str]) -> None:
        """After a scan of the whole segment: a bad tail is an error, but in the partition's last
        segment it is what Kafka's log recovery truncates, left out with a note (kfmt.format.segment)."""
        if not tail.is_error:
            return
        if not self.ends_log:
            raise tail.error(self.file)
        notes.append(tail.recovery_message(self.file))

    def read(self, start: int = 0, end: int | None = None):
        """The segment's bytes from `start` (the whole file is mapped where the store allows)."""
        storage, _ = self.spec.open()
        if start == 0 and end is None:
            return storage.map(self.path)
        return storage.read(self.path, start, self.size if end is None else end)

    def read_range(self, start: int, end: int) -> tuple[object, int]:
        """(bytes holding [start, end), the file position of their first byte): the whole file
        where the store maps files (a view costs nothing), else just the range."""
        storage, _ = self.spec.open()
        if type(storage)._map is not Storage._map or (start == 0 and end >= self.size):
            return storage.map(self.path), 0
        return storage.read(self.path, start, end), start


@dataclass
class TaskResult:
    """What one task returns: all small, whatever the size of its segments."""

    partition: int  # index of the partition in the plan
    segments: list[WrittenSegment] = field(default_factory=list)  # written, in offset order
    files: list[FileRecord] = field(default_factory=list)
    before: PartitionTally | None = None  # what it read
    after: PartitionTally | None = None  # what it wrote
    detail: object = None  # anything else a transform's tasks hand back (resegment: a plan)
    notes: list[str] = field(default_factory=list)  # for the report (a last segment's tail left out)


# A task takes consecutive segments of one partition up to this many bytes: a segment of its own when
# segments are large (the usual 1 GiB), a few together when they are small, so that the fixed cost
# of a Spark task does not dominate small logs.
TASK_BYTES = 64 << 20


def task_groups(items: Sequence, size=lambda item: item.size, budget: int = TASK_BYTES) -> list[tuple]:
    """`items` (in order) cut into consecutive groups of at most `budget` bytes (an item larger than
    that alone)."""
    groups, current, total = [], [], 0
    for item in items:
        if current and total + size(item) > budget:
            groups.append(tuple(current))
            current, total = [], 0
        current.append(item)
        total += size(item)
    if current:
        groups.append(tuple(current))
    return groups


def new_tally(entries: bool = False) -> PartitionTally:
    """Counts and content digest of a part of a partition (merged on the driver); `entries`: the
    entries digest of a byte-for-byte copy instead (kfmt.partition.summary)."""
    summary = PartitionCounts("", None, None)
    return PartitionTally.of_entries(summary) if entries else PartitionTally(summary)


@dataclass
class PartitionWork:
    """One partition of a run: where it comes from and goes, and what the transform planned for it."""

    index: int
    # from kfmt.transforms.directory_plan: the source partition, its directory in DST, its log start
    plan: PartitionPlan
    sources: list[SourceSegment]
    detail: object = None  # the transform's own plan of the partition
    befores: list[PartitionTally] = field(default_factory=list)  # tallies of the source read in preparation
    floor: int | None = None  # the first offset carried (the log start offset; None: all)
    # a partition-directory DST: the first segment's base offset, the log start offset it carries
    # (kfmt.partition.log_start.segment_start; None: the source's)
    start: int | None = None
    below: BelowLogStart | None = None  # what lies below it
    notes: list[str] = field(default_factory=list)  # the preparation's notes for the report

    @property
    def label(self) -> str:
        return self.plan.part.name


class Transform:
    """A command's part of a run. Subclasses say how a partition is planned and written."""

    command = ""
    description = ""  # the progress bar's label

    def __init__(self, companions: CompanionOptions = CompanionOptions()):
        self.companions = companions

    def options(self) -> dict:
        """The options recorded in the report."""
        return self.companions.to_json()

    def policy(self) -> RollPolicy:
        return RollPolicy(index_interval_bytes=self.companions.index_interval_bytes)

    def preparation_tasks(self, work: list[PartitionWork], dry_run: bool) -> list:
        """Tasks to run before planning (their TaskResults go to `prepared`)."""
        return []

    def prepared(self, work: list[PartitionWork], results: list[TaskResult]) -> None:
        """Take the preparation results (set each PartitionWork.detail)."""

    def write_tasks(self, work: list[PartitionWork], target: StagingTarget) -> list:
        raise NotImplementedError

    def describe(self, work: PartitionWork) -> list[str]:
        """Dry-run lines about one partition (indented)."""
        return []

    def notes(self) -> list[str]:
        return []

    def threads_suffice(self, work: list[PartitionWork]) -> bool:
        """Whether this run's tasks spend their time in code that releases the GIL, so that threads
        of this process run them in parallel as well as worker processes would, without starting
        any (kfmt.pipelines.engine). Asked only when it decides the engine."""
        return False


@dataclass
class RunPlan:
    """What a run will do (the dry run prints it)."""

    command: str
    layout: DirectoryPlan
    work: list[PartitionWork]
    transform: Transform

    def lines(self) -> list[str]:
        layout = self.layout
        out = [f"{self.command} {layout.source} -> {layout.destination} "
               f"({'log directory' if layout.log_dir else 'partition directory'}, "
               f"{len(self.work)} partition(s))"]
        for w in self.work:
            log_bytes = sum(s.size for s in w.sources)
            out.append(f"  {w.label} -> {w.plan.rel or '.'}/: {len(w.sources)} segment(s), "
                       f"{log_bytes} bytes of .log")
            out += [f"    {line}" for line in self.transform.describe(w)]
            if w.plan.log_start_offset:
                out.append(f"    log start offset {w.plan.log_start_offset} (log-start-offset-checkpoint)")
            out += [f"    skip {name}" for name in w.plan.skipped]
        out += [f"  {f.action} {f.name}: {f.reason}" for f in layout.log_dir_files]
        return out

    def to_json(self) -> dict:
        doc = self.layout.to_json()
        doc["command"] = self.command
        doc["options"] = self.transform.options()
        for w, p in zip(self.work, doc["partitions"]):
            p["plan"] = self.transform.describe(w)
        return doc


def plan_engine(master: "str | Engine | None", input_bytes: int, src_storage: Storage,
                dst_storage: Storage, threads_suffice: Callable[[], bool] | None = None) -> Engine:
    """The engine for a run reading `input_bytes` (kfmt.pipelines.engine): memory:// storage stays in
    this process; `threads_suffice`: whether the run's work releases the GIL (choose_engine)."""
    if isinstance(master, Engine):
        return master
    urls = [s.spec.url for s in (src_storage, dst_storage) if getattr(s, "spec", None) is not None]
    return choose_engine(master, input_bytes, process_local=is_process_local(*urls),
                         threads_suffice=threads_suffice)


def _run_task(task):
    return task.run()


def run_transform(transform: Transform, src: str, dst: str, job: JobOptions = JobOptions()
                  ) -> tuple[RunPlan, dict | None]:
    """Run `transform` from SRC into DST as `job` says (kfmt.transforms.job_options). Returns the plan
    and the report (None for a dry run, which writes nothing)."""
    started = time.time()
    transform.companions = transform.companions.with_clock()
    src_storage, src_path = open_storage(src, job.src_options)
    dst_storage, dst_path = open_storage(dst, job.dst_storage_options)
    layout = plan_directory(src_storage, src_path, dst_storage, dst_path, job.topic, job.partition,
                            target=job.target)
    work = []
    for i, p in enumerate(layout.partitions):
        floor = transform_floor(p.part, job.include_deleted)
        work.append(PartitionWork(i, p, [SourceSegment.of(p, s) for s in kept_segments(p.part, floor)],
                                  floor=floor, start=segment_start(p.part, floor, layout.log_dir),
                                  below=None if floor is None else below_log_start(p.part, floor)))
    engine = plan_engine(job.master, sum(s.size for w in work for s in w.sources), src_storage, dst_storage,
                         lambda: transform.threads_suffice(work))
    run = dict(master=engine, progress=job.progress)
    plan = RunPlan(transform.command, layout, work, transform)

    def prepare():
        tasks = transform.preparation_tasks(work, job.dry_run)
        transform.prepared(work, run_tasks(_run_task, tasks, description=f"{transform.command}: plan",
                                           **run) if tasks else [])

    if job.dry_run:
        if dst_storage.exists(dst_path) and (not dst_storage.isdir(dst_path)
                                             or dst_storage.listdir(dst_path)):
            raise UsageError(f"{layout.destination}: the destination exists and is not empty")
        prepare()
        layout.warn_strays()
        return plan, None
    with StagedOutput(dst_storage, dst_path) as out:  # refuses a DST in use before any work is done
        prepare()
        for w in work:
            if w.plan.rel:
                out.makedirs(w.plan.rel)  # an empty partition directory stays one
        results = run_tasks(_run_task, transform.write_tasks(work, out.target()),
                            description=transform.description or transform.command, **run)
        inputs, outputs = _finish_partitions(transform, work, results, out, dst_storage, dst_path)
        if layout.log_dir:
            write_log_dir_files(layout, src_storage, src_path, out)
        report = make_report(transform.command, layout.source, layout.destination,
                             {**transform.options(), **job.selection()},
                             inputs, outputs, out.files,
                             _notes(transform, layout, work) + [n for r in results for n in r.notes])
        report["below_log_start"] = left_out_entries((w.label, w.below) for w in work)
        report["engine"] = engine.to_json()
        report["duration_ms"] = int((time.time() - started) * 1000)
        out.write(REPORT_NAME, report_bytes(report))
    layout.warn_strays()
    return plan, report


def _finish_partitions(transform: Transform, work: list[PartitionWork], results: list[TaskResult],
                       out: StagedOutput, dst_storage, dst_path: str):
    by_partition: dict[int, list[TaskResult]] = {w.index: [] for w in work}
    for r in results:
        by_partition[r.partition].append(r)
        out.adopt(r.files)
    inputs, outputs = [], []
    for w in work:
        part, mine = w.plan.part, by_partition[w.index]
        segments = [s for r in mine for s in r.segments]
        # "before" may come from other tasks than the writing ones (resegment's preparation)
        befores = w.befores + [r.before for r in mine if r.before is not None]
        c = transform.companions
        options = {"now_ms": c.now_ms, "producer_expiration_ms": c.producer_expiration_ms,
                   "log_start_offset": w.plan.log_start_offset,
                   "leader_epochs": existing_leader_epochs(part)}  # recovery starts from them (as reindex)
        write_companions(out.staged, w.plan.rel, segments, transform.policy(), source=part,
                         identity=w.plan.identity, **options)
        source_url = part.storage.url_of(part.path)
        dst_url = dst_storage.url_of(dst_storage.join(dst_path, w.plan.rel) if w.plan.rel else dst_path)
        before = merge_tallies(befores, source_url, part.topic, part.partition)
        after = merge_tallies([r.after for r in mine if r.after is not None], dst_url, part.topic,
                              part.partition)
        after.segments = len(segments)
        after.log_bytes = sum(s.log.size for s in segments)
        if (before.check, before.digest, before.records) != (after.check, after.digest, after.records):
            what = "entries" if before.check == ENTRIES_CHECK else "records"
            raise KfmtError(f"{w.label}: the {what} written differ from the {what} read ({before.check} "
                            f"digest {before.digest} before, {after.digest} after); nothing was published")
        inputs.append(before)
        outputs.append(after)
    return inputs, outputs


def _notes(transform: Transform, layout: DirectoryPlan, work: list[PartitionWork]) -> list[str]:
    notes = list(transform.notes())
    notes += [w.below.note(w.label, layout.log_dir) for w in work if w.below is not None]
    notes += [segment_start_note(w.label, w.start) for w in work if w.start is not None]
    notes += [n for w in work for n in w.notes]
    notes += layout.identity_notes()
    notes.append(".index, .timeindex, .txnindex, producer .snapshot files and leader-epoch-checkpoint "
                 "built as Kafka 3.6's log recovery builds them; the content digest of the records "
                 "written was checked against the records read")
    for p in layout.partitions:
        notes += [f"{p.part.name}: skipped {name}" for name in p.skipped]
    notes += [f"log directory: {f.action} {f.name} ({f.reason})" for f in layout.log_dir_files]
    return notes


def summary_line(report: dict, destination: str) -> str:
    t = report["totals"]
    return (f"{report['command']}: {t['partitions']} partition(s), {t['input_batches']} batches "
            f"and {t['input_records']} records in, {t['output_batches']} batches and "
            f"{t['output_records']} records out, into {destination} "
            f"({report['duration_ms'] / 1000:.1f} s{engine_note(report)}){left_out_suffix(report)}")

