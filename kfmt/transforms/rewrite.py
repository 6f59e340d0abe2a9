"""What kfmt's Spark transforms (upgrade, resegment, recompress) share: plan, dry run, staged output,
parallel tasks, content digests, report, publication.

A run (`run_transform`):
1. finds SRC's partitions and DST's layout as `kfmt reindex` does (kfmt.transforms.reindex.plan_reindex: a
   partition directory or a log directory, its log-directory files and their treatment);
2. lets the transform plan its work, running preparation tasks if it needs them (resegment plans its
   cut points in one task per partition); `--dry-run` stops here and prints the plan;
3. runs the write tasks in parallel (pipelines.runner: Spark, or in this process): each writes
   segments through the staged output's picklable target and returns small things only -- file
   records, each written segment's SegmentFacts (kfmt.partition.companions), record tallies with content
   digests of what it read ("before") and of what it wrote ("after");
4. on the driver, per partition in offset order: the partition-level companion files
   (kfmt.write.writer.write_companions: `.txnindex`, producer snapshots, leader-epoch-checkpoint,
   partition.metadata), then the check that the content digest after equals the digest before
   (kfmt.transforms.report: the digest adds up across tasks however a partition was split); a mismatch fails
   the run and nothing is published;
5. the log directory's own files (as reindex: offsets are unchanged, so its checkpoints stay valid),
   `kfmt-report.json`, and publication of DST at once (kfmt.storage.staging).

What is carried is what a broker serves (kfmt.partition.log_start): from the log start offset on,
unless `include_deleted`; segments wholly below it are not read, batches ending below it are left
out by the tasks (each task is given the partition's `floor`), and the report's notes count them.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Iterator, Sequence

import numpy as np

from kfmt.format import batch_runs, legacy_runs
from kfmt.plugin import registry
from kfmt.partition import segment
from kfmt.format.batch_runs import CheckedRun
from kfmt.partition.companions import CompanionOptions, control_facts, existing_leader_epochs
from kfmt.errors import DataError, KfmtError, UsageError
from kfmt.format.frames import ATTR_CONTROL, header_of
from kfmt.partition.layout import Segment
from kfmt.partition.log_start import BelowLogStart, below_log_start, kept_segments, transform_floor
from kfmt.format.legacy_runs import RunUpgrader, UpgradedRun
from kfmt.storage.manifest import FileRecord
from kfmt.format.model import INT32_MAX, Batch, BatchHeader
from kfmt.pipelines.runner import run_tasks
from kfmt.transforms.reindex import PartitionPlan, Plan, write_log_dir_files, plan_reindex
from kfmt.transforms.report import (REPORT_NAME, PartitionSummary, PartitionTally, make_report, merge_tallies,
                         report_bytes)
from kfmt.storage.staging import StagedOutput, StagingTarget
from kfmt.storage.store import Storage, StorageSpec, open_storage
from kfmt.write.writer import RollPolicy, SegmentRunWriter, WrittenSegment, write_companions


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
        segment it is what Kafka's log recovery truncates, left out with a note (kfmt.partition.segment)."""
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


def new_tally() -> PartitionTally:
    """Counts and content digest of a part of a partition (merged on the driver)."""
    return PartitionTally(PartitionSummary("", None, None))


@dataclass
class PartitionWork:
    """One partition of a run: where it comes from and goes, and what the transform planned for it."""

    index: int
    plan: PartitionPlan  # from kfmt.transforms.reindex: the source partition, its directory in DST, its log start
    sources: list[SourceSegment]
    detail: object = None  # the transform's own plan of the partition
    befores: list[PartitionTally] = field(default_factory=list)  # tallies of the source read in preparation
    floor: int | None = None  # the first offset carried (the log start offset; None: all)
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


@dataclass
class RunPlan:
    """What a run will do (the dry run prints it)."""

    command: str
    layout: Plan
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


def _run_task(task):
    return task.run()


