"""Adding files to a published output: staged out of readers' sight, published by a journal.

kfmt.storage.staging publishes a whole new destination at once; an incremental run (`kfmt export
--append`) instead adds files to a destination that readers already use. Its files are written under
`DST/_temporary/<run>/` (as Hadoop's FileOutputCommitter stages a job's output): Spark's and Hadoop's
file listings and Arrow's dataset discovery skip every path with a component that starts with `_`, so
nothing staged is visible. The run commits in three steps:

1. the staged files are checked against what the writers recorded (nothing lost, nothing unknown);
2. a journal `DST/_temporary/<run>/_kfmt_commit.json` is written in one put (a rename on local disk),
   listing every move into place in order; the run has committed once the journal exists;
3. the moves are made (bookkeeping files such as a state file last, each replacing its predecessor
   atomically) and the run's directory is removed.

A run killed before step 2 leaves the destination as it was (its staging directory is removed by the
next run once its process is gone); a run killed in step 3 is rolled forward by the next run, which
redoes the remaining moves before anything else, so the destination always ends up with all of a
committed run's files or none. Two runs at once are refused (the owner file names the process, as in
kfmt.storage.staging). On object storage the moves are copies and deletes; the destination's
`_kfmt_manifest.json`, if it has one, is rewritten last to list the added files too.
"""
from __future__ import annotations

import json
import time

from kfmt.errors import KfmtError
from kfmt.storage.manifest import MANIFEST, Manifest, encode_manifest
from kfmt.storage.runs import another_run, new_run_id, owner_alive, owner_record, run_ended
from kfmt.storage.staging import OWNER, StagedFiles, StagingTarget, tidy_after_failure
from kfmt.storage.store import Storage

TEMPORARY = "_temporary"  # below DST: the staging directories of runs that add files
JOURNAL = "_kfmt_commit.json"  # in a run's staging directory: written at its commit


class AppendStaging:
    """Stage files for an existing destination `dst` (a directory) and publish them together.

    Files are staged by DST-relative '/'-separated paths (`open`, `write`, or workers writing through
    `target()` whose FileRecords the driver `adopt`s); `commit()` publishes them, `abort()` drops them.
    """

    def __init__(self, storage: Storage, dst: str):
        self.storage = storage
        self.dst = dst.rstrip(storage.sep) or dst
        self.url = storage.url_of(self.dst)
        self.run = new_run_id()
        self.temporary = storage.join(self.dst, TEMPORARY)
        self.root = storage.join(self.temporary, self.run)
        self._closed = False
        self.recovered = recover(storage, self.dst)
        storage.makedirs(self.root)
        storage.write(storage.join(self.root, OWNER), json.dumps(owner_record(self.run, self.url)).encode())
        # a run that started at the same moment sees our owner file, or we see its
        for other in _runs(storage, self.temporary):
            if other != self.root:
                owner = _read_json(storage, storage.join(other, OWNER))
                if owner is not None and owner_alive(owner):
                    storage.remove_tree(self.root)
                    raise another_run(self.url, owner)
        self.staged = StagedFiles(storage, self.root)

    def target(self) -> StagingTarget:
        return StagingTarget(self.storage.spec, self.root)

    def adopt(self, records) -> None:
        for record in records:
            self.staged.records[record.rel] = record

    def write(self, rel: str, data):
        return self.staged.write(rel, data)

    def commit(self, last: tuple[str, ...] = ()) -> None:
        """Publish every staged file: data files first, then the files named in `last`, in that order
        (bookkeeping that must not claim files not yet in place, such as a state file)."""
        s = self.storage
        try:
            found = {}
            for info in s.walk(self.root):
                rel = info.path[len(self.root) + 1:].replace(s.sep, "/")
                if rel != OWNER:
                    found[rel] = info.size
            expected = {rel: r.size for rel, r in self.staged.records.items()}
            if found != expected:
                odd = sorted(set(found.items()) ^ set(expected.items()))[:5]
                raise KfmtError(f"{self.url}: the staged files differ from what was recorded "
                                f"({'; '.join(f'{rel} {size} bytes' for rel, size in odd)}); nothing "
                                f"was added")
            moves = [rel for rel in sorted(self.staged.records) if rel not in last]
            moves += [rel for rel in last if rel in self.staged.records]
            manifest = None
            if not s.atomic_rename and s.exists(s.join(self.dst, MANIFEST)):
                old = Manifest.parse(s.read(s.join(self.dst, MANIFEST)), self.dst, MANIFEST)
                records = {**old.files, **self.staged.records}
                manifest = encode_manifest(records.values(), self.run, time.time_ns() // 1_000_000,
                                           old.sections).decode()
            journal = json.dumps({"run": self.run, "moves": moves, "manifest": manifest}).encode()
            s.sync(self.root)  # the staged files are on disk before the journal says they move
            _write_atomically(s, self.root, JOURNAL, journal)
        except BaseException:
            self.abort()
            raise
        self._closed = True
        _roll_forward(s, self.dst, self.root)

    def abort(self) -> None:
        if self._closed:
            return
        self._closed = True
        run_ended(self.run)

        def remove_staging():
            self.storage.remove_tree(self.root)
            _remove_if_empty(self.storage, self.temporary)
        tidy_after_failure(remove_staging, self.url, "what this run staged could not be removed")

    def __enter__(self) -> "AppendStaging":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self.abort()


