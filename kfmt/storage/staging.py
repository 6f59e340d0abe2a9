"""Atomic, lossless output: a destination is written in staging and published at once.

Local disk: files go to a sibling directory `<name>.<32 hex>-delete`; on commit every file and
directory in it is fsynced (Storage.sync: all at once, not as each file is closed), then the directory
is renamed onto DST (atomic on POSIX). The name is the one Kafka gives a partition
directory pending deletion (docs/format.md §1.1), so a run killed inside a broker's log directory leaves
something both kfmt's layout and a broker skip (a broker even deletes it).

Object storage (no atomic rename): a claim `DST/_kfmt_pending/<run>.json` is written first, the files
are written under DST, and `DST/_kfmt_manifest.json` listing every file is written last (kfmt.storage.manifest).
Readers of a kfmt-written prefix trust only what the manifest lists, and refuse a prefix holding a
claim but no manifest, so a run killed part-way leaves nothing a reader would take for output.

Either way: DST must not exist, or be an empty directory; the source is never touched (nothing here
writes outside the staging area and DST); a failed run removes what it staged; a later run removes
the leftovers of runs that died on this machine (their process is gone) and refuses while another run
is alive. Concurrent starts are safe: a run first makes its claim, then looks for other claims.

Files are written through `StagedFiles`, which records each file's size, SHA-256 and modification
time. For parallel writers (Spark executors) `StagedOutput.target()` is a picklable `StagingTarget`:
executors write through `target.files()` and return the FileRecords, which the driver `adopt()`s
before it commits. A commit checks that the staged files are exactly the recorded ones.
"""
from __future__ import annotations

import errno
import hashlib
import json
import re
import threading
import time
import warnings
from dataclasses import dataclass

from kfmt.errors import KfmtError, KfmtWarning, UsageError
from kfmt.storage.manifest import MANIFEST, PENDING_DIR, FileRecord, encode_manifest
from kfmt.storage.runs import another_run, new_run_id, owner_alive, owner_record, run_ended
from kfmt.storage.store import Storage, StorageSpec, WriteStream

OWNER = "_kfmt_staging.json"  # inside a local staging directory: which run writes it
RESERVED = {MANIFEST, PENDING_DIR, OWNER}
CLAIM_NAME = re.compile(r"[0-9a-f]{32}\.json")  # a run's claim in PENDING_DIR (new_run_id())
#: an owner-less local staging directory younger than this may be a run that is just starting
OWNERLESS_GRACE_MS = 60_000


# Data at least this large is hashed in a second thread while it is written: SHA-256 (about 1.7 GB/s
# with the CPU's SHA instructions) and the write (a copy into the kernel) then overlap instead of
# adding up. Both release the GIL for buffers of this size.
PARALLEL_HASH_BYTES = 1 << 20


def hashed_write(sha, data, write):
    """write(data) with sha.update(data) alongside: the SHA-256 a file record carries is computed
    from the very buffer handed to the store (for a byte-for-byte copy, the source's mapping)."""
    if len(data) < PARALLEL_HASH_BYTES:
        sha.update(data)
        return write(data)
    hasher = threading.Thread(target=sha.update, args=(data,), name="kfmt-sha256")
    hasher.start()
    try:
        return write(data)
    finally:
        hasher.join()


def _check_rel(rel: str) -> list[str]:
    parts = rel.split("/")
    if not rel or rel.startswith("/") or any(p in ("", ".", "..") or "\\" in p for p in parts):
        raise UsageError(f"{rel!r} is not a relative path inside the output")
    if parts[0] in RESERVED:
        raise UsageError(f"{rel!r} is reserved for kfmt's own bookkeeping")
    return parts


