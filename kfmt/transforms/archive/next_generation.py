"""The generation a run of `kfmt archive` publishes: assembled from what the run read and the latest
generation (kfmt.transforms.archive.incremental), compared with the latest (nothing new: nothing is
published), then the log-directory files and the report put and the generation published
(kfmt.transforms.archive.destination)."""
from __future__ import annotations

import hashlib
import time
import warnings
from collections import Counter
from dataclasses import dataclass, field

from kfmt.errors import KfmtWarning
from kfmt.format import copied_runs
from kfmt.pipelines.runner import run_tasks
from kfmt.storage.manifest import NOT_IN_PLACE, FileRecord
from kfmt.transforms.archive import read_task
from kfmt.transforms.archive.archive_format import ArchivedPartition, encode_section
from kfmt.transforms.archive.generations import OBJECTS_DIR, ObjectIndex, StoredFile, object_key
from kfmt.transforms.archive.incremental import (
    PARTITION_FILES,
    Kept,
    archive_checkpoint,
    is_checkpoint,
    kept_from,
    log_start,
    merge_segments,
)
from kfmt.transforms.directory_plan import LOG_START_OFFSET_CHECKPOINT
from kfmt.transforms.report import REPORT_NAME, make_report, report_bytes
from kfmt.transforms.run import plan_engine


@dataclass
class Assembled:
    files: dict[str, Kept]  # every file of the generation (report aside) -> its object
    partitions: list[ArchivedPartition]
    to_put: dict[str, tuple[bytes, int | None]]  # log-directory files no generation holds yet
    inputs: list[ArchivedPartition]  # the part of each partition read from SRC by this run or unchanged
    notes: list[str] = field(default_factory=list)
    uploads: list = field(default_factory=list)  # this run's Uploads