def recover(storage: Storage, dst: str) -> list[str]:
    """Finish what earlier runs on `dst` left: roll committed runs forward (their journal exists),
    remove the staging of runs whose process is gone. Raises if another run is alive. Returns the
    runs rolled forward."""
    temporary = storage.join(dst, TEMPORARY)
    rolled = []
    for root in _runs(storage, temporary):
        if storage.exists(storage.join(root, JOURNAL)):
            _roll_forward(storage, dst, root)
            rolled.append(storage.basename(root))
            continue
        owner = _read_json(storage, storage.join(root, OWNER))
        if owner is not None and owner_alive(owner):
            raise another_run(storage.url_of(dst), owner)
        storage.remove_tree(root)
    _remove_if_empty(storage, temporary)
    return rolled


def _roll_forward(storage: Storage, dst: str, root: str) -> None:
    """Make the moves a journal lists (idempotent: a move already made is skipped)."""
    journal = _read_json(storage, storage.join(root, JOURNAL))
    if journal is None:
        raise KfmtError(f"{storage.url_of(root)}: the commit journal cannot be read")
    for rel in journal["moves"]:
        source = storage.join(root, *rel.split("/"))
        if not storage.exists(source):
            continue  # moved before the previous attempt was killed
        target = storage.join(dst, *rel.split("/"))
        storage.makedirs(storage.parent(target))
        if storage.atomic_rename:
            storage.rename(source, target)  # replaces an older file of the same name atomically
        else:
            storage.write(target, storage.read(source))
            storage.remove(source)
    if journal.get("manifest"):
        storage.write(storage.join(dst, MANIFEST), journal["manifest"].encode())
    storage.remove_tree(root)
    _remove_if_empty(storage, storage.join(dst, TEMPORARY))


def _write_atomically(storage: Storage, directory: str, name: str, data: bytes) -> None:
    path = storage.join(directory, name)
    if storage.atomic_rename:  # a whole file or none: written aside, synced, renamed
        aside = storage.join(directory, f".{name}.tmp")
        storage.write(aside, data)
        storage.sync(aside)
        storage.rename(aside, path)
    else:  # an object store's put is atomic
        storage.write(path, data)


def _runs(storage: Storage, temporary: str) -> list[str]:
    if not storage.isdir(temporary):
        return []
    return [info.path for info in storage.listdir(temporary) if info.is_dir]


def _read_json(storage: Storage, path: str):
    try:
        return json.loads(bytes(storage.read(path)))
    except (FileNotFoundError, ValueError):
        return None


def _remove_if_empty(storage: Storage, path: str) -> None:
    try:
        if storage.isdir(path) and not storage.listdir(path):
            storage.remove_tree(path)
    except FileNotFoundError:
        pass