class StagedStream(WriteStream):
    """A file being staged: hashes and counts what passes through, records it on close."""

    def __init__(self, files: "StagedFiles", rel: str, stream: WriteStream, mtime_ms: int | None,
                 sha256: str | None = None):
        self.files, self.rel, self._stream, self.mtime_ms = files, rel, stream, mtime_ms
        self._sha = hashlib.sha256() if sha256 is None else None
        self._known = sha256
        self.size = 0
        self.record: FileRecord | None = None

    def write(self, data) -> int:
        n = self._stream.write(data) if self._sha is None else hashed_write(self._sha, data, self._stream.write)
        self.size += len(data)
        return n

    def close(self) -> FileRecord:
        if self.record is None:
            self._stream.close()
            self.files._open.discard(self)
            sha256 = self._known if self._sha is None else self._sha.hexdigest()
            self.record = self.files._finish(self.rel, self.size, sha256, self.mtime_ms)
        return self.record

    def abort(self) -> None:
        self.files._open.discard(self)
        self._stream.abort()


class StagedFiles:
    """Writes files below a staging root, by '/'-separated relative path, and records them.

    Nothing below the root counts before its owner publishes it, and the owner syncs the root first
    (StagedOutput, AppendStaging): so files are not made durable one by one as they are closed
    (Storage.defer_sync), but all at once, by that one sync."""

    def __init__(self, storage: Storage, root: str):
        self.storage = storage
        self.root = root
        storage.defer_sync(root)
        self.records: dict[str, FileRecord] = {}
        self._open: set[StagedStream] = set()

    def path(self, rel: str) -> str:
        return self.storage.join(self.root, *_check_rel(rel))

    def makedirs(self, rel: str) -> None:
        self.storage.makedirs(self.path(rel))

    def write(self, rel: str, data, mtime_ms: int | None = None, sha256: str | None = None) -> FileRecord:
        """`sha256`: of these very bytes, known to the caller (Storage.checked_sha256): not hashed again."""
        path = self.path(rel)
        if sha256 is not None:
            self.storage.write(path, data, mtime_ms)
            return self._finish(rel, len(data), sha256, mtime_ms)
        sha = hashlib.sha256()
        hashed_write(sha, data, lambda chunk: self.storage.write(path, chunk, mtime_ms))
        return self._finish(rel, len(data), sha.hexdigest(), mtime_ms)

    def open(self, rel: str, mtime_ms: int | None = None, sha256: str | None = None) -> StagedStream:
        """Stream a file (memory stays bounded); close() records it, abort() leaves nothing.
        `sha256`: the caller hashed the very buffer it streams (the archive, which needs the hash
        before it uploads: kfmt.transforms.archive.destination), so it is not hashed twice."""
        stream = StagedStream(self, rel, self.storage.open_write(self.path(rel)), mtime_ms, sha256)
        self._open.add(stream)
        return stream

    def set_mtime(self, rel: str, mtime_ms: int) -> FileRecord:
        """Give a written file its modification time (kept by the store where it can, and in the
        manifest always)."""
        record = self.records[rel]
        self.storage.set_mtime(self.path(rel), mtime_ms)
        self.records[rel] = FileRecord(rel, record.size, record.sha256, mtime_ms)
        return self.records[rel]

    def _finish(self, rel: str, size: int, sha256: str, mtime_ms: int | None) -> FileRecord:
        if mtime_ms is not None:
            self.storage.set_mtime(self.path(rel), mtime_ms)
        self.records[rel] = FileRecord(rel, size, sha256, mtime_ms)
        return self.records[rel]


@dataclass(frozen=True)
class StagingTarget:
    """Picklable: where a parallel worker writes files of a staged output. memory:// lives in one
    process, so a memory:// target is only good for threads."""

    spec: StorageSpec
    root: str

    def files(self) -> StagedFiles:
        storage, _path = self.spec.open()
        return StagedFiles(storage, self.root)