class NextGeneration:
    """One run's generation, from the plan (kfmt.transforms.archive.upload.ArchivePlan)."""

    def __init__(self, aplan, destination, src_storage, src_path: str, options: dict, started: float):
        self.aplan, self.destination, self.src_storage = aplan, destination, src_storage
        self.src_path = src_path
        self.options, self.started = options, started
        latest = aplan.latest
        self.index = ObjectIndex(latest.objects if latest else {}, destination.present)
        self.engine = None

    def run(self, master, progress) -> dict | None:
        """Read and upload what is new, publish the generation; its report, or None when it would
        equal the latest generation."""
        aplan, destination = self.aplan, self.destination
        count, size = aplan.to_read()
        deep = bool(self.options.get("deep"))
        self.engine = plan_engine(master, size, self.src_storage, destination.storage,
                                  lambda: not deep and copied_runs.in_kernels())
        target = destination.target()
        tasks = [read_task.ArchiveTask(self.src_storage.spec, tuple(files), target, deep) for files in aplan.tasks]
        results = [r for rs in run_tasks(read_task.archive_files, tasks, master=self.engine, description="archive",
                                         progress=progress) for r in rs]
        assembled = self.assemble(results)
        if assembled is None:
            return None
        return self.publish(assembled)

    def assemble(self, results) -> Assembled | None:
        """The new generation, or None when it would be the latest one again."""
        aplan, latest = self.aplan, self.aplan.latest
        notes: list[str] = []
        have: dict[str, Kept] = dict(aplan.unchanged)
        uploads = []
        for r in results:
            notes += r.notes
            if r.upload is None:
                continue
            u = r.upload
            uploads.append(u)
            have[r.rel] = Kept(StoredFile(u.record.rel, r.source_size), u.record, u.facts)
            self.index.add(u.record.rel, r.rel, u.record.size, u.record.sha256)
        files: dict[str, Kept] = {}
        partitions, inputs = [], []
        for work in aplan.works:
            pp = work.pp
            archived = {have[rel].facts.base_offset: have[rel].facts for rel in work.files
                        if rel in have and have[rel].facts is not None}
            segments = merge_segments(work, archived, aplan.prune, notes)
            for seg in segments:
                files[seg.file] = have.get(seg.file) or kept_from(latest, seg.file)
            for name in PARTITION_FILES:
                rel = pp.rel_path(name)
                kept = have.get(rel) or (kept_from(latest, rel) if work.previous is not None else None)
                if kept is not None:
                    files[rel] = kept
            lost = (work.previous.lost if work.previous else []) + ([work.lost] if work.lost else [])
            part = ArchivedPartition(pp.rel, pp.part.topic, pp.part.partition, log_start(work, aplan.prune),
                                     segments, lost)
            partitions.append(part)
            inputs.append(ArchivedPartition(pp.rel, part.topic, part.partition, part.log_start_offset,
                                            [s for s in segments if s.file in have]))
        for part in aplan.kept_partitions:
            partitions.append(part)
            prefix = f"{part.dir}/"
            files.update({rel: kept_from(latest, rel) for rel in latest.files if rel.startswith(prefix)})
        partitions.sort(key=lambda p: p.dir)
        to_put = {}
        for rel, (data, mtime) in self._log_dir_files(partitions).items():
            sha256 = hashlib.sha256(data).hexdigest()
            key, there = object_key(rel, sha256, self.index.versions(rel), self.index.natural_taken(rel))
            if there:
                files[rel] = Kept(StoredFile(key, len(data)), FileRecord(key, len(data), sha256, mtime))
            else:
                to_put[rel] = (data, mtime)
        assembled = Assembled(files, partitions, to_put, inputs, notes, uploads)
        # said here, also when nothing is published (a file skipped as gone is news either way):
        # an executor's warnings go nowhere
        for note in notes:
            warnings.warn(note, KfmtWarning, stacklevel=2)
        if latest is not None and not to_put and _same(assembled, latest):
            return None
        return assembled

    def _log_dir_files(self, partitions: list[ArchivedPartition]) -> dict[str, tuple[bytes, int | None]]:
        """meta.properties as SRC has it; the offset checkpoints made the archive's own (kept to its
        partitions, log start offsets its own, offsets clamped to what it holds: no mtime, they are
        the archive's files rather than the broker's)."""
        plan = self.aplan.plan
        if not plan.log_dir:
            return {}
        out = {}
        for f in plan.log_dir_files:
            if f.action == "skip":
                continue
            path = self.src_storage.join(self.src_path, f.name)
            try:
                info = self.src_storage.info(path)
                data, mtime = bytes(self.src_storage.read(path)), info.mtime_ms
            except FileNotFoundError:  # being replaced by the broker (written beside, renamed)
                kept = kept_from(self.aplan.latest, f.name)
                if kept is None:
                    continue
                data = bytes(self.destination.storage.read(self.destination.storage.join(
                    self.destination.path, *kept.stored.object.split("/"))))
                mtime = kept.record.mtime_ms
            if is_checkpoint(f.name):
                data = archive_checkpoint(f.name, data, self.src_storage.url_of(path), partitions)
                mtime = None
            out[f.name] = (data, mtime)
        if LOG_START_OFFSET_CHECKPOINT not in out:
            data = archive_checkpoint(LOG_START_OFFSET_CHECKPOINT, None, "", partitions)
            if data is not None:
                out[LOG_START_OFFSET_CHECKPOINT] = (data, None)
        return {rel: v for rel, v in out.items() if v[0] is not None}

    def publish(self, a: Assembled) -> dict:
        destination, aplan, plan = self.destination, self.aplan, self.aplan.plan
        writer = destination.writer()
        uploads = list(a.uploads)
        for rel, (data, mtime) in sorted(a.to_put.items()):
            sha256 = hashlib.sha256(data).hexdigest()
            key, _there = object_key(rel, sha256, self.index.versions(rel), self.index.natural_taken(rel))
            u = writer.put(key, data, mtime, None, sha256)
            uploads.append(u)
            a.files[rel] = Kept(StoredFile(key, len(data)), u.record)
            self.index.add(key, rel, u.record.size, u.record.sha256)
        number = aplan.latest.number + 1 if aplan.latest else 1
        src_urls = {w.pp.rel: w.pp.part.storage.url_of(w.pp.part.path) for w in aplan.works}
        dst = destination.storage
        outputs = [p.summary(dst.url_of(dst.join(destination.path, p.dir) if p.dir else destination.path))
                   for p in a.partitions]
        inputs = [p.summary(src_urls[p.dir]) for p in a.inputs]
        notes = _notes(aplan, a)
        records = {k.record.rel: k.record for k in a.files.values()}
        report = make_report("archive", plan.source, plan.destination, self.options, inputs, outputs,
                             {key: r.to_json() for key, r in records.items()}, notes)
        report["generation"] = number
        report["previous_generation"] = aplan.latest.number if aplan.latest else None
        report["active_segments"] = aplan.active_json()
        report["lost"] = [lost.to_json() for lost in aplan.lost()]
        report["transfer"] = _transfer(uploads, len(aplan.unchanged))
        if self.engine is not None:
            report["engine"] = self.engine.to_json()
        report["duration_ms"] = int((time.monotonic() - self.started) * 1000)
        data = report_bytes(report)
        sha256 = hashlib.sha256(data).hexdigest()
        key, _there = object_key(REPORT_NAME, sha256, (), self.index.natural_taken(REPORT_NAME))
        record = writer.files.write(key, data)
        self.index.add(key, REPORT_NAME, record.size, record.sha256)
        a.files[REPORT_NAME] = Kept(StoredFile(key, len(data)), record)
        records[key] = record
        relocated = sorted(rel for rel, k in a.files.items() if rel != REPORT_NAME and k.stored.object != rel)
        generation = {"generation": number, "previous_generation": report["previous_generation"],
                      "options": {"include_active": aplan.include_active, "prune": aplan.prune},
                      "files": {rel: k.stored.to_json() for rel, k in sorted(a.files.items())},
                      "objects": {key: o.to_json() for key, o in sorted(self.index.objects.items())}}
        if relocated:  # what lies at those paths is an older version: readers must not take it
            generation[NOT_IN_PLACE] = (
                f"an archive whose generation {number} keeps {len(relocated)} file(s) under "
                f"{OBJECTS_DIR}/ (newer versions of e.g. {relocated[0]}): read it through "
                f"`kfmt restore` (docs/archive.md)")
        destination.publish(number, records, encode_section(plan.source, plan.log_dir, a.partitions,
                                                            notes, generation))
        return report


