"""reindex: copy partitions with every companion file regenerated as Kafka 3.6's log recovery builds
it (kfmt.partition.companions), the `.log` segments byte for byte with their modification times.

SRC is a partition directory or a log directory; it is only read. DST gets the same layout (the
partition itself, or one directory per partition) through kfmt.storage.staging: it is published whole or not
at all. Every entry is checked on the way as Kafka's log recovery checks it (framing, offsets, the CRC
over its stored bytes: kfmt.format.copied_runs), so bad data stops the run (DataError, exit 65) before
anything is published; the report (kfmt.transforms.report) records counts and the entries digest of
every partition. With `deep`, every batch is decoded and checked (record structure too, compressed
ones inflated) and the report holds the content digest of the records instead.

What is read and written, and what becomes of the log directory's own files, is planned by
kfmt.transforms.directory_plan. Partitions are reindexed in parallel, one task per partition (a
partition's companion files carry producer state and leader epochs from one segment to the next), on
the engine `--master` chooses (kfmt.pipelines.engine, kfmt.pipelines.runner): tasks write through the
staged output's picklable target and hand back the partition's summary and the records of the files
they wrote.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from kfmt.errors import DataError, UsageError
from kfmt.format import batch_runs, copied_runs, segment
from kfmt.format.batch_runs import CheckedRun
from kfmt.format.model import Batch
from kfmt.partition.companions import CompanionBuilder, CompanionOptions, existing_leader_epochs
from kfmt.partition.layout import segment_file_name
from kfmt.partition.log_start import (
    below_log_start,
    first_kept_position,
    kept_segments,
    left_out_entries,
    segment_start_note,
)
from kfmt.partition.summary import PartitionCounts, PartitionTally
from kfmt.pipelines.runner import run_tasks
from kfmt.storage.staging import StagedOutput, StagingTarget
from kfmt.storage.store import open_storage
from kfmt.transforms.directory_plan import DirectoryPlan, PartitionPlan, plan_directory, write_log_dir_files
from kfmt.transforms.job_options import JobOptions
from kfmt.transforms.report import REPORT_NAME, make_report, report_bytes
from kfmt.transforms.run import plan_engine


def reindex_partition(plan: PartitionPlan, out: StagedOutput, options: CompanionOptions,
                      on_progress: Callable[[int], None] | None = None,
                      notes: list[str] | None = None, deep: bool = False) -> PartitionCounts:
    """Copy one partition's segments into `out` and write its regenerated companion files. A bad
    tail of the last segment is left out of the copy, as Kafka's log recovery truncates it, and said
    in `notes` (a warning when None; kfmt.partition.segment); anywhere else it is an error. Entries
    are checked as log recovery checks them, or with `deep` decoded (the module doc)."""
    part, storage = plan.part, plan.part.storage
    builder = CompanionBuilder(**options.builder_options(), log_start_offset=plan.log_start_offset,
                               leader_epochs=existing_leader_epochs(part))
    summary = PartitionCounts(storage.url_of(part.path), part.topic, part.partition)
    tally = PartitionTally(summary) if deep else PartitionTally.of_entries(summary)
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
        tail = (_check_segment if deep else _check_copied)(data, file, builder, tally)
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


def _check_copied(data, file: str, builder: CompanionBuilder, tally: PartitionTally) -> segment.Tail:
    """_check_segment's job with the check of a copy (kfmt.format.copied_runs): every entry whole, its
    CRC holding, its offsets in order (the companion builder), digested by its bytes; control batches
    decoded for their markers."""
    scanner = segment.FrameScanner(data, file)
    for rows in scanner.chunks():
        for run in copied_runs.copied(data, rows, file):
            try:
                if run.batch is not None and run.batch.header.is_control:
                    builder.add_decoded_batch(run.batch)
                else:
                    builder.add_frames(run.rows)
            except DataError as err:
                raise _located(err, file, CheckedRun(run.rows, None, None))
            tally.add(run)
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


@dataclass(frozen=True)
class ReindexTask:
    """One partition's reindex, as a task of kfmt.pipelines.runner (picklable)."""

    plan: PartitionPlan
    target: StagingTarget
    options: CompanionOptions
    deep: bool = False

    def run(self) -> tuple[PartitionCounts, list, list[str]]:
        files, notes = self.target.files(), []
        summary = reindex_partition(self.plan, files, self.options, notes=notes, deep=self.deep)
        return summary, list(files.records.values()), notes


