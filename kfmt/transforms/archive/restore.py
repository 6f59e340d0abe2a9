"""kfmt restore URL DST: a published archive (kfmt.transforms.archive.archive_format) back to a broker-ready partition or log
directory, in parallel (one task per partition: companion files are built in log order).

Each partition goes through kfmt.transforms.reindex's machinery, reading the archive through an ArchiveView:
every file downloaded is checked against the manifest's size and SHA-256 (a damaged object is bad
data, exit 65), `.log` segments are written byte for byte with the modification times the manifest
keeps, every entry is checked as the archive checked it (as Kafka's recovery does, or with `deep`
and for archives made with --deep, every batch decoded), and `.index`, `.timeindex`, `.txnindex`,
producer snapshots and `leader-epoch-checkpoint` are regenerated as Kafka's recovery builds them.
The counts and digest of each restored partition must equal those the archive recorded when it read
the source; any difference fails the run. DST is published whole or not at all (kfmt.storage.staging).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace

from kfmt.errors import DataError, UsageError
from kfmt.format import copied_runs
from kfmt.format.digest import ContentDigest, EntriesDigest
from kfmt.partition.companions import CompanionOptions
from kfmt.partition.layout import load_partition
from kfmt.partition.log_start import (
    BelowLogStart,
    below_log_start,
    left_out_entries,
    segment_start,
    segment_start_note,
)
from kfmt.partition.summary import (
    ENTRIES_CHECK,
    RECORDS_CHECK,
    PartitionCounts,
    PartitionTally,
    merge_tallies,
)
from kfmt.partition.topic_identity import TopicIdentity
from kfmt.pipelines.runner import run_tasks
from kfmt.storage.manifest import FileRecord, Manifest
from kfmt.storage.staging import StagedOutput, StagingTarget
from kfmt.storage.store import StorageSpec, open_storage
from kfmt.transforms.archive.view import ArchiveView, PublishedArchive, open_archive
from kfmt.transforms.directory_plan import DirectoryPlan, PartitionPlan, plan_directory, write_log_dir_files
from kfmt.transforms.reindex import reindex_partition
from kfmt.transforms.job_options import JobOptions
from kfmt.transforms.report import REPORT_NAME, make_report, report_bytes
from kfmt.transforms.run import plan_engine

# what a restored partition must share with the archive's record of its source; with the same check,
# also what that check counts (kfmt.partition.summary)
COMPARED = ("segments", "log_bytes", "batches", "control_records", "next_offset")
COMPARED_BY_CHECK = ("records", "first_offset", "uncounted_wrappers", "digest")


@dataclass(frozen=True)
class RestoreTask:
    archive: StorageSpec
    manifest: Manifest  # the generation's manifest, cut down to this partition's files
    objects: dict[str, str]  # file -> the object holding it
    part_path: str  # the partition directory's storage path in the archive
    rel: str  # its directory inside DST
    log_start_offset: int
    skipped: tuple[str, ...]
    options: CompanionOptions
    target: StagingTarget
    include_deleted: bool = False  # a partition-directory DST keeps what lies below the log start
    identity: TopicIdentity | None = None  # the partition.metadata to write (kfmt.partition.topic_identity)
    deep: bool = False


@dataclass(frozen=True)
class RestoreResult:
    summary: PartitionCounts
    records: list[FileRecord]
    segment_start: int | None = None  # a partition-directory DST: its first segment's new base offset
    below: BelowLogStart | None = None  # what that new start leaves out
    left_out: PartitionCounts | None = None  # the same, counted as the archive counted its segments


def restore_partition(task: RestoreTask) -> RestoreResult:
    """One partition restored. Into a partition-directory DST (no log directory, no
    log-start-offset-checkpoint) the archive's log start offset travels as the other transforms
    carry it: the first segment starts at the batch holding it and is named after it
    (kfmt.partition.log_start.segment_start); what that leaves out is counted too, so that the
    restore's check still adds up to what the archive recorded."""
    storage, _path = task.archive.open()
    view = ArchiveView(storage, task.manifest, [task.rel], task.objects)
    part = load_partition(view, task.part_path)
    files = task.target.files()
    start = None if task.include_deleted else segment_start(part, task.log_start_offset, bool(task.rel))
    below = left_out = None
    if start is not None:  # counted as the restored segments are: by entries, or with deep records
        summary = PartitionCounts(view.url_of(part.path), part.topic, part.partition)
        left_out = PartitionTally(summary) if task.deep else PartitionTally.of_entries(summary)
        below = below_log_start(part, start, left_out)
    summary = reindex_partition(PartitionPlan(part, task.rel, task.log_start_offset, list(task.skipped), start,
                                              identity=task.identity), files, task.options, deep=task.deep)
    return RestoreResult(summary, list(files.records.values()), start, below,
                         None if left_out is None else left_out.finish())


