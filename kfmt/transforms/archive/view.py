"""The read side of an archive (docs/archive.md): a published archive seen as a Storage whose
listing is what its manifest holds, with the archive section parsed (restore reads through it)."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

from kfmt.errors import DataError, UsageError
from kfmt.storage.manifest import MANIFEST, PENDING_DIR, Manifest, load_manifest
from kfmt.storage.store import FileInfo, Storage
from kfmt.transforms.archive.archive_format import SECTION, ArchivedPartition, parse_section
from kfmt.transforms.report import REPORT_NAME


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
