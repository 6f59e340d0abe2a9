"""The write side of an archive (docs/archive.md): the destination looked at and claimed, each object
uploaded once and recorded as it completes, a generation published last (its manifest, then the
pointer to it: kfmt.transforms.archive.generations)."""
from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass

from kfmt.errors import UsageError
from kfmt.storage.manifest import MANIFEST, PENDING_DIR, FileRecord, encode_manifest, load_manifest
from kfmt.storage.runs import another_run, new_run_id, owner_alive, owner_record, run_ended
from kfmt.storage.staging import CLAIM_NAME, StagedFiles, tidy_after_failure
from kfmt.storage.store import Storage, StorageSpec
from kfmt.transforms.archive.archive_format import CHUNK, SECTION, STATE_DIR, UPLOADS_DIR, ArchivedSegment
from kfmt.transforms.archive.generations import GENERATIONS_DIR, Generation, generation_name, parse_generation


@dataclass(frozen=True)
class Upload:
    """One object of the archive after a run's put(): its record and how it got there."""

    record: FileRecord  # rel is the object's key below the archive
    outcome: str  # "uploaded" | "verified" (uploaded by a killed run, checked, skipped) | "reuploaded"
    #               (a killed run's object found damaged) | "archived" (a generation holds it already)
    facts: ArchivedSegment | None  # the segment facts (None for other files)


def _state_path(storage: Storage, root: str, *parts: str) -> str:
    return storage.join(root, PENDING_DIR, STATE_DIR, *parts)


class ArchiveWriter:
    """Puts objects into an archive: each upload is followed by its upload record, and an object whose
    record and content agree with what is to be put is not uploaded again (a killed run resumed)."""

    def __init__(self, storage: Storage, root: str):
        self.storage = storage
        self.root = root
        self.files = StagedFiles(storage, root)

    def upload_record_path(self, key: str) -> str:
        return _state_path(self.storage, self.root, UPLOADS_DIR, *key.split("/")) + ".json"

    def put(self, key: str, data, mtime_ms: int | None, facts: ArchivedSegment | None = None,
            sha256: str | None = None) -> Upload:
        sha256 = sha256 or hashlib.sha256(data).hexdigest()
        previous = self._upload_record(key)
        outcome = "uploaded"
        if previous is not None and (previous["size"], previous["sha256"]) == (len(data), sha256):
            if self._object_matches(key, len(data), sha256):
                return Upload(FileRecord(key, len(data), sha256, mtime_ms), "verified", facts)
            outcome = "reuploaded"
        # A record of other content is a killed run's upload of an object no generation holds (its
        # source has changed since): replaced.
        record = self._upload(key, data, mtime_ms, sha256)
        doc = {"size": record.size, "sha256": record.sha256, "mtime_ms": mtime_ms}
        self.storage.write(self.upload_record_path(key), json.dumps(doc).encode())
        return Upload(record, outcome, facts)

    def _upload(self, key: str, data, mtime_ms: int | None, sha256: str) -> FileRecord:
        """`data` to the object `key`; `sha256` was computed from this very buffer (not hashed again)."""
        view = memoryview(data)
        stream = self.files.open(key, mtime_ms, sha256)
        try:
            for start in range(0, len(view), CHUNK):
                stream.write(view[start:start + CHUNK])
        except BaseException:
            stream.abort()
            raise
        return stream.close()

    def _upload_record(self, key: str) -> dict | None:
        doc = _read_json(self.storage, self.upload_record_path(key))  # cut short: redone
        return doc if isinstance(doc, dict) and {"size", "sha256"} <= doc.keys() else None

    def _object_matches(self, key: str, size: int, sha256: str) -> bool:
        """Whether the object has this size and SHA-256 (read back in chunks)."""
        path = self.files.path(key)
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
    """Picklable: where a parallel task puts objects of an archive (memory:// only for threads)."""

    spec: StorageSpec
    root: str

    def writer(self) -> ArchiveWriter:
        storage, _path = self.spec.open()
        return ArchiveWriter(storage, self.root)