def run_reindex_task(task: ReindexTask):
    return task.run()


def reindex(src: str, dst: str, job: JobOptions = JobOptions(), *, options: CompanionOptions | None = None,
            on_progress: Callable[[int], None] | None = None,
            deep: bool = False) -> tuple[DirectoryPlan, dict | None]:
    """Reindex SRC into DST as `job` says (kfmt.transforms.job_options). Returns the plan and the
    report (None for a dry run, which writes nothing). `on_progress(bytes)` is called as segments are
    done when the work runs in this process. `job.include_deleted`: see plan_directory; `deep`: every
    batch decoded and the records' content digest reported (the module doc)."""
    options = (options or CompanionOptions()).with_clock()
    src_storage, src_path = open_storage(src, job.src_options)
    dst_storage, dst_path = open_storage(dst, job.dst_storage_options)
    plan = plan_directory(src_storage, src_path, dst_storage, dst_path, job.topic, job.partition,
                          job.include_deleted, job.target)
    for p in plan.partitions:
        if p.segment_start is not None:
            p.below = below_log_start(p.part, p.segment_start)
    if job.dry_run:
        if dst_storage.exists(dst_path) and (not dst_storage.isdir(dst_path)
                                             or dst_storage.listdir(dst_path)):
            raise UsageError(f"{plan.destination}: the destination exists and is not empty")
        plan.warn_strays()
        return plan, None
    engine = plan_engine(job.master, sum(s.size for p in plan.partitions for s in p.part.segments),
                         src_storage, dst_storage, lambda: not deep and copied_runs.in_kernels())
    inputs, outputs, tails = [], [], []
    with StagedOutput(dst_storage, dst_path) as out:
        if engine.engine == "inprocess" and on_progress is not None:
            summaries = [reindex_partition(p, out, options, on_progress, tails, deep) for p in plan.partitions]
        else:
            target = out.target()
            results = run_tasks(run_reindex_task, [ReindexTask(p, target, options, deep) for p in plan.partitions],
                                master=engine, description="reindex", progress=job.progress)
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
             "producer_expiration_ms": options.producer_expiration_ms, **job.selection(),
             "include_deleted": job.include_deleted, "deep": deep},
            inputs, outputs, out.files, _notes(plan, deep) + tails)
        report["below_log_start"] = left_out_entries((p.part.label, p.below) for p in plan.partitions)
        report["engine"] = engine.to_json()
        out.write(REPORT_NAME, report_bytes(report))
    plan.warn_strays()
    return plan, report


COPY_CHECK_NOTE = ("every entry checked as Kafka's log recovery checks it (whole, offsets in order, its CRC "
                   "over the stored bytes; compressed batches not inflated) and the copy proven by the "
                   "entries digest of the bytes read; --deep decodes every record and reports the content digest")
DEEP_CHECK_NOTE = "every batch decoded and checked, records included, and the content digest of the records reported"


def _notes(plan: DirectoryPlan, deep: bool = False) -> list[str]:
    notes = [".log segments copied byte for byte with their modification times; .index, .timeindex, "
             ".txnindex, producer .snapshot files and leader-epoch-checkpoint regenerated as Kafka "
             "3.6's log recovery builds them", DEEP_CHECK_NOTE if deep else COPY_CHECK_NOTE]
    notes += plan.identity_notes()
    for p in plan.partitions:
        notes += [f"{p.part.name}: skipped {name}" for name in p.skipped]
        if p.below is not None:
            notes.append(p.below.note(p.part.name, False))
        if p.segment_start is not None:
            notes.append(segment_start_note(p.part.name, p.segment_start))
    notes += [f"log directory: {f.action} {f.name} ({f.reason})" for f in plan.log_dir_files]
    return notes
