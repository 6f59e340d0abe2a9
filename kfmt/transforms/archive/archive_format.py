"""Archives of partition directories on object storage (docs/archive.md): the layout, the archive
section of the manifest, resumable uploads, and the read side restore uses.

An archive at URL holds what a broker's recovery cannot derive, byte for byte: every `.log` segment,
`leader-epoch-checkpoint` (recovery starts from it: its entries are not all derivable from the
batches, e.g. after the log start offset moved), `partition.metadata` (the topic id), and for a log
directory `meta.properties` and the offset checkpoints (kept to the archived partitions, as reindex
does). It does not hold `.index`, `.timeindex`, `.txnindex` or producer `.snapshot` files: they are
functions of the segments (docs/format.md §6.3, §7, §8), restore regenerates them exactly as Kafka's
recovery would, and archived copies would be stale where they depend on the broker's clock
(producer expiry in snapshots) or half preallocated (an active segment's indexes, 10 MiB of zeros).

Publication follows kfmt.storage.staging's object-store scheme on every store, local disk included: a claim
`_kfmt_pending/<run>.json` first, the files in place, `_kfmt_manifest.json` last (kfmt.storage.manifest),
with an "archive" section (SECTION) describing every partition and segment. Unlike other outputs an
archive resumes: `_kfmt_pending/archive/plan.json` records what the archive is of (each file's size)
and `_kfmt_pending/archive/uploaded/<file>.json` is written as each upload completes (size, SHA-256,
modification time, the segment's facts). A re-run of the same source checks every upload record
against the object (size and SHA-256) and the source (SHA-256), skips what verifies and uploads the
rest again. While anything lies under `_kfmt_pending/`, readers refuse the prefix (kfmt.storage.manifest).
"""
from __future__ import annotations

import hashlib
import json
import os
import socket
import time
from dataclasses import asdict, dataclass, field

import pyarrow.compute as pc

from kfmt.format import segment
from kfmt.errors import DataError, UsageError
from kfmt.storage.manifest import MANIFEST, PENDING_DIR, FileRecord, Manifest, encode_manifest, load_manifest
from kfmt.transforms.report import REPORT_NAME
from kfmt.format.digest import ContentDigest
from kfmt.partition.summary import PartitionSummary, PartitionTally, merge_tallies
from kfmt.storage.staging import CLAIM_NAME, StagedFiles, another_run, new_run_id, owner_alive
from kfmt.storage.store import FileInfo, Storage, StorageSpec

SECTION = "archive"  # the manifest section of an archive
SECTION_VERSION = 1
STATE_DIR = "archive"  # below PENDING_DIR: the resume state of an unfinished archive
PLAN_NAME = "plan.json"
UPLOADS_DIR = "uploaded"
PLAN_FORMAT = "kfmt-archive-plan"
CHUNK = 8 * 1024 * 1024  # bytes per upload write and per verification read


# --- what an archive says about a segment and a partition ---

@dataclass(frozen=True)
class ArchivedSegment:
    """One archived segment: offsets, times, counts and the content digest of its data records.
    Timestamps are the records' as a consumer reports them (kfmt.transforms.report), None when no record has
    one (v0): the `.log` modification time, kept in the manifest, is then the segment's time."""

    file: str  # its path inside the archive
    base_offset: int
    bytes: int
    batches: int
    records: int
    control_records: int
    first_offset: int | None  # of the first data record
    next_offset: int | None  # after the last batch
    min_timestamp: int | None
    max_timestamp: int | None
    content_digest: str

    def to_json(self) -> dict:
        return asdict(self)

    def tally(self) -> PartitionTally:
        """This segment as a part of its partition's summary."""
        return PartitionTally(PartitionSummary("", None, None, 1, self.batches, self.records,
                                               self.control_records, self.bytes, self.first_offset,
                                               self.next_offset), ContentDigest.parse(self.content_digest))

    @classmethod
    def from_json(cls, doc: dict) -> "ArchivedSegment":
        return cls(**{name: doc[name] for name in cls.__dataclass_fields__})