class ArchiveDestination:
    """The archive prefix, on the driver: what it holds (look), the claim of this run (start), and
    the publication of a generation (publish)."""

    def __init__(self, storage: Storage, path: str):
        self.storage = storage
        self.path = path.rstrip(storage.sep) or path
        self.url = storage.url_of(self.path)
        self.run = new_run_id()
        self.latest: Generation | None = None  # the published generation the pointer names
        self.present: dict[str, int] = {}  # key -> size of every object outside _kfmt_pending/
        self.leftovers = 0  # upload records of killed runs
        self._claim = storage.join(self.path, PENDING_DIR, f"{self.run}.json")
        self._owner = owner_record(self.run, self.url, command="archive")

    def look(self) -> Generation | None:
        """Read what URL holds, writing nothing: the latest generation (None for a new archive).
        Refuses a live run's claim and what is not an archive."""
        s = self.storage
        if s.exists(self.path) and not s.isdir(self.path):
            raise UsageError(f"{self.url}: the destination exists and is not a directory")
        files = [f for f in s.walk(self.path) if f.path != self._claim] if s.exists(self.path) else []
        pending = s.join(self.path, PENDING_DIR) + s.sep
        uploads = _state_path(s, self.path, UPLOADS_DIR) + s.sep
        claims = [f for f in files if f.path.startswith(pending) and CLAIM_NAME.fullmatch(f.path[len(pending):])]
        for claim in claims:
            owner = _read_json(s, claim.path)
            if isinstance(owner, dict) and "stopped_ms" not in owner and owner_alive(owner):
                raise another_run(self.url, owner)
        self.leftovers = sum(1 for f in files if f.path.startswith(uploads))
        self.present = {self._key(f.path): f.size for f in files if not f.path.startswith(pending)}
        if MANIFEST in self.present:
            manifest = load_manifest(s, self.path)
            if SECTION not in manifest.sections:
                raise UsageError(f"{self.url}: the destination holds a published kfmt output that is "
                                 f"not an archive")
            self.latest = parse_generation(manifest, s.url_of(s.join(self.path, MANIFEST)))
        elif self.present and not claims and not self.leftovers:
            raise UsageError(f"{self.url}: the destination exists and is not empty (and is not an archive)")
        return self.latest

    def _key(self, path: str) -> str:
        return path[len(self.path) + 1:].replace(self.storage.sep, "/")

    def start(self) -> None:
        """Claim the destination for this run (the claim is released by publish() or stop()); a run
        that claimed it between look() and here is refused."""
        s = self.storage
        s.write(self._claim, json.dumps(self._owner).encode())
        pending = s.join(self.path, PENDING_DIR)
        for info in s.walk(pending):
            name = info.path[len(pending) + 1:]
            if info.path != self._claim and CLAIM_NAME.fullmatch(name):
                owner = _read_json(s, info.path)
                if isinstance(owner, dict) and not _dead(owner):
                    self._release()
                    raise another_run(self.url, owner)

    def target(self) -> ArchiveTarget:
        if self.storage.spec is None:
            raise UsageError("a parallel archive target needs storage opened with open_storage()")
        return ArchiveTarget(self.storage.spec, self.path)

    def writer(self) -> ArchiveWriter:
        return ArchiveWriter(self.storage, self.path)

    def publish(self, number: int, records: dict[str, FileRecord], section: dict) -> None:
        """Check that every object the generation lists is there with its size, write the
        generation's manifest, then the pointer (the latest generation from then on), then remove
        the upload records and the claim."""
        s = self.storage
        published = (parse_generation(load_manifest(s, self.path), self.url).number
                     if s.exists(s.join(self.path, MANIFEST)) else 0)
        if published != (self.latest.number if self.latest else 0):
            raise UsageError(f"{self.url}: generation {published} was published by another run while this "
                             f"one ran; nothing was published: run again")
        found = {self._key(f.path): f.size for f in s.walk(self.path)}
        wrong = [f"{key}: {'missing' if key not in found else f'{found[key]} bytes'}, {r.size} recorded"
                 for key, r in sorted(records.items()) if found.get(key) != r.size]
        if wrong:
            raise UsageError(f"{self.url}: the objects differ from the archived files ({'; '.join(wrong[:5])}); "
                             f"someone else writes here: nothing was published")
        if self.latest is not None and generation_name(self.latest.number) not in found:
            # An archive from before generations: its manifest, generation 1, is kept as one
            s.write(s.join(self.path, *generation_name(self.latest.number).split("/")),
                    bytes(s.read(s.join(self.path, MANIFEST))))
        manifest = encode_manifest(records.values(), self.run, time.time_ns() // 1_000_000, {SECTION: section})
        s.write(s.join(self.path, *generation_name(number).split("/")), manifest)
        self._replace(MANIFEST, manifest)
        s.remove_tree(_state_path(s, self.path))
        self._release()

    def _replace(self, name: str, data: bytes) -> None:
        """Write a root object whole: on object stores one PUT is atomic; on local disk the new file
        is written beside and renamed over the old one."""
        s = self.storage
        path = s.join(self.path, name)
        if not s.atomic_rename:
            s.write(path, data)
            return
        staged = s.join(self.path, GENERATIONS_DIR, f".{name}.{self.run}")
        s.write(staged, data)
        s.rename(staged, path)

    def stop(self) -> None:
        """After a failure: mark the claim stopped, so that a re-run (even in this process) is not
        refused; what was uploaded stays for it. The published generations are untouched."""
        run_ended(self.run)
        owner = dict(self._owner, pid=None, stopped_ms=time.time_ns() // 1_000_000)
        # if that fails too, the claim stays as it was: its process ends, and then it counts as dead
        tidy_after_failure(lambda: self.storage.write(self._claim, json.dumps(owner).encode()), self.url,
                           "this run's claim could not be marked stopped")

    def release(self) -> None:
        """End a run that publishes nothing: its claim goes, upload records stay for a later run."""
        self._release()

    def _release(self) -> None:
        s = self.storage
        pending = s.join(self.path, PENDING_DIR)
        for info in (s.walk(pending) if s.isdir(pending) else []):
            name = info.path[len(pending) + 1:]
            if info.path == self._claim or (CLAIM_NAME.fullmatch(name) and _dead(_read_json(s, info.path))):
                s.remove(info.path)  # this run's claim, and those of runs that died
        if s.isdir(pending) and not s.walk(pending):
            s.remove_tree(pending)  # an empty claims directory (local disk keeps one)


def _dead(owner) -> bool:
    return not isinstance(owner, dict) or "stopped_ms" in owner or not owner_alive(owner)


def _read_json(storage: Storage, path: str):
    try:
        return json.loads(bytes(storage.read(path)))
    except (FileNotFoundError, ValueError):
        return None