def run_transform(transform: Transform, src: str, dst: str, *, src_options: dict | None = None,
                  dst_options: dict | None = None, topic: str | None = None,
                  partition: int | None = None, master: str | None = None, dry_run: bool = False,
                  progress: bool = True, include_deleted: bool = False) -> tuple[RunPlan, dict | None]:
    """Run `transform` from SRC into DST. Returns the plan and the report (None for a dry run, which
    writes nothing). `include_deleted`: also carry what lies below each log start offset."""
    started = time.time()
    transform.companions = transform.companions.with_clock()
    src_storage, src_path = open_storage(src, src_options)
    dst_storage, dst_path = open_storage(dst, dst_options if dst_options is not None else src_options)
    layout = plan_reindex(src_storage, src_path, dst_storage, dst_path, topic, partition)
    work = []
    for i, p in enumerate(layout.partitions):
        floor = transform_floor(p.part, include_deleted)
        work.append(PartitionWork(i, p, [SourceSegment.of(p, s) for s in kept_segments(p.part, floor)],
                                  floor=floor,
                                  below=None if floor is None else below_log_start(p.part, floor)))
    run = dict(master=master, progress=progress)
    plan = RunPlan(transform.command, layout, work, transform)

    def prepare():
        tasks = transform.preparation_tasks(work, dry_run)
        transform.prepared(work, run_tasks(_run_task, tasks, description=f"{transform.command}: plan",
                                           **run) if tasks else [])

    if dry_run:
        if dst_storage.exists(dst_path) and (not dst_storage.isdir(dst_path)
                                             or dst_storage.listdir(dst_path)):
            raise UsageError(f"{layout.destination}: the destination exists and is not empty")
        prepare()
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
                             {**transform.options(), "topic": topic, "partition": partition},
                             inputs, outputs, out.files,
                             _notes(transform, layout, work) + [n for r in results for n in r.notes])
        report["duration_ms"] = int((time.time() - started) * 1000)
        out.write(REPORT_NAME, report_bytes(report))
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
        write_companions(out.staged, w.plan.rel, segments, transform.policy(), source=part, **options)
        source_url = part.storage.url_of(part.path)
        dst_url = dst_storage.url_of(dst_storage.join(dst_path, w.plan.rel) if w.plan.rel else dst_path)
        before = merge_tallies(befores, source_url, part.topic, part.partition)
        after = merge_tallies([r.after for r in mine if r.after is not None], dst_url, part.topic,
                              part.partition)
        after.segments = len(segments)
        after.log_bytes = sum(s.log.size for s in segments)
        if (before.content_digest, before.records) != (after.content_digest, after.records):
            raise KfmtError(f"{w.label}: the records written differ from the records read (content "
                            f"digest {before.content_digest} before, {after.content_digest} after); "
                            f"nothing was published")
        inputs.append(before)
        outputs.append(after)
    return inputs, outputs


def _notes(transform: Transform, layout: Plan, work: list[PartitionWork]) -> list[str]:
    notes = list(transform.notes())
    notes += [w.below.note(w.label, layout.log_dir) for w in work if w.below is not None]
    notes += [n for w in work for n in w.notes]
    notes.append(".index, .timeindex, .txnindex, producer .snapshot files and leader-epoch-checkpoint "
                 "built as Kafka 3.6's log recovery builds them; partition.metadata copied; the "
                 "content digest of the records written was checked against the records read")
    for p in layout.partitions:
        notes += [f"{p.part.name}: skipped {name}" for name in p.skipped]
    notes += [f"log directory: {f.action} {f.name} ({f.reason})" for f in layout.log_dir_files]
    return notes


def summary_line(report: dict, destination: str) -> str:
    t = report["totals"]
    return (f"{report['command']}: {t['partitions']} partition(s), {t['input_batches']} batches "
            f"and {t['input_records']} records in, {t['output_batches']} batches and "
            f"{t['output_records']} records out, into {destination} "
            f"({report['duration_ms'] / 1000:.1f} s)")


# --- transforms that rewrite batches one source segment at a time (upgrade, recompress) ---

@dataclass(frozen=True)
class Output:
    """One batch a Rewriter produces: its entry bytes, the input batch it comes from (errors name its
    position), and the decoded input itself when the bytes are a copy."""

    entry: object  # bytes, or a view of the source's
    source: BatchHeader
    copied: Batch | None = None