def archived_segment(data, file: str, rel: str, base_offset: int) -> ArchivedSegment:
    """Decode every batch of a segment strictly (framing, CRCs, record structure: bad data raises
    DataError naming `file`) and sum up what the archive records about it."""
    tally = PartitionTally(PartitionSummary(file, None, None))
    tally.add_segment(len(data))
    low = high = None
    for batch in segment.batches(data, file):
        tally.add_batch(batch)
        if batch.header.is_control or not len(batch):
            continue
        timestamps = batch.records.column(1)
        known = pc.filter(timestamps, pc.greater_equal(timestamps, 0))
        if len(known):
            bounds = pc.min_max(known)
            lo, hi = bounds["min"].as_py(), bounds["max"].as_py()
            low = lo if low is None else min(low, lo)
            high = hi if high is None else max(high, hi)
    s = tally.finish()
    return ArchivedSegment(rel, base_offset, len(data), s.batches, s.records, s.control_records,
                        s.first_offset, s.next_offset, low, high, s.content_digest)


@dataclass
class ArchivedPartition:
    """A partition of the archive section: its directory, log start offset and segments."""

    dir: str  # its directory inside the archive ('' when the archive is a partition directory)
    topic: str | None
    partition: int | None
    log_start_offset: int
    segments: list[ArchivedSegment] = field(default_factory=list)

    def summary(self, path: str) -> PartitionSummary:
        """The partition's summary (as kfmt.transforms.report counts it), added up from its segments."""
        return merge_tallies((seg.tally() for seg in self.segments), path, self.topic, self.partition)

    def to_json(self) -> dict:
        summary = self.summary("").to_json()
        del summary["path"]
        times = [t for seg in self.segments for t in (seg.min_timestamp, seg.max_timestamp) if t is not None]
        return {"dir": self.dir, **summary, "log_start_offset": self.log_start_offset,
                "min_timestamp": min(times, default=None), "max_timestamp": max(times, default=None),
                "segment_files": [seg.to_json() for seg in self.segments]}

    @classmethod
    def from_json(cls, doc: dict) -> "ArchivedPartition":
        return cls(doc["dir"], doc["topic"], doc["partition"], doc["log_start_offset"],
                   [ArchivedSegment.from_json(s) for s in doc["segment_files"]])


def encode_section(source: str, log_dir: bool, partitions: list[ArchivedPartition],
                   notes: list[str]) -> dict:
    return {"version": SECTION_VERSION, "source": source, "log_dir": log_dir,
            "content_digest_version": 2, "partitions": [p.to_json() for p in partitions],
            "notes": notes}


def parse_section(manifest: Manifest, file: str) -> tuple[dict, list[ArchivedPartition]]:
    section = manifest.sections.get(SECTION)
    try:
        if section.get("version") != SECTION_VERSION:
            raise ValueError(f"archive section version {section.get('version')!r}, not {SECTION_VERSION}")
        return section, [ArchivedPartition.from_json(p) for p in section["partitions"]]
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise DataError(f"unreadable archive section: {err}", file=file) from None


# --- writing: resumable uploads ---

@dataclass(frozen=True)
class Upload:
    """One file of the archive after a run's put(): its record and how it got there."""

    record: FileRecord
    outcome: str  # "uploaded" | "verified" (there from an earlier run, skipped) | "reuploaded" (damaged)
    facts: ArchivedSegment | None  # the segment facts recorded with the upload (None for other files)


def _state_path(storage: Storage, root: str, *parts: str) -> str:
    return storage.join(root, PENDING_DIR, STATE_DIR, *parts)