def _notes(aplan, a: Assembled) -> list[str]:
    """What the report says of what is stored, kept, left for the next run and lost."""
    notes = [".log segments (rolled ones; the active one up to its last complete entry with "
             "--include-active), leader-epoch-checkpoint and partition.metadata stored byte for byte "
             "with their modification times (in the manifest); .index, .timeindex, .txnindex and "
             "producer .snapshot files are not stored: restore regenerates them as Kafka's recovery "
             "does", *aplan.not_stored]
    notes += [f"log directory: {f.action} {f.name} ({f.reason})" for f in aplan.plan.log_dir_files]
    notes += [f"{p.dir or '.'}: not in SRC's selection now, kept as generation "
              f"{aplan.latest.number} has it" for p in aplan.kept_partitions]
    notes += a.notes
    notes += [f"{left.phrase()} left for the next run: the active segment of a running broker "
              f"({aplan.active.why})" for left in aplan.left()]
    return notes + [lost.phrase() for lost in aplan.lost()]


def _transfer(uploads: list, unchanged: int) -> dict:
    """The report's count of what went over the wire and what did not need to."""
    outcomes = Counter(u.outcome for u in uploads)
    return {"files": {"uploaded": outcomes.get("uploaded", 0), "verified": outcomes.get("verified", 0),
                      "reuploaded": outcomes.get("reuploaded", 0), "archived": outcomes.get("archived", 0),
                      "unchanged": unchanged},
            "bytes_uploaded": sum(u.record.size for u in uploads if u.outcome in ("uploaded", "reuploaded")),
            "reuploaded": sorted(u.record.rel for u in uploads if u.outcome == "reuploaded")}


def _same(a: Assembled, latest) -> bool:
    """Whether the assembled generation holds what the latest one does (same files, objects and
    modification times; same partitions and segments)."""
    ours = {rel: (k.stored.object, k.record.sha256, k.record.mtime_ms) for rel, k in a.files.items()}
    theirs = {rel: (s.object, latest.manifest.files[s.object].sha256, latest.manifest.files[s.object].mtime_ms)
              for rel, s in latest.files.items() if rel != REPORT_NAME}
    return ours == theirs and [p.to_json() for p in a.partitions] == [p.to_json() for p in latest.partitions]
