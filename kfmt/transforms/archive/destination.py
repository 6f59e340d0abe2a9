"""The write side of an archive (docs/archive.md): a destination claimed, planned and resumed, each
file uploaded once and recorded as it completes, the manifest with the archive section written last."""
from __future__ import annotations

import hashlib
import json
import os
import socket
import time
from dataclasses import dataclass

from kfmt.errors import UsageError
from kfmt.storage.manifest import MANIFEST, PENDING_DIR, FileRecord, Manifest, encode_manifest, load_manifest
from kfmt.storage.staging import CLAIM_NAME, StagedFiles, another_run, new_run_id, owner_alive
from kfmt.storage.store import FileInfo, Storage, StorageSpec
from kfmt.transforms.archive.archive_format import (
    CHUNK,
    PLAN_FORMAT,
    PLAN_NAME,
    SECTION,
    STATE_DIR,
    UPLOADS_DIR,
    ArchivedSegment,
)
from kfmt.transforms.report import REPORT_NAME


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
