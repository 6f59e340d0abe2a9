"""The read side of an archive (docs/archive.md): a published generation of an archive seen as a
Storage whose listing is what its manifest holds, each file read from the object holding it
(kfmt.transforms.archive.generations), with the archive section parsed (restore reads through it)."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

from kfmt.errors import DataError, UsageError
from kfmt.storage.manifest import MANIFEST, PENDING_DIR, Manifest
from kfmt.storage.store import FileInfo, Storage
from kfmt.transforms.archive.archive_format import SECTION, ArchivedPartition
from kfmt.transforms.archive.generations import GENERATIONS_DIR, Generation, generation_name, parse_generation
from kfmt.transforms.report import REPORT_NAME


class ArchiveView(Storage):
    """A read-only view of a published archive: exactly the files its manifest lists (the archive's
    own report left out), with the manifest's sizes and modification times. Every whole-file read
    is checked against the manifest's size and SHA-256: a damaged object is bad data (DataError)."""

    def __init__(self, storage: Storage, manifest: Manifest, dirs=(), objects: dict[str, str] | None = None):
        """`manifest`: every file under its own path; `objects`: file -> the object holding it
        (below the manifest's root; a file not named there is its own object)."""
        super().__init__()
        self.inner = storage
        self.manifest = manifest
        self.objects = objects or {}
        self.sep = storage.sep
        self.spec = storage.spec
        self.files = {rel: r for rel, r in manifest.files.items() if rel != REPORT_NAME}
        self.dirs = {""}
        for rel in [*self.files, *(f"{d}/" for d in dirs if d)]:
            parts = rel.split("/")[:-1]
            self.dirs.update("/".join(parts[:i]) for i in range(1, len(parts) + 1))
        self.verified: set[str] = set()
        self._checked: dict[str, str] = {}  # object path -> its SHA-256, checked as it was read whole
        # the object mapped last, kept for one more map of it: restore counts what it leaves out of
        # a segment, then copies the rest (one download, one check)
        self._last_mapped: tuple[str, object] | None = None

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

    def object_path(self, path: str) -> str:
        """The storage path of the object holding the file at `path`."""
        key = self.objects.get(self._rel(path))
        return path if key is None else self.inner.join(self.manifest.root, *key.split("/"))

    def _read(self, path, start, end):
        if start == 0 and end is None:
            return self._verified(path, self.inner.read)
        return self.inner.read(self.object_path(path), start, end)  # a part: checked when read whole

    def _map(self, path):
        last, self._last_mapped = self._last_mapped, None
        if last is not None and last[0] == path:
            return last[1]
        data = self._verified(path, self.inner.map)
        self._last_mapped = (path, data)
        return data

    def _verified(self, path: str, read):
        rel = self._rel(path)
        record = self.files.get(rel)
        if record is None:
            raise FileNotFoundError(self.url_of(path))
        path = self.object_path(path)
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
        self._checked[path] = sha256
        return data

    def checked_sha256(self, path: str) -> str | None:
        return self._checked.get(self.object_path(path))


@dataclass
class PublishedArchive:
    generation: Generation
    latest: int  # the latest generation's number
    unlisted: list[str]  # objects no generation up to this one holds (ignored)

    @property
    def manifest(self) -> Manifest:
        """The generation's manifest with every file under its own path."""
        return self.generation.natural_manifest()

    @property
    def section(self) -> dict:
        return self.generation.section

    @property
    def partitions(self) -> list[ArchivedPartition]:
        return self.generation.partitions

    def objects(self) -> dict[str, str]:
        return self.generation.object_of()

    def view(self, storage: Storage) -> ArchiveView:
        return ArchiveView(storage, self.manifest, [p.dir for p in self.partitions], self.objects())