class Rewriter:
    """The per-batch rule of a rewriting transform (picklable: it travels with every task)."""

    #: uncompressed v2 data batches are copied as they are: they are checked and digested where they
    #: lie and written many at a time (kfmt.format.batch_runs), never decoded into columns
    copies_uncompressed_v2 = False

    def outputs(self, header: BatchHeader, entry, batch: Batch) -> Iterator[Output]:
        """The output batches for one source entry (its header, bytes and decoded batch)."""
        raise NotImplementedError

    def run_upgrader(self, data, file: str) -> RunUpgrader | None:
        """What converts runs of uncompressed v0/v1 messages many at a time (kfmt.format.legacy_runs),
        or None: they go through `outputs` one by one."""
        return None

    def describe(self, census: "Census") -> list[str]:
        """Dry-run lines: what the rule will do with a partition holding these entries."""
        raise NotImplementedError


@dataclass
class Census:
    """Entries of a partition by (magic, codec, control), from headers alone: [entries, bytes]."""

    counts: dict = field(default_factory=dict)

    def add(self, header: BatchHeader) -> None:
        self._add((header.magic, header.compression, header.is_control), 1, header.size)

    def add_rows(self, rows: np.ndarray) -> None:
        """add() for rows of frames (kfmt.format.frames), many at a time."""
        control = (rows["magic"] >= 2) & (rows["attributes"] & ATTR_CONTROL != 0)
        keys = np.stack([rows["magic"].astype(np.int64), rows["compression"].astype(np.int64),
                         control.astype(np.int64)], axis=1)
        kinds, where = np.unique(keys, axis=0, return_inverse=True)
        where = where.reshape(-1)
        sizes = np.bincount(where, weights=rows["size"].astype(np.float64), minlength=len(kinds))
        counts = np.bincount(where, minlength=len(kinds))
        for (magic, codec, is_control), n, size in zip(kinds.tolist(), counts.tolist(), sizes.tolist()):
            self._add((magic, codec, bool(is_control)), n, int(size))

    def _add(self, key: tuple, n: int, size: int) -> None:
        entries, total = self.counts.get(key, (0, 0))
        self.counts[key] = (entries + n, total + size)

    def merge(self, other: "Census") -> "Census":
        for key, (n, size) in other.counts.items():
            self._add(key, n, size)
        return self

    def lines(self, verb: Callable[[int, int, bool], str]) -> list[str]:
        """One line per kind of entry: 'v1 gzip: 38 entries, 70693 bytes -> <verb(...)>'."""
        codecs = registry.get().compressions
        out = []
        for (magic, codec, control), (n, size) in sorted(self.counts.items()):
            name = codecs[codec].name if codec in codecs else f"codec {codec}"
            kind = f"v{magic} {name}{' control' if control else ''}"
            out.append(f"{kind}: {n} entries, {size} bytes -> {verb(magic, codec, control)}")
        return out or ["no entries"]


@dataclass(frozen=True)
class CensusTask:
    partition: int
    sources: tuple[SourceSegment, ...]

    def run(self) -> TaskResult:
        census = Census()
        result = TaskResult(self.partition, detail=census)
        for src in self.sources:
            scanner = segment.FrameScanner(src.read(), src.file)
            for rows in scanner.chunks():
                census.add_rows(rows)
            src.check_tail(scanner.tail, result.notes)
        return result


@dataclass(frozen=True)
class RewriteSegmentsTask:
    """Consecutive source segments of a partition, each rewritten into one or more output segments,
    the first at its base offset (later ones only where Kafka's roll rules demand,
    kfmt.write.writer.SegmentRunWriter)."""

    partition: int
    sources: tuple[SourceSegment, ...]
    target: StagingTarget
    rel: str
    policy: RollPolicy
    rewriter: Rewriter
    floor: int | None = None  # batches ending below it (below the log start offset) are left out

    def run(self) -> TaskResult:
        files = self.target.files()
        result = TaskResult(self.partition, before=new_tally(), after=new_tally())
        for src in self.sources:
            result.segments += _SegmentRewrite(self, src, files, result).run()
        result.files = list(files.records.values())
        return result


