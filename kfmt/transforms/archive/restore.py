"""kfmt restore URL DST: a published archive (kfmt.transforms.archive.archive_format) back to a broker-ready partition or log
directory, in parallel (one task per partition: companion files are built in log order).

Each partition goes through kfmt.transforms.reindex's machinery, reading the archive through an ArchiveView:
every file downloaded is checked against the manifest's size and SHA-256 (a damaged object is bad
data, exit 65), `.log` segments are written byte for byte with the modification times the manifest
keeps, every batch is decoded and checked, and `.index`, `.timeindex`, `.txnindex`, producer
snapshots and `leader-epoch-checkpoint` are regenerated as Kafka's recovery builds them. The
content digest of each restored partition must equal the one the archive recorded when it read the
source; any difference fails the run. DST is published whole or not at all (kfmt.storage.staging).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace

from kfmt.errors import DataError, UsageError
from kfmt.partition.companions import CompanionOptions
from kfmt.partition.layout import load_partition
from kfmt.partition.summary import PartitionSummary
from kfmt.partition.topic_identity import TargetTopics, TopicIdentity
from kfmt.pipelines.runner import run_tasks
from kfmt.storage.manifest import FileRecord, Manifest
from kfmt.storage.staging import StagedOutput, StagingTarget
from kfmt.storage.store import StorageSpec, open_storage
from kfmt.transforms.archive.view import ArchiveView, PublishedArchive, open_archive
from kfmt.transforms.reindex import (
    DirectoryPlan,
    PartitionPlan,
    plan_engine,
    plan_reindex,
    reindex_partition,
    write_log_dir_files,
)
from kfmt.transforms.report import REPORT_NAME, make_report, report_bytes

# what a restored partition must share with the archive's record of its source
COMPARED = ("segments", "log_bytes", "batches", "records", "control_records", "first_offset",
            "next_offset", "content_digest")


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
    identity: TopicIdentity | None = None  # the partition.metadata to write (kfmt.partition.topic_identity)


@dataclass(frozen=True)
class RestoreResult:
    summary: PartitionSummary
    records: list[FileRecord]


def restore_partition(task: RestoreTask) -> RestoreResult:
    storage, _path = task.archive.open()
    view = ArchiveView(storage, task.manifest, [task.rel], task.objects)
    part = load_partition(view, task.part_path)
    files = task.target.files()
    summary = reindex_partition(PartitionPlan(part, task.rel, task.log_start_offset, list(task.skipped),
                                              identity=task.identity), files, task.options)
    return RestoreResult(summary, list(files.records.values()))


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


def restore(url: str, dst: str, *, src_options: dict | None = None, dst_options: dict | None = None,
            topic: str | None = None, partition: int | None = None,
            options: CompanionOptions | None = None, master: str | None = None, dry_run: bool = False,
            progress: bool = True, generation: int | None = None,
            target: TargetTopics | None = None) -> RestoreResultSet:
    started = time.monotonic()
    options = (options or CompanionOptions()).with_clock()
    storage, path = open_storage(url, src_options)
    dst_storage, dst_path = open_storage(dst, dst_options if dst_options is not None else src_options)
    archive = open_archive(storage, path, generation)
    view = archive.view(storage)
    plan = plan_reindex(view, path, dst_storage, dst_path, topic, partition, target)
    result = RestoreResultSet(plan, archive)
    if dry_run:
        if dst_storage.exists(dst_path) and (not dst_storage.isdir(dst_path)
                                             or dst_storage.listdir(dst_path)):
            raise UsageError(f"{plan.destination}: the destination exists and is not empty")
        plan.warn_strays()
        return result
    archived = {p.dir: p for p in archive.partitions}
    manifest, objects = archive.manifest, archive.objects()
    with StagedOutput(dst_storage, dst_path) as out:
        target = out.target()
        # The log start offset is the archive's own (the generation's section), not the source's
        tasks = [RestoreTask(storage.spec, (part_manifest := _partition_manifest(manifest, pp.rel)),
                             {rel: objects[rel] for rel in part_manifest.files if rel in objects},
                             pp.part.path, pp.rel,
                             archived[pp.rel].log_start_offset if pp.rel in archived else pp.log_start_offset,
                             tuple(pp.skipped), options, target, pp.identity)
                 for pp in plan.partitions]
        engine = plan_engine(master, sum(s.size for pp in plan.partitions for s in pp.part.segments),
                             storage, dst_storage)
        results = run_tasks(restore_partition, tasks, master=engine, description="restore",
                            progress=progress)
        inputs, outputs = [], []
        for pp, r in zip(plan.partitions, results):
            out.adopt(r.records)
            recorded = archived.get(pp.rel)
            if recorded is None:
                raise DataError(f"{pp.part.name}: a partition directory the archive section does not "
                                f"describe", file=view.url_of(pp.part.path))
            inputs.append(recorded.summary(view.url_of(pp.part.path)))
            outputs.append(replace(r.summary, path=dst_storage.url_of(
                dst_storage.join(dst_path, pp.rel) if pp.rel else dst_path)))
            _check_restored(inputs[-1], outputs[-1])
        if plan.log_dir:
            write_log_dir_files(plan, view, path, out)
        report = make_report(
            "restore", plan.source, plan.destination,
            {"index_interval_bytes": options.index_interval_bytes, "now_ms": options.now_ms,
             "producer_expiration_ms": options.producer_expiration_ms, "topic": topic,
             "partition": partition, "master": master},
            inputs, outputs, out.files, _notes(plan, archive))
        report["archive"] = {"source": archive.section.get("source"), "run": archive.manifest.run,
                             "created_ms": archive.manifest.created_ms,
                             "generation": archive.generation.number, "latest_generation": archive.latest}
        report["engine"] = engine.to_json()
        report["duration_ms"] = int((time.monotonic() - started) * 1000)
        out.write(REPORT_NAME, report_bytes(report))
    result.report = report
    plan.warn_strays()
    return result


def _partition_manifest(manifest: Manifest, rel: str) -> Manifest:
    """The manifest with only the files of one partition directory (what its task needs)."""
    prefix = f"{rel}/" if rel else ""
    files = {name: r for name, r in manifest.files.items()
             if name.startswith(prefix) and (rel or "/" not in name)}
    return Manifest(manifest.root, files, manifest.run, manifest.created_ms)


def _check_restored(archived: PartitionSummary, restored: PartitionSummary) -> None:
    """Restore's own check: the restored partition holds what the archive read from the source."""
    differ = [f"{name} {getattr(restored, name)} (archived: {getattr(archived, name)})"
              for name in COMPARED if getattr(restored, name) != getattr(archived, name)]
    if differ:
        raise DataError(f"the restored partition differs from what the archive recorded of its "
                        f"source: {'; '.join(differ)}; nothing was published", file=archived.path)


def _notes(plan: DirectoryPlan, archive: PublishedArchive) -> list[str]:
    notes = [".log segments restored byte for byte (SHA-256 checked against the archive manifest) "
             "with their archived modification times; .index, .timeindex, .txnindex, producer "
             ".snapshot files and leader-epoch-checkpoint regenerated as Kafka 3.6's log recovery "
             "builds them"]
    notes += plan.identity_notes()
    for p in plan.partitions:
        notes += [f"{p.part.name}: skipped {name}" for name in p.skipped]
    notes += [f"log directory: {f.action} {f.name} ({f.reason})" for f in plan.log_dir_files]
    notes += [f"ignored {rel}: not listed in the archive's manifest" for rel in archive.unlisted]
    return notes