class ArchiveWriter:
    """Puts files into an archive: each upload is followed by its upload record, and a file whose
    record, object and source content agree is not uploaded again."""

    def __init__(self, storage: Storage, root: str, resume: bool = True):
        """`resume`: look for upload records (False for a new archive: there are none)."""
        self.storage = storage
        self.root = root
        self.resume = resume
        self.files = StagedFiles(storage, root)

    def upload_record_path(self, rel: str) -> str:
        return _state_path(self.storage, self.root, UPLOADS_DIR, *rel.split("/")) + ".json"

    def put(self, rel: str, data, mtime_ms: int | None, facts: ArchivedSegment | None = None) -> Upload:
        sha256 = hashlib.sha256(data).hexdigest()
        previous = self._upload_record(rel) if self.resume else None
        outcome = "uploaded"
        if previous is not None:
            if (previous["size"], previous["sha256"]) != (len(data), sha256):
                raise UsageError(f"{self.storage.url_of(self.files.path(rel))}: an earlier run uploaded "
                                 f"other content for this file ({previous['size']} bytes, SHA-256 "
                                 f"{previous['sha256']}); the destination holds an unfinished archive "
                                 f"of another source: archive to another URL, or delete it first")
            if self._object_matches(rel, previous["size"], sha256):
                if mtime_ms is not None:
                    self.storage.set_mtime(self.files.path(rel), mtime_ms)
                recorded = previous.get("facts")
                return Upload(FileRecord(rel, len(data), sha256, mtime_ms), "verified",
                              ArchivedSegment.from_json(recorded) if recorded else None)
            outcome = "reuploaded"
        record = self._upload(rel, data, mtime_ms)
        doc = {"size": record.size, "sha256": record.sha256, "mtime_ms": mtime_ms,
               "facts": facts.to_json() if facts else None}
        self.storage.write(self.upload_record_path(rel), json.dumps(doc).encode())
        return Upload(record, outcome, facts)

    def _upload(self, rel: str, data, mtime_ms: int | None) -> FileRecord:
        view = memoryview(data)
        stream = self.files.open(rel, mtime_ms)
        try:
            for start in range(0, len(view), CHUNK):
                stream.write(view[start:start + CHUNK])
        except BaseException:
            stream.abort()
            raise
        return stream.close()

    def _upload_record(self, rel: str) -> dict | None:
        path = self.upload_record_path(rel)
        try:
            doc = json.loads(bytes(self.storage.read(path)))
            return doc if isinstance(doc, dict) and {"size", "sha256"} <= doc.keys() else None
        except FileNotFoundError:
            return None
        except ValueError:  # a record cut short: the upload it vouches for is redone
            return None

    def _object_matches(self, rel: str, size: int, sha256: str) -> bool:
        """Whether the archived object has this size and SHA-256 (read back in chunks)."""
        path = self.files.path(rel)
        try:
            if self.storage.info(path).size != size:
                return False
            digest = hashlib.sha256()
            for start in range(0, size, CHUNK):
                chunk = self.storage.read(path, start, min(size, start + CHUNK))
                if not len(chunk):
                    return False
                digest.update(chunk)
            return digest.hexdigest() == sha256
        except FileNotFoundError:
            return False


@dataclass(frozen=True)
class ArchiveTarget:
    """Picklable: where a parallel task puts files of an archive (memory:// only for threads)."""

    spec: StorageSpec
    root: str
    resume: bool

    def writer(self) -> ArchiveWriter:
        storage, _path = self.spec.open()
        return ArchiveWriter(storage, self.root, self.resume)


