"""The pieces of `kfmt export` (kfmt.transforms.export): the tasks that read segment ranges into part
files and check them, and the job that runs them (run_export_job) and adds up what each partition's
tasks read and wrote (the options and the plan: kfmt.transforms.export_plan). A whole export (kfmt.transforms.export), an appending one
(kfmt.transforms.export_append) and a table export (kfmt.transforms.export_table) are built on them.
"""
from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from kfmt.errors import KfmtError, KfmtWarning
from kfmt.partition.layout import PartitionDir
from kfmt.partition.live import SegmentGone, read_whole, stopped_warning
from kfmt.partition.reader import PartitionReader
from kfmt.partition.summary import PartitionCounts
from kfmt.partition.transactions import TransactionOutcomes, partition_outcomes
from kfmt.pipelines.engine import Engine
from kfmt.pipelines.runner import run_tasks
from kfmt.rows.columns import record_dates
from kfmt.rows.exporters import exporters
from kfmt.rows.part_files import PartFiles
from kfmt.rows.typed import DEAD_LETTER_SCHEMA, DecodeTally, TopicTyping
from kfmt.rows.ranges import RangeTally, SegmentRange, partition_identity, read_range
from kfmt.storage.manifest import FileRecord
from kfmt.storage.staging import StagingTarget
from kfmt.storage.store import Storage, StorageSpec
from kfmt.transforms.export_checks import HandedRows, check_file, check_same_content, tally_rows
from kfmt.transforms.export_decode import DEAD_LETTER_DIR, decode_report, merge_decode  # noqa: F401
from kfmt.transforms.export_plan import (  # noqa: F401 (the names the export modules take from here)
    PARTITION_BY,
    REPORT_NAME,
    SUCCESS_NAME,
    ExportOptions,
    ExportPartitionPlan,
    ExportPlan,
    hive_value,
    plan_export,
)
from kfmt.transforms.export_split import SchemaIdTables, splits_values
from kfmt.transforms.run import plan_engine

# --- stage 1: transaction outcomes per partition ---------------------------------------------------

@dataclass(frozen=True)
class PartitionRef:
    """A partition directory as the driver listed it, without its storage handle (picklable)."""

    spec: StorageSpec
    part: PartitionDir  # with storage=None

    @classmethod
    def of(cls, part: PartitionDir) -> "PartitionRef":
        return cls(part.storage.spec, dataclasses.replace(part, storage=None))

    def open(self) -> PartitionDir:
        storage, _ = self.spec.open()
        return dataclasses.replace(self.part, storage=storage)


def transactions_of(ref: PartitionRef) -> TransactionOutcomes:
    """The partition's transaction outcomes; on a running broker's directory, read again from a new
    listing if a segment goes meanwhile (kfmt.partition.live): the ranges read later only need the
    outcomes of batches that are still there."""
    return read_whole(ref.open(), lambda part: partition_outcomes(PartitionReader(part, recover_tail=True)))


# --- stage 2: tasks of segment ranges -------------------------------------------------------------

@dataclass(frozen=True)
class ExportTask:
    ranges: tuple[SegmentRange, ...]  # consecutive ranges of one partition
    rel: str  # the partition's directory in DST
    options: ExportOptions
    outcomes: TransactionOutcomes | None
    target: StagingTarget
    first_offset: int | None = None  # an appending run: where it resumed the partition (file names)
    typing: TopicTyping | None = None  # keys and values decoded (kfmt.rows.typed)


@dataclass
class ExportTaskResult:
    read: RangeTally  # what was read and selected
    written: RangeTally  # what the rows handed to the writers hold (each file checked to hold them)
    files: list[FileRecord] = field(default_factory=list)
    decode: DecodeTally = field(default_factory=DecodeTally)  # keys and values that did not decode