def open_archive(storage: Storage, path: str, generation: int | None = None) -> PublishedArchive:
    """A generation of the published archive at `path` (default the latest). Refuses (UsageError) an
    archive never published, a prefix that is not an archive and a generation it does not have; an
    archive with objects of the generation missing or of another size is bad data."""
    url = storage.url_of(path)
    if not storage.isdir(path):
        raise UsageError(f"{url}: no such archive")
    root = path.rstrip(storage.sep) or path
    # looked for before the whole tree is walked: a directory that is no archive (/etc) is refused in
    # one line, not after a warning for every link in it
    if not storage.exists(storage.join(root, MANIFEST)):
        pending = storage.join(root, PENDING_DIR)
        if storage.exists(pending) and storage.walk(pending):
            raise UsageError(f"{url}: an unfinished archive (its run stopped before publishing "
                             f"{MANIFEST}); run `kfmt archive` again with the same SRC to complete it")
        parent = storage.parent(root)
        if parent and parent != root and storage.exists(storage.join(parent, MANIFEST)):
            raise UsageError(f"{url}: a directory inside a kfmt output, not an archive of its own: "
                             f"restore {storage.url_of(parent)} with --topic/--partition")
        raise UsageError(f"{url}: not a kfmt archive (no {MANIFEST})")
    files = storage.walk(path)
    rels = {f.path[len(root) + 1:].replace(storage.sep, "/"): f for f in files}
    latest = _generation(storage, root, MANIFEST)
    chosen = latest
    if generation is not None and generation != latest.number:
        name = generation_name(generation)
        if generation < 1 or generation > latest.number or name not in rels:
            raise UsageError(f"{url}: no generation {generation} (generations: "
                             f"{_numbers(list_generations_of(rels, latest.number))})")
        chosen = _generation(storage, root, name)
        if chosen.number != generation:
            raise DataError(f"generation {chosen.number} stored as generation {generation}: the archive "
                            f"is damaged", file=storage.url_of(storage.join(root, *name.split("/"))))
    problems = []
    for key, record in sorted(chosen.manifest.files.items()):
        found = rels.get(key)
        if found is None:
            problems.append(f"{key}: listed in {MANIFEST} but missing")
        elif found.size != record.size:
            problems.append(f"{key}: {found.size} bytes, but {MANIFEST} lists {record.size}")
    if problems:
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        raise DataError(f"the archive is damaged: {'; '.join(problems[:5])}{more}", file=url)
    unlisted = sorted(rel for rel in rels if rel not in latest.objects and rel != MANIFEST
                      and not rel.startswith((f"{PENDING_DIR}/", f"{GENERATIONS_DIR}/")))
    return PublishedArchive(chosen, latest.number, unlisted)


def _generation(storage: Storage, root: str, name: str) -> Generation:
    path = storage.join(root, *name.split("/"))
    manifest = Manifest.parse(storage.read(path), root, storage.url_of(path))
    if SECTION not in manifest.sections:
        raise UsageError(f"{storage.url_of(root)}: a kfmt output, but not an archive (its {MANIFEST} "
                         f"has no {SECTION!r} section); read it directly")
    return parse_generation(manifest, storage.url_of(path))


def list_generations_of(rels, latest: int) -> list[int]:
    """The generations an archive lists (its objects' keys given): those whose manifest is stored,
    up to the latest (a later one is a killed run's, never published), and the latest."""
    numbers = {latest}
    prefix = f"{GENERATIONS_DIR}/"
    for rel in rels:
        stem = rel[len(prefix):].removesuffix(".json") if rel.startswith(prefix) and rel.endswith(".json") else ""
        if stem.isdigit() and int(stem) <= latest:
            numbers.add(int(stem))
    return sorted(numbers)


def _numbers(numbers: list[int]) -> str:
    return ", ".join(map(str, numbers)) if len(numbers) <= 10 else f"{numbers[0]} to {numbers[-1]}"


def list_generations(storage: Storage, path: str) -> list[dict]:
    """Every generation of the published archive at `path`, oldest first: number, when it was
    published, its run, partitions, segments, records and log start/end offsets per partition."""
    latest = open_archive(storage, path)
    root = path.rstrip(storage.sep) or path
    rels = [f.path[len(root) + 1:].replace(storage.sep, "/") for f in storage.walk(path)]
    out = []
    for number in list_generations_of(rels, latest.latest):
        g = latest.generation if number == latest.latest else _generation(storage, root, generation_name(number))
        out.append({"generation": number, "created_ms": g.manifest.created_ms, "run": g.manifest.run,
                    "latest": number == latest.latest,
                    "partitions": [{"dir": p.dir, "topic": p.topic, "partition": p.partition,
                                    "log_start_offset": p.log_start_offset, "segments": len(p.segments),
                                    "records": sum(s.records for s in p.segments),
                                    "next_offset": p.segments[-1].next_offset if p.segments else None}
                                   for p in g.partitions]})
    return out