@dataclass
class RestoreResultSet:
    plan: DirectoryPlan
    archive: PublishedArchive
    report: dict | None = None  # None for a dry run

    def lines(self) -> list[str]:
        """The plan as text (--dry-run)."""
        p, section = self.plan, self.archive.section
        created = time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                time.gmtime((self.archive.manifest.created_ms or 0) / 1000))
        generation = self.archive.generation.number
        out = [f"restore {p.source} -> {p.destination} (generation {generation} of {self.archive.latest} "
               f"of an archive of {section.get('source')}, published {created}; {len(p.partitions)} "
               f"partition(s))"]
        for pp in p.partitions:
            log_bytes = sum(s.size for s in pp.part.segments)
            out.append(f"  {pp.part.name} -> {pp.rel or '.'}/: {len(pp.part.segments)} segment(s), "
                       f"{log_bytes} bytes of .log downloaded and checked (SHA-256); .index, "
                       f".timeindex, .txnindex, .snapshot and leader-epoch-checkpoint regenerated")
        out += [f"  {f.action} {f.name}: {f.reason}" for f in p.log_dir_files]
        out += [f"  ignore {rel}: not listed in the archive's manifest" for rel in self.archive.unlisted]
        return out

    def to_json(self) -> dict:
        doc = self.plan.to_json()
        doc.update({"command": "restore", "archive_source": self.archive.section.get("source"),
                    "generation": self.archive.generation.number, "latest_generation": self.archive.latest,
                    "archive_created_ms": self.archive.manifest.created_ms,
                    "unlisted": self.archive.unlisted})
        return doc


def restore(url: str, dst: str, job: JobOptions = JobOptions(), *, options: CompanionOptions | None = None,
            generation: int | None = None, deep: bool = False) -> RestoreResultSet:
    """Restore a generation of the archive at `url` into DST as `job` says (kfmt.transforms.job_options;
    its src_options are the archive's). `job.include_deleted`: a
    partition-directory DST keeps the archived records below the log start offset (restore_partition);
    `deep`: every record decoded, whatever check the archive made."""
    started = time.monotonic()
    options = (options or CompanionOptions()).with_clock()
    storage, path = open_storage(url, job.src_options)
    dst_storage, dst_path = open_storage(dst, job.dst_storage_options)
    include_deleted, master = job.include_deleted, job.master
    archive = open_archive(storage, path, generation)
    view = archive.view(storage)
    plan = plan_directory(view, path, dst_storage, dst_path, job.topic, job.partition, target=job.target)
    result = RestoreResultSet(plan, archive)
    if job.dry_run:
        if dst_storage.exists(dst_path) and (not dst_storage.isdir(dst_path)
                                             or dst_storage.listdir(dst_path)):
            raise UsageError(f"{plan.destination}: the destination exists and is not empty")
        plan.warn_strays()
        return result
    archived = {p.dir: p for p in archive.partitions}
    with StagedOutput(dst_storage, dst_path) as out:
        tasks = _restore_tasks(plan, archive, archived, storage, options, out.target(), include_deleted, deep)
        engine = plan_engine(master, sum(s.size for pp in plan.partitions for s in pp.part.segments),
                             storage, dst_storage, lambda: copied_runs.in_kernels() and not any(t.deep for t in tasks))
        results = run_tasks(restore_partition, tasks, master=engine, description="restore",
                            progress=job.progress)
        inputs, outputs = _checked_summaries(plan, results, archived, view, out, dst_storage, dst_path)
        if plan.log_dir:
            write_log_dir_files(plan, view, path, out)
        report = make_report(
            "restore", plan.source, plan.destination,
            {"index_interval_bytes": options.index_interval_bytes, "now_ms": options.now_ms,
             "producer_expiration_ms": options.producer_expiration_ms, **job.selection(),
             "master": master, "include_deleted": include_deleted, "deep": deep},
            inputs, outputs, out.files, _notes(plan, archive, results, archived))
        report["below_log_start"] = left_out_entries((_label(pp, archived), r.below)
                                                     for pp, r in zip(plan.partitions, results))
        report["archive"] = {"source": archive.section.get("source"), "run": archive.manifest.run,
                             "created_ms": archive.manifest.created_ms,
                             "generation": archive.generation.number, "latest_generation": archive.latest}
        report["engine"] = engine.to_json()
        report["duration_ms"] = int((time.monotonic() - started) * 1000)
        out.write(REPORT_NAME, report_bytes(report))
    result.report = report
    plan.warn_strays()
    return result