def export_task(task: ExportTask) -> ExportTaskResult:
    """Export the ranges of a task one after the other into its part files, check the files, and
    check that the rows handed to the exporter hold what was read (docs/export.md, "How an export
    checks itself")."""
    options, typing = task.options, task.typing
    fmt = exporters()[options.format]
    schema = options.file_schema if typing is None else typing.schema(options.file_schema)
    files = task.target.files()
    first = task.ranges[0]
    handed = HandedRows(typed=typing is not None)
    # a topic whose values are decoded one member per schema id: a table per schema id (export_split)
    files_of = SchemaIdTables if splits_values(typing) else PartFiles
    out = files_of(fmt, files, schema, first.segment_base, first.index, options.target_file_bytes,
                   first_offset=task.first_offset, observe=handed.add, settings=options.settings)
    dead = DeadLetters(fmt, files, task) if typing is not None else None
    decoded = RangeTally()  # typed: the stored records handed to the decoders
    read = RangeTally()
    try:
        for rng in task.ranges:
            tally = RangeTally()
            try:
                for rows in read_range(rng, options.selection, task.outcomes, tally, gathered=False):
                    if typing is not None:
                        tally_rows(rows, decoded)
                        rows = dead.split(typing, rows)
                    for directory, chunk in _by_directory(rows, task.rel, options.by_date):
                        out.write(directory, chunk.select(schema.names))
            except SegmentGone as err:  # raised before any row of the range: the task ends here
                read.gone = str(err)
                break
            read.merge(tally)
        records = out.close() + (dead.close() if dead is not None else [])
    except BaseException:
        out.abort()
        if dead is not None:
            dead.out.abort()
        raise
    for record in records:
        if dead is not None and record.rel.startswith(DEAD_LETTER_DIR + "/"):
            check_file(fmt, files, record, DEAD_LETTER_SCHEMA, dead.handed.files[record.rel],
                        options.settings)
        else:
            check_file(fmt, files, record, out.schema_of(record.rel) if files_of is SchemaIdTables
                        else schema, handed.files[record.rel], options.settings)
    written = handed.total()
    if typing is not None:  # the typed rows hold the stored records the decoders were handed
        written.digest = decoded.digest
    check_same_content(task.ranges, read, written)
    return ExportTaskResult(read, written, records, dead.tally if dead is not None else DecodeTally())




class DeadLetters:
    """The dead-letter part files of a task: `_errors/<the partition's directory>/`, the raw records
    that did not decode with the reason (kfmt.rows.typed.DEAD_LETTER_SCHEMA)."""

    def __init__(self, fmt, files, task: ExportTask):
        first = task.ranges[0]
        self.rel = f"{DEAD_LETTER_DIR}/{task.rel}"
        self.handed = HandedRows(typed=True)
        self.out = PartFiles(fmt, files, DEAD_LETTER_SCHEMA, first.segment_base, first.index,
                             task.options.target_file_bytes, first_offset=task.first_offset,
                             observe=self.handed.add, settings=task.options.settings)
        self.tally = DecodeTally()

    def split(self, typing: TopicTyping, rows: pa.RecordBatch) -> pa.RecordBatch:
        typed, dead = typing.apply(rows, self.tally)
        if dead is not None:
            self.tally.dead_letters += dead.num_rows
            self.out.write(self.rel, dead)
        return typed

    def close(self) -> list[FileRecord]:
        return self.out.close()


def _by_directory(rows: pa.RecordBatch, rel: str, by_date: bool):
    """(directory, rows) pairs: the partition's directory, or one per date of the rows."""
    if not by_date:
        yield rel, rows
        return
    days = record_dates(rows)
    for day in np.unique(days):
        yield f"{rel}/date={np.datetime64(int(day), 'D')}", rows.filter(pa.array(days == day))


# --- the job ---------------------------------------------------------------------------------------

@dataclass
class ExportInput(PartitionCounts):
    left_out_records: dict = field(default_factory=dict)  # reason -> records not exported


@dataclass
class ExportOutput(PartitionCounts):
    files: int = 0
    file_bytes: int = 0


@dataclass
class ExportJob:
    """What the tasks of a plan wrote, per partition of the plan."""

    inputs: list[ExportInput]
    outputs: list[ExportOutput]
    files: list[list[FileRecord]]
    next_offsets: dict  # (topic, partition) -> high-water mark after the run
    engine: Engine | None = None  # what ran the tasks (kfmt.pipelines.engine)
    tails: list[str] = field(default_factory=list)  # crash-cut tails left out, one note each
    decode: dict = field(default_factory=dict)  # (topic, partition) -> DecodeTally of its tasks