class StagedOutput:
    """Write a destination in staging, then publish it whole (commit) or not at all (abort).

    Used as a context manager it commits when the block succeeds and aborts when it raises.
    """

    def __init__(self, storage: Storage, dst: str):
        self.storage = storage
        self.dst = dst.rstrip(storage.sep) or dst
        self.url = storage.url_of(self.dst)
        self.run = new_run_id()
        self.committed = False
        self._closed = False
        self._owner = owner_record(self.run, self.url)
        if storage.exists(self.dst) and not storage.isdir(self.dst):
            raise UsageError(f"{self.url}: the destination exists and is not a directory")
        if storage.atomic_rename:
            self._start_local()
        else:
            self._start_object_store()
        self.staged = StagedFiles(storage, self.root)

    # --- writing (paths are relative to DST, '/'-separated) ---
    def path(self, rel: str) -> str:
        return self.staged.path(rel)

    def makedirs(self, rel: str) -> None:
        self._check_writable()
        self.staged.makedirs(rel)

    def write(self, rel: str, data, mtime_ms: int | None = None, sha256: str | None = None) -> FileRecord:
        self._check_writable()
        return self.staged.write(rel, data, mtime_ms, sha256)

    def open(self, rel: str, mtime_ms: int | None = None) -> StagedStream:
        self._check_writable()
        return self.staged.open(rel, mtime_ms)

    def set_mtime(self, rel: str, mtime_ms: int) -> FileRecord:
        self._check_writable()
        return self.staged.set_mtime(rel, mtime_ms)

    @property
    def files(self) -> dict[str, dict]:
        """What has been staged: relative path -> {"size", "sha256", "mtime_ms"}."""
        return {rel: r.to_json() for rel, r in sorted(self.staged.records.items())}

    def target(self) -> StagingTarget:
        if self.storage.spec is None:
            raise UsageError("a parallel staging target needs storage opened with open_storage()")
        return StagingTarget(self.storage.spec, self.root)

    def adopt(self, records) -> None:
        """Record files that workers wrote through `target()`."""
        self._check_writable()
        for record in records:
            _check_rel(record.rel)
            self.staged.records[record.rel] = record

    # --- publishing ---
    def commit(self) -> None:
        """Publish everything staged, or (on any failure) nothing: the staging is removed."""
        self._check_writable()
        try:
            if self.staged._open:
                names = ", ".join(sorted(s.rel for s in self.staged._open))
                raise KfmtError(f"{self.url}: cannot publish while files are still being written: "
                                f"{names}; nothing was published")
            self._check_staged_files()
            if self.storage.atomic_rename:
                self._publish_local()
            else:
                self._publish_object_store()
        except BaseException:
            self.abort()
            raise
        self.committed = self._closed = True

    def abort(self) -> None:
        """Remove what this run staged (DST is left as it was). Safe to call more than once."""
        if self._closed:
            return
        self._closed = True
        run_ended(self.run)

        def remove_staging():
            for stream in list(self.staged._open):
                stream.abort()
            self.storage.remove_tree(self.root)
        tidy_after_failure(remove_staging, self.url, "what this run staged could not be removed")

    def __enter__(self) -> "StagedOutput":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.abort()

    def _check_writable(self) -> None:
        if self._closed:
            raise KfmtError(f"{self.url}: this output was already "
                            f"{'published' if self.committed else 'aborted'}")

    def _check_staged_files(self) -> None:
        """The staged files must be exactly the recorded ones, with the recorded sizes: nothing lost,
        nothing unaccounted for is published."""
        found = {}
        for info in self.storage.walk(self.root):
            rel = info.path[len(self.root) + 1:].replace(self.storage.sep, "/")
            if rel == OWNER or rel.startswith(f"{PENDING_DIR}/"):
                continue
            found[rel] = info.size
        expected = {rel: r.size for rel, r in self.staged.records.items()}
        if found != expected:
            diffs = sorted(set(found.items()) ^ set(expected.items()))
            detail = "; ".join(f"{rel}: {'staged' if (rel, size) in found.items() else 'recorded'} "
                               f"{size} bytes" for rel, size in diffs[:5])
            raise KfmtError(f"{self.url}: the staged files differ from what was recorded ({detail}); "
                            f"nothing was published")

    # --- local disk: stage in a sibling directory, publish by rename ---
    def _start_local(self) -> None:
        s = self.storage
        if s.exists(self.dst) and s.listdir(self.dst):
            raise UsageError(f"{self.url}: the destination exists and is not empty")
        parent, name = s.parent(self.dst), s.basename(self.dst)
        s.makedirs(parent)
        self.root = s.join(parent, f"{name}.{self.run}-delete")
        s.makedirs(self.root)
        s.write(s.join(self.root, OWNER), json.dumps(self._owner).encode())
        pattern = re.compile(re.escape(name) + r"\.([0-9a-f]{32})-delete")
        now_ms = time.time_ns() // 1_000_000
        # DST's parent is not read as data: what else lies there (sockets in /tmp...) is no concern
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", KfmtWarning)
            siblings = s.listdir(parent)
        for info in siblings:
            m = pattern.fullmatch(info.name)
            if not m or not info.is_dir or m[1] == self.run:
                continue
            owner = self._read_owner(s.join(info.path, OWNER))
            if owner is None and now_ms - (info.mtime_ms or 0) < OWNERLESS_GRACE_MS:
                continue  # possibly a run that is just starting: it will see our claim
            if owner is not None and owner_alive(owner):
                s.remove_tree(self.root)
                raise another_run(self.url, owner)
            self._reclaim_local(info.path, parent, name)

    def _reclaim_local(self, path: str, parent: str, name: str) -> None:
        """Remove a dead run's staging directory: first renamed away (atomic), so that a run in the
        middle of publishing it can never publish a half-removed tree."""
        trash = self.storage.join(parent, f"{name}.{new_run_id()}-delete")
        try:
            self.storage.rename(path, trash)
        except FileNotFoundError:
            return
        self.storage.remove_tree(trash)

    def _publish_local(self) -> None:
        s = self.storage
        s.remove(s.join(self.root, OWNER))
        s.sync(self.root)
        try:
            s.rename(self.root, self.dst)
        except FileNotFoundError:
            raise KfmtError(f"{self.url}: the staging directory {self.root} disappeared before it "
                            f"could be published") from None
        except OSError as err:
            if err.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR):
                raise UsageError(f"{self.url}: the destination was created by someone else while "
                                 f"this run was writing it; nothing was published") from None
            raise

    # --- object storage: claim, write in place, manifest last ---
    def _start_object_store(self) -> None:
        s = self.storage
        self.root = self.dst
        self._claim = s.join(self.dst, PENDING_DIR, f"{self.run}.json")
        s.write(self._claim, json.dumps(self._owner).encode())
        try:
            self._take_destination()
        except BaseException:
            s.remove(self._claim)
            raise

    def _take_destination(self) -> None:
        s = self.storage
        files = [f for f in s.walk(self.dst) if f.path != self._claim]
        claim_dir = s.join(self.dst, PENDING_DIR) + s.sep
        # Claims are the `<run>.json` files right in the claims directory; anything else there is a
        # run's own bookkeeping (an archive's upload records, kfmt.transforms.archive.archive_format), content like any other.
        claims = [f for f in files if f.path.startswith(claim_dir)
                  and CLAIM_NAME.fullmatch(f.path[len(claim_dir):])]
        content = [f for f in files if f not in claims]
        if any(f.path == s.join(self.dst, MANIFEST) for f in content):
            raise UsageError(f"{self.url}: the destination holds a published kfmt output")
        owners = [self._read_owner(f.path) for f in claims]
        live = [o for o in owners if o is not None and owner_alive(o)]
        if live:
            raise another_run(self.url, live[0])
        if content and not claims:
            raise UsageError(f"{self.url}: the destination exists and is not empty")
        for f in files:  # what runs that died on this machine left behind
            s.remove(f.path)

    def _publish_object_store(self) -> None:
        s = self.storage
        s.write(s.join(self.dst, MANIFEST),
                encode_manifest(self.staged.records.values(), self.run, time.time_ns() // 1_000_000))
        s.remove(self._claim)

    def _read_owner(self, path: str) -> dict | None:
        try:
            owner = json.loads(bytes(self.storage.read(path)))
            return owner if isinstance(owner, dict) else None
        except (FileNotFoundError, ValueError):
            return None


def tidy_after_failure(cleanup, url: str, what: str) -> None:
    """cleanup() for a run that is failing anyway. When storage fails that too (the outage that
    failed the run goes on), one warning says so and the run's own error goes through, not this
    one: what is left is no output a reader takes (no manifest; a local staging directory named for
    deletion), and the next run into the destination removes it once this process is gone."""
    try:
        cleanup()
    except (KfmtError, OSError) as err:
        warnings.warn(f"{url}: {what} ({err}); the next run into it removes it", KfmtWarning, stacklevel=3)