class ArchiveDestination:
    """The archive prefix, on the driver: claims it, decides whether this run starts, resumes or has
    nothing to do, and publishes the manifest last.

    `files` is what the archive is of: relative path -> (size, modification time) of every file it
    will hold (the report aside). A run resumes an unfinished archive of the same files (same names
    and sizes; contents are checked file by file as they are put); a complete archive of the same
    files (same sizes and modification times, as rsync's quick check) leaves nothing to do; anything
    else at URL is refused.
    """

    def __init__(self, storage: Storage, path: str, files: dict[str, tuple[int, int | None]]):
        self.storage = storage
        self.path = path.rstrip(storage.sep) or path
        self.url = storage.url_of(self.path)
        self.files = files
        self.run = new_run_id()
        self.state: str | None = None  # "new" | "resume" | "complete", once started
        self.manifest: Manifest | None = None  # of a complete archive
        self._claim = storage.join(self.path, PENDING_DIR, f"{self.run}.json")
        self._owner = {"run": self.run, "pid": os.getpid(), "host": socket.gethostname(),
                       "started_ms": time.time_ns() // 1_000_000, "destination": self.url,
                       "command": "archive"}

    # --- starting ---
    def inspect(self) -> str:
        """What a run would do here, writing nothing: "new", "resume" or "complete" (or UsageError)."""
        return self._classify(self._listing())[0]

    def uploaded_count(self) -> int:
        """How many upload records an unfinished archive here holds (0 for anything else)."""
        uploads = _state_path(self.storage, self.path, UPLOADS_DIR)
        return len(self.storage.walk(uploads)) if self.storage.isdir(uploads) else 0

    def start(self) -> str:
        s = self.storage
        if s.exists(self.path) and not s.isdir(self.path):
            raise UsageError(f"{self.url}: the destination exists and is not a directory")
        s.write(self._claim, json.dumps(self._owner).encode())
        try:
            self.state, leftovers = self._classify(self._listing())
            for info in leftovers:
                s.remove(info.path)
            if self.state == "new":
                plan = {"format": PLAN_FORMAT, "version": 1,
                        "files": {rel: size for rel, (size, _mtime) in sorted(self.files.items())}}
                s.write(_state_path(s, self.path, PLAN_NAME), json.dumps(plan, indent=1).encode())
            elif self.state == "complete":
                self._release()
        except BaseException:
            self._release()
            raise
        return self.state

    def _listing(self) -> list[FileInfo]:
        s = self.storage
        if not s.exists(self.path):
            return []
        return [f for f in s.walk(self.path) if f.path != self._claim]

    def _classify(self, files: list[FileInfo]) -> tuple[str, list[FileInfo]]:
        """(state, files to remove): refuses what must not be touched."""
        s = self.storage
        pending = s.join(self.path, PENDING_DIR) + s.sep
        state_dir = _state_path(s, self.path) + s.sep
        claims = [f for f in files if f.path.startswith(pending)
                  and CLAIM_NAME.fullmatch(f.path[len(pending):])]
        state = [f for f in files if f.path.startswith(state_dir)]
        content = [f for f in files if f not in claims and f not in state]
        for claim in claims:
            owner = _read_json(s, claim.path)
            if isinstance(owner, dict) and "stopped_ms" not in owner and owner_alive(owner):
                raise another_run(self.url, owner)
        manifest_path = s.join(self.path, MANIFEST)
        if any(f.path == manifest_path for f in content):
            self.manifest = load_manifest(s, self.path)
            if SECTION not in self.manifest.sections:
                raise UsageError(f"{self.url}: the destination holds a published kfmt output that is "
                                 f"not an archive")
            published = {rel: (r.size, r.mtime_ms) for rel, r in self.manifest.files.items()
                         if rel != REPORT_NAME}
            if published != self.files:
                raise UsageError(f"{self.url}: the destination holds a complete archive of other "
                                 f"files ({_difference(self.files, published, 'the archive')}); "
                                 f"archive to another URL, or delete it first")
            return "complete", claims + state  # leftovers of a run killed after publishing
        plan_path = _state_path(s, self.path, PLAN_NAME)
        if any(f.path == plan_path for f in state):
            plan = _read_json(s, plan_path)
            planned = plan.get("files") if isinstance(plan, dict) else None
            sizes = {rel: size for rel, (size, _mtime) in self.files.items()}
            if planned != sizes:
                detail = (_difference(sizes, planned, "the unfinished archive")
                          if isinstance(planned, dict) else "its plan is unreadable")
                raise UsageError(f"{self.url}: the destination holds an unfinished archive of other "
                                 f"files ({detail}); archive to another URL, or delete it first")
            return "resume", claims
        if content or state:
            if not claims:
                raise UsageError(f"{self.url}: the destination exists and is not empty")
            return "new", files  # what kfmt runs that died left behind
        return "new", claims

    # --- writing ---
    def target(self) -> ArchiveTarget:
        if self.storage.spec is None:
            raise UsageError("a parallel archive target needs storage opened with open_storage()")
        return ArchiveTarget(self.storage.spec, self.path, self.state != "new")

    def writer(self) -> ArchiveWriter:
        return ArchiveWriter(self.storage, self.path, self.state != "new")

    def publish(self, records: dict[str, FileRecord], section: dict, report: bytes) -> None:
        """Write the report, check that the objects are exactly the recorded files, write the
        manifest, then remove the resume state and the claim."""
        s = self.storage
        records = dict(records)
        records[REPORT_NAME] = self.writer().files.write(REPORT_NAME, report)
        found = {}
        pending = s.join(self.path, PENDING_DIR) + s.sep
        for info in s.walk(self.path):
            if not info.path.startswith(pending):
                found[info.path[len(self.path) + 1:].replace(s.sep, "/")] = info.size
        expected = {rel: r.size for rel, r in records.items()}
        if found != expected:
            diffs = sorted(set(found.items()) ^ set(expected.items()))
            detail = "; ".join(f"{rel}: {'found' if (rel, size) in found.items() else 'recorded'} "
                               f"{size} bytes" for rel, size in diffs[:5])
            raise UsageError(f"{self.url}: the objects differ from the archived files ({detail}); "
                             f"someone else writes here: nothing was published")
        s.write(s.join(self.path, MANIFEST),
                encode_manifest(records.values(), self.run, time.time_ns() // 1_000_000,
                                {SECTION: section}))
        s.remove_tree(_state_path(s, self.path))
        self._release()

    def stop(self) -> None:
        """After a failure: mark the claim stopped, so that a re-run (even in this process) resumes;
        what was uploaded stays for it. Readers still refuse the unfinished archive."""
        owner = dict(self._owner, pid=None, stopped_ms=time.time_ns() // 1_000_000)
        try:
            self.storage.write(self._claim, json.dumps(owner).encode())
        except OSError:
            pass  # the claim stays as it was: its process ends, and then it counts as dead

    def _release(self) -> None:
        s = self.storage
        try:
            s.remove(self._claim)
        except FileNotFoundError:
            pass
        pending = s.join(self.path, PENDING_DIR)
        if s.isdir(pending) and not s.walk(pending):
            s.remove_tree(pending)  # an empty claims directory (local disk keeps one)


def _read_json(storage: Storage, path: str):
    try:
        return json.loads(bytes(storage.read(path)))
    except (FileNotFoundError, ValueError):
        return None


def _difference(ours: dict, theirs: dict, name: str, limit: int = 3) -> str:
    """The first few differences between SRC's files and an archive's, in words."""
    out = []
    for rel in sorted(set(ours) | set(theirs)):
        if rel not in theirs:
            out.append(f"{rel} is not in {name}")
        elif rel not in ours:
            out.append(f"{rel} is in {name} but not in SRC")
        elif ours[rel] != theirs[rel]:
            out.append(f"{rel}: {_describe(ours[rel])} in SRC, {_describe(theirs[rel])} in {name}")
        if len(out) == limit:
            break
    return "; ".join(out)


def _describe(value) -> str:
    if isinstance(value, (tuple, list)):
        return f"{value[0]} bytes, modified at {value[1]} ms"
    return f"{value} bytes"


# --- reading: a published archive ---

class ArchiveView(Storage):
    """A read-only view of a published archive: exactly the files its manifest lists (the archive's
    own report left out), with the manifest's sizes and modification times. Every whole-file read
    is checked against the manifest's size and SHA-256: a damaged object is bad data (DataError)."""

    def __init__(self, storage: Storage, manifest: Manifest, dirs=()):
        super().__init__()
        self.inner = storage
        self.manifest = manifest
        self.sep = storage.sep
        self.spec = storage.spec
        self.files = {rel: r for rel, r in manifest.files.items() if rel != REPORT_NAME}
        self.dirs = {""}
        for rel in [*self.files, *(f"{d}/" for d in dirs if d)]:
            parts = rel.split("/")[:-1]
            self.dirs.update("/".join(parts[:i]) for i in range(1, len(parts) + 1))
        self.verified: set[str] = set()

    def join(self, *parts):
        return self.inner.join(*parts)

    def basename(self, path):
        return self.inner.basename(path)

    def parent(self, path):
        return self.inner.parent(path)

    def url_of(self, path):
        return self.inner.url_of(path)

    def _rel(self, path: str) -> str | None:
        try:
            return self.manifest.relative(self.inner, path)
        except ValueError:
            return None

    def listdir(self, path):
        rel = self._rel(path)
        if rel not in self.dirs:
            raise FileNotFoundError(self.url_of(path))
        prefix = f"{rel}/" if rel else ""
        entries = {}
        for name in [*self.files, *(f"{d}/" for d in self.dirs if d)]:
            if name.startswith(prefix) and name != prefix:
                head, slash, _rest = name[len(prefix):].partition("/")
                entries[head] = bool(slash)
        return [self.info(self.join(path, name)) for name in sorted(entries)]

    def info(self, path):
        rel = self._rel(path)
        record = self.files.get(rel)
        if record is not None:
            return FileInfo(self.basename(path), path, record.size, False, record.mtime_ms)
        if rel in self.dirs:
            return FileInfo(self.basename(path), path, 0, True)
        raise FileNotFoundError(self.url_of(path))

    def exists(self, path):
        rel = self._rel(path)
        return rel in self.files or rel in self.dirs

    def isdir(self, path):
        return self._rel(path) in self.dirs

    def _read(self, path, start, end):
        if start == 0 and end is None:
            return self._verified(path, self.inner.read)
        return self.inner.read(path, start, end)  # a part: checked by whoever reads it whole

    def _map(self, path):
        return self._verified(path, self.inner.map)

    def _verified(self, path: str, read):
        rel = self._rel(path)
        record = self.files.get(rel)
        if record is None:
            raise FileNotFoundError(self.url_of(path))
        try:
            data = read(path)
        except FileNotFoundError:
            raise DataError(f"listed in {MANIFEST} but missing: the archive is damaged",
                            file=self.url_of(path)) from None
        if len(data) != record.size:
            raise DataError(f"{len(data)} bytes, but {MANIFEST} lists {record.size}: the archived "
                            f"object is damaged", file=self.url_of(path))
        sha256 = hashlib.sha256(data).hexdigest()
        if sha256 != record.sha256:
            raise DataError(f"SHA-256 {sha256} differs from {record.sha256} in {MANIFEST}: the "
                            f"archived object is damaged", file=self.url_of(path))
        self.verified.add(rel)
        return data


@dataclass
class PublishedArchive:
    manifest: Manifest
    section: dict
    partitions: list[ArchivedPartition]
    unlisted: list[str]  # objects the manifest does not list (ignored)

    def view(self, storage: Storage) -> ArchiveView:
        return ArchiveView(storage, self.manifest, [p.dir for p in self.partitions])


def open_archive(storage: Storage, path: str) -> PublishedArchive:
    """The published archive at `path`. Refuses (UsageError) an unfinished archive or a prefix that
    is not an archive; an archive with listed objects missing or of another size is bad data."""
    url = storage.url_of(path)
    if not storage.isdir(path):
        raise UsageError(f"{url}: no such archive")
    files = storage.walk(path)
    root = path.rstrip(storage.sep) or path
    rels = {f.path[len(root) + 1:].replace(storage.sep, "/"): f for f in files}
    if MANIFEST not in rels:
        if any(rel.startswith(f"{PENDING_DIR}/") for rel in rels):
            raise UsageError(f"{url}: an unfinished archive (its run stopped before publishing "
                             f"{MANIFEST}); run `kfmt archive` again with the same SRC to complete it")
        parent = storage.parent(root)
        if parent and parent != root and storage.exists(storage.join(parent, MANIFEST)):
            raise UsageError(f"{url}: a directory inside a kfmt output, not an archive of its own: "
                             f"restore {storage.url_of(parent)} with --topic/--partition")
        raise UsageError(f"{url}: not a kfmt archive (no {MANIFEST})")
    manifest = load_manifest(storage, root)
    manifest_url = storage.url_of(storage.join(root, MANIFEST))
    if SECTION not in manifest.sections:
        raise UsageError(f"{url}: a kfmt output, but not an archive (its {MANIFEST} has no "
                         f"{SECTION!r} section); read it directly")
    section, partitions = parse_section(manifest, manifest_url)
    problems = []
    for rel, record in sorted(manifest.files.items()):
        found = rels.get(rel)
        if found is None:
            problems.append(f"{rel}: listed in {MANIFEST} but missing")
        elif found.size != record.size:
            problems.append(f"{rel}: {found.size} bytes, but {MANIFEST} lists {record.size}")
    if problems:
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        raise DataError(f"the archive is damaged: {'; '.join(problems[:5])}{more}", file=url)
    unlisted = sorted(rel for rel in rels if rel not in manifest.files and rel != MANIFEST
                      and not rel.startswith(f"{PENDING_DIR}/"))
    return PublishedArchive(manifest, section, partitions, unlisted)