def run_export_job(plan: ExportPlan, target: StagingTarget, dst_storage: Storage, dst_path: str,
                   master, progress) -> ExportJob:
    """Run the tasks of `plan` writing through `target`; check each partition's digests."""
    options = plan.options
    sources = [p.part.storage for p in plan.partitions[:1]] or [dst_storage]
    engine = plan_engine(master, sum(s.size for p in plan.partitions for s in p.part.segments),
                         sources[0], dst_storage)
    outcomes = _transaction_outcomes(plan, engine, progress)
    tasks = [ExportTask(unit, p.rel, options, outcomes[i], target, p.from_offset, plan.typing.get(p.part.topic))
             for i, p in enumerate(plan.partitions) for unit in p.units]
    results = iter(run_tasks(export_task, tasks, master=engine, description="export",
                             progress=progress))
    job = ExportJob([], [], [], {}, engine)
    for i, p in enumerate(plan.partitions):
        read, written, files = RangeTally(), RangeTally(), []
        for _ in p.units:
            result = next(results)
            if read.gone is not None:  # after a segment that went: not contiguous, not published
                _discard(target, result.files)
                continue
            read.merge(result.read)
            written.merge(result.written)
            files += result.files
            if p.part.topic in plan.typing:
                job.decode[partition_identity(p.part)] = merge_decode(
                    job.decode.get(partition_identity(p.part)), result.decode)
        if read.gone is not None:
            message = stopped_warning(p.part.label, read.gone, read.next_offset)
            warnings.warn(message, KfmtWarning, stacklevel=2)
            job.tails.append(message)
        job.files.append(files)
        for message in read.tails:  # said here too: a Spark executor's warnings go nowhere
            warnings.warn(message, KfmtWarning, stacklevel=2)
        job.tails += read.tails
        job.inputs.append(_input_summary(p, read))
        job.outputs.append(_output_summary(p, written, files, dst_storage, dst_path))
        if job.inputs[-1].content_digest != job.outputs[-1].content_digest:
            raise KfmtError(f"{p.part.name}: the content digest of the exported files "
                            f"({job.outputs[-1].content_digest}) differs from that of the records "
                            f"read ({job.inputs[-1].content_digest}); nothing was published")
        mark = _high_water_mark(p, read, outcomes[i])
        if mark is not None:  # a partition without segments has none: a later run starts at its log start
            job.next_offsets[partition_identity(p.part)] = mark
    return job


def _discard(target: StagingTarget, records: list[FileRecord]) -> None:
    """Remove part files a task staged that the run does not publish."""
    files = target.files()
    for record in records:
        files.storage.remove(files.path(record.rel))


def _high_water_mark(p: ExportPartitionPlan, read: RangeTally, outcomes: TransactionOutcomes | None
                     ) -> int | None:
    """The next offset to export: after the last batch read, but no further than the last stable
    offset where read_committed left an open transaction's records out (they come once it ends)."""
    mark = read.next_offset if read.next_offset is not None else p.from_offset
    if mark is None:  # nothing read at all: the log start, where a later run begins anyway
        if not p.part.segments:
            return None
        mark = p.part.segments[0].base_offset
    if outcomes is not None and outcomes.last_stable_offset is not None:
        mark = min(mark, outcomes.last_stable_offset)
    if p.from_offset is not None:
        mark = max(mark, p.from_offset)
    return mark


def _transaction_outcomes(plan: ExportPlan, master, progress) -> list[TransactionOutcomes | None]:
    if plan.options.isolation != "read_committed":
        return [None] * len(plan.partitions)
    refs = [PartitionRef.of(p.part) for p in plan.partitions]
    return run_tasks(transactions_of, refs, master=master, description="transactions", progress=progress)


def _input_summary(p: ExportPartitionPlan, read: RangeTally) -> ExportInput:
    part = p.part
    return ExportInput(part.storage.url_of(part.path), part.topic, part.partition,
                       segments=len(part.segments), batches=read.batches, records=read.records,
                       control_records=read.control_seen,
                       log_bytes=sum(s.size for s in part.segments), first_offset=read.first_offset,
                       next_offset=read.next_offset, content_digest=read.digest.hexdigest(),
                       left_out_records=dict(sorted(read.left_out.items())))


def _output_summary(p: ExportPartitionPlan, written: RangeTally, files: list[FileRecord], storage: Storage,
                    root: str) -> ExportOutput:
    return ExportOutput(storage.url_of(storage.join(root, *p.rel.split("/"))), p.part.topic,
                        p.part.partition, batches=written.batches, records=written.records,
                        control_records=written.control_records, first_offset=written.first_offset,
                        content_digest=written.digest.hexdigest(), files=len(files),
                        file_bytes=sum(f.size for f in files))


def _notes(plan: ExportPlan, inputs: list[ExportInput]) -> list[str]:
    o = plan.options
    notes = [f"{o.format} files with Spark's Kafka source columns and kfmt's on-disk columns "
             f"(docs/export.md), {','.join(o.partition_by)} only in the directory names; the rows "
             f"handed to the writer were checked against the records read (count and content "
             f"digest), and every file's row count against them",
             "outputs: batches = Kafka batches with records in the files; control_records = control "
             "records written"]
    if o.by_date:
        notes.append("date = the UTC date of the exported timestamp; records without one (v0, -1 ms) "
                     "under date=1969-12-31, as their timestamp column says")
    for p in inputs:
        if p.left_out_records:
            left = ", ".join(f"{n} {reason.replace('_', ' ')}" for reason, n in p.left_out_records.items())
            notes.append(f"{p.topic}-{p.partition}: records left out: {left}")
    return notes