class _SegmentRewrite:
    """One source segment through a Rewriter, in file order, a chunk of frames at a time: runs of
    uncompressed legacy messages through the rewriter's RunUpgrader (if it has one), uncompressed
    v2 data batches it copies as runs (kfmt.format.batch_runs), every other entry decoded and rewritten
    one by one. Both tallies come from what is read and what is written: "after" from the output's
    own bytes, walked (or decoded) again, so it checks the encoder's work, not its intentions."""

    def __init__(self, task: RewriteSegmentsTask, src: SourceSegment, files, result: TaskResult):
        self.src, self.rewriter, self.floor = src, task.rewriter, task.floor
        self.notes = result.notes
        self.before, self.after = result.before, result.after
        self.data = src.read()
        self.writer = SegmentRunWriter(files, task.rel, task.policy, start_offset=src.base_offset)
        self.runs = self.rewriter.run_upgrader(self.data, src.file)

    def run(self) -> list[WrittenSegment]:
        self.before.add_segment(len(self.data))
        try:
            scanner = segment.FrameScanner(self.data, self.src.file)
            for rows in scanner.chunks():
                if self.floor is not None:
                    rows = rows[rows["last_offset"] >= self.floor]  # a prefix: offsets increase
                    if not len(rows):
                        continue
                self._chunk(rows)
            if self.runs is not None:
                self._converted(self.runs.finish(self.writer.position), self.runs.waiting)
            self.src.check_tail(scanner.tail, self.notes)
            return self.writer.close(empty_mtime_ms=self.src.mtime_ms)
        except BaseException:
            self.writer.abort()
            raise

    def _chunk(self, rows: np.ndarray) -> None:
        spans = legacy_runs.message_runs(rows) if self.runs is not None else []
        if self.runs is not None and (not spans or spans[0][0] > 0):
            self._converted(self.runs.finish(self.writer.position),  # the last chunk's run ended
                            self.runs.waiting)
        done = 0
        for start, stop in spans + [(len(rows), len(rows))]:
            if start > done:
                self._entries(rows[done:start])
            if stop > start:
                waiting, run = self.runs.waiting, rows[start:stop]
                source = run if waiting is None else np.concatenate([waiting, run])
                self._converted(self.runs.pieces(run, more=stop == len(rows),
                                                 out_position=self.writer.position), source)
            done = stop

    def _entries(self, rows: np.ndarray) -> None:
        """Entries other than runs of legacy messages: uncompressed v2 data batches copied as runs
        where the rewriter copies them, everything else one by one."""
        if self.rewriter.copies_uncompressed_v2:
            items = batch_runs.checked(self.data, rows, self.src.file)
        else:
            items = (segment.decode(self.data, header_of(row), self.src.file) for row in rows.tolist())
        for item in items:
            if isinstance(item, CheckedRun):
                first, last = item.span()
                self._append_frames(item.rows, self.data[first:last], item.rows)
                batch_runs.add_to_tally(self.before, item)
                batch_runs.add_to_tally(self.after, item)
            else:
                self._one(item)

    def _one(self, batch: Batch) -> None:
        header = batch.header
        self.before.add_batch(batch)
        for out in self.rewriter.outputs(header, segment.entry_bytes(self.data, header), batch):
            try:
                written_header, written = _decoded_output(out)
                self.writer.append(written_header, out.entry, facts=control_facts(written),
                                   mtime_ms=self.src.mtime_ms)
            except DataError as err:
                raise err.located(file=self.src.file, base_position=out.source.position,
                                  offset=out.source.last_offset)
            self.after.add_batch(written)

    def _converted(self, pieces, source_rows: np.ndarray | None) -> None:
        """Write the v2 batches of legacy messages (legacy_runs.UpgradedRun) and tally them: the
        messages read (the piece's digest is of the records converted) and the batches written,
        walked again from their bytes."""
        for piece in pieces:
            self._append_frames(piece.rows, piece.entries, source_rows)
            s = self.before.summary
            s.batches += piece.digest.records  # one message, one record
            s.records += piece.digest.records
            if s.first_offset is None:
                s.first_offset = int(piece.rows["base_offset"][0])
            s.next_offset = int(piece.rows["last_offset"][-1]) + 1
            self.before.digest.merge(piece.digest)
            batch_runs.add_to_tally(self.after, _walked(piece))

    def _append_frames(self, rows: np.ndarray, entries, source_rows: np.ndarray | None) -> None:
        try:
            self.writer.append_frames(rows, entries, mtime_ms=self.src.mtime_ms)
        except DataError as err:
            at = source_rows if source_rows is not None and len(source_rows) else rows
            named = at[at["last_offset"] == err.offset] if err.offset is not None else at[:0]
            row = named[0] if len(named) else at[0]
            raise err.located(file=self.src.file, base_position=int(row["position"]),
                              offset=int(row["last_offset"]))