def _restore_tasks(plan, archive, archived: dict, storage, options: CompanionOptions, target,
                   include_deleted: bool, deep: bool) -> list:
    """A RestoreTask per planned partition, with its part of the archive's manifest and objects
    (`archived`: what the archive recorded of each partition, by directory)."""
    manifest, objects = archive.manifest, archive.objects()
    tasks = []
    for pp in plan.partitions:
        part_manifest = _partition_manifest(manifest, pp.rel)
        recorded = archived.get(pp.rel)
        tasks.append(RestoreTask(
            storage.spec, part_manifest, {rel: objects[rel] for rel in part_manifest.files if rel in objects},
            pp.part.path, pp.rel,
            # the log start offset is the archive's own (the generation's section), not the source's
            recorded.log_start_offset if recorded else pp.log_start_offset,
            tuple(pp.skipped), options, target, include_deleted, pp.identity,
            # as the archive checked it, or every record where asked
            deep or (recorded is not None and recorded.check == RECORDS_CHECK)))
    return tasks


def _checked_summaries(plan, results: list, archived: dict, view, out: StagedOutput, dst_storage,
                       dst_path: str) -> tuple[list, list]:
    """(what the archive recorded of each partition, what its task wrote), each pair checked to hold
    the same records; the tasks' files adopted into the staged output."""
    inputs, outputs = [], []
    for pp, r in zip(plan.partitions, results):
        out.adopt(r.records)
        recorded = archived.get(pp.rel)
        if recorded is None:
            raise DataError(f"{pp.part.name}: a partition directory the archive section does not "
                            f"describe", file=view.url_of(pp.part.path))
        inputs.append(recorded.summary(view.url_of(pp.part.path)))
        written = dst_storage.join(dst_path, pp.rel) if pp.rel else dst_path
        outputs.append(replace(r.summary, path=dst_storage.url_of(written)))
        _check_restored(inputs[-1], outputs[-1], r.left_out)
    return inputs, outputs


def _partition_manifest(manifest: Manifest, rel: str) -> Manifest:
    """The manifest with only the files of one partition directory (what its task needs)."""
    prefix = f"{rel}/" if rel else ""
    files = {name: r for name, r in manifest.files.items()
             if name.startswith(prefix) and (rel or "/" not in name)}
    return Manifest(manifest.root, files, manifest.run, manifest.created_ms)


def _check_restored(archived: PartitionCounts, restored: PartitionCounts,
                    left_out: PartitionCounts | None = None) -> None:
    """Restore's own check: the restored partition, with what it left out below the log start
    offset (counted from the same checked objects), holds what the archive read from the source."""
    if left_out is not None:
        restored = merge_tallies([_tally(left_out), _tally(restored)], restored.path, restored.topic,
                                 restored.partition)
    names = COMPARED + (COMPARED_BY_CHECK if archived.check == restored.check and archived.digest else ())
    differ = [f"{name} {getattr(restored, name)} (archived: {getattr(archived, name)})"
              for name in names if getattr(restored, name) != getattr(archived, name)]
    if differ:
        raise DataError(f"the restored partition differs from what the archive recorded of its "
                        f"source: {'; '.join(differ)}; nothing was published", file=archived.path)


def _tally(summary: PartitionCounts) -> PartitionTally:
    if summary.check == ENTRIES_CHECK:
        return PartitionTally(summary, entries=EntriesDigest.parse(summary.entries_digest))
    return PartitionTally(summary, ContentDigest.parse(summary.content_digest))


def _label(pp: PartitionPlan, archived: dict) -> str:
    """The partition's name: the archive's record of it (a partition archive's directory is named
    after the archive)."""
    recorded = archived.get(pp.rel)
    if recorded is None or recorded.topic is None:
        return pp.part.label
    return f"{recorded.topic}-{recorded.partition}"


def _notes(plan: DirectoryPlan, archive: PublishedArchive, results: list[RestoreResult],
           archived: dict) -> list[str]:
    notes = [".log segments restored byte for byte (SHA-256 checked against the archive manifest) "
             "with their archived modification times; .index, .timeindex, .txnindex, producer "
             ".snapshot files and leader-epoch-checkpoint regenerated as Kafka 3.6's log recovery "
             "builds them"]
    notes += plan.identity_notes()
    for p, r in zip(plan.partitions, results):
        notes += [f"{p.part.name}: skipped {name}" for name in p.skipped]
        if r.segment_start is not None:
            label = _label(p, archived)
            notes += [r.below.note(label, False), segment_start_note(label, r.segment_start)]
    notes += [f"log directory: {f.action} {f.name} ({f.reason})" for f in plan.log_dir_files]
    notes += [f"ignored {rel}: not listed in the archive's manifest" for rel in archive.unlisted]
    return notes