def _walked(piece: UpgradedRun) -> CheckedRun:
    """The batches a conversion wrote, as a reader sees them: checked and digested again from their
    bytes (kfmt.format.batch_runs), not taken from the converter's own account."""
    at, digest, first = batch_runs.digest_run(piece.entries, piece.rows, 0, len(piece.rows),
                                              base=int(piece.rows["position"][0]))
    if at < len(piece.rows):
        row = piece.rows[at]
        segment.decode(piece.entries, header_of(row.item()), "the converted batches",
                       base=int(piece.rows["position"][0]))  # raises what is wrong with it
        raise KfmtError(f"the converted batch at offset {int(row['base_offset'])} does not match "
                        f"the frame the converter gave for it")
    return CheckedRun(piece.rows, digest, first)


def _decoded_output(out: Output) -> tuple[BatchHeader, Batch]:
    """The header to write an output under, and its records as a reader will see them: a copy is the
    input batch; new bytes are decoded again (strictly) through their format plugin, so the "after"
    digest checks the encoder's work, not its intentions."""
    if out.copied is not None:
        return out.source, out.copied
    entry = memoryview(out.entry)
    fmt = registry.get().format_for(entry[16])
    header = fmt.read_header(entry, 0)
    return header, fmt.decode(entry, header)


class RewriteTransform(Transform):
    """A transform whose tasks rewrite one source segment each with a Rewriter; the output keeps the
    source's segments (base offsets, empty segments, modification times). `options` and `notes` go
    to the report."""

    def __init__(self, command: str, rewriter: Rewriter, companions: CompanionOptions = CompanionOptions(),
                 *, options: dict | None = None, notes: Sequence[str] = (), policy: RollPolicy | None = None):
        super().__init__(companions)
        self.command, self.description = command, f"{command}: segments"
        self.rewriter = rewriter
        self._options, self._notes = dict(options or {}), list(notes)
        self._policy = policy

    def notes(self) -> list[str]:
        return self._notes

    def policy(self) -> RollPolicy:
        # Source segments are kept; the roll rules only split one whose output Kafka could not keep
        # in one segment: positions past 2^31-1 bytes, a full index, int32 relative offsets.
        return self._policy or RollPolicy(segment_bytes=INT32_MAX,
                                          index_interval_bytes=self.companions.index_interval_bytes)

    def options(self) -> dict:
        p = self.policy()
        return {**self._options, **super().options(), "segment_bytes": p.segment_bytes}

    def preparation_tasks(self, work, dry_run):
        return [CensusTask(w.index, g) for w in work for g in task_groups(w.sources)] if dry_run else []

    def prepared(self, work, results):
        for w in work:
            w.detail = Census()
        for r in results:
            work[r.partition].detail.merge(r.detail)

    def write_tasks(self, work, target):
        policy = self.policy()
        return [RewriteSegmentsTask(w.index, g, target, w.plan.rel, policy, self.rewriter, w.floor)
                for w in work for g in task_groups(w.sources)]

    def describe(self, work: PartitionWork) -> list[str]:
        return self.rewriter.describe(work.detail) if work.detail is not None else []
