"""The manifest of a kfmt output on object storage, and how readers honour it.

Object stores have no atomic rename, so kfmt publishes an output there by writing its files in place
and then, last, `_kfmt_manifest.json` listing every file (size, SHA-256, modification time). Until
that one object exists the output does not: a run writes a claim under `_kfmt_pending/` first, so a
prefix holding a claim and no manifest is an interrupted run, which readers refuse.

Readers of a prefix that holds a manifest trust only what it lists: other files are ignored and
reported, as are listed files that are missing or have another size. `.log` modification times
(Kafka's time retention of timestamp-less segments depends on them, docs/format.md §13, §17 item 10)
travel in the manifest and come back as the files' mtimes when read.

    {"format": "kfmt-manifest", "version": 1, "run": "<run id>", "created_ms": <epoch ms>,
     "files": {"<path relative to the manifest's directory, '/'-separated>":
               {"size": <bytes>, "sha256": "<hex>", "mtime_ms": <epoch ms or null>}, ...}}

A kind of output may add sections of its own beside these keys (an archive adds "archive",
kfmt.transforms.archive.archive_format); readers that do not know a section ignore it. A section
holding a `"not_in_place"` message marks an output whose files are not all at their own paths (an
archive generation keeping a newer version of a file elsewhere): readers refuse it with that message
rather than read what lies at the paths.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, replace

from kfmt.errors import DataError, UsageError
from kfmt.storage.store import FileInfo, Storage

MANIFEST = "_kfmt_manifest.json"
PENDING_DIR = "_kfmt_pending"
NOT_IN_PLACE = "not_in_place"  # a section's key: why the output cannot be read in place
FORMAT = "kfmt-manifest"
VERSION = 1


@dataclass(frozen=True)
class FileRecord:
    """One published file: what the manifest says about it."""

    rel: str
    size: int
    sha256: str
    mtime_ms: int | None = None

    def to_json(self) -> dict:
        return {"size": self.size, "sha256": self.sha256, "mtime_ms": self.mtime_ms}


CORE_KEYS = ("format", "version", "run", "created_ms", "files")


def encode_manifest(records, run: str, created_ms: int, sections: dict | None = None) -> bytes:
    files = {r.rel: r.to_json() for r in sorted(records, key=lambda r: r.rel)}
    doc = {"format": FORMAT, "version": VERSION, "run": run, "created_ms": created_ms, "files": files}
    for key, value in (sections or {}).items():
        if key in CORE_KEYS:
            raise ValueError(f"a manifest section may not be named {key!r}")
        doc[key] = value
    return json.dumps(doc, indent=1).encode()


@dataclass
class ManifestView:
    """A directory listing seen through a manifest."""

    kept: list[FileInfo]  # what the manifest lists, with its mtimes
    problems: list[str]  # files that disagree with the manifest, one line each
    missing_dirs: list[FileInfo]  # sub-directories the manifest implies but the store does not hold


@dataclass
class Manifest:
    root: str  # storage path of the directory holding the manifest
    files: dict[str, FileRecord] = field(default_factory=dict)
    run: str | None = None
    created_ms: int | None = None
    sections: dict = field(default_factory=dict)  # the keys beside the core ones (encode_manifest)

    @classmethod
    def parse(cls, data, root: str, file: str) -> "Manifest":
        try:
            doc = json.loads(bytes(data))
            if doc.get("format") != FORMAT or doc.get("version") != VERSION:
                raise ValueError(f"not a {FORMAT} version {VERSION} document")
            files = {rel: FileRecord(rel, int(e["size"]), str(e["sha256"]), e.get("mtime_ms"))
                     for rel, e in doc["files"].items()}
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise DataError(f"unreadable manifest: {err}", file=file) from None
        sections = {key: value for key, value in doc.items() if key not in CORE_KEYS}
        return cls(root, files, doc.get("run"), doc.get("created_ms"), sections)

    def relative(self, storage: Storage, path: str) -> str:
        """`path` relative to the manifest's directory, '/'-separated ('' for the directory itself)."""
        root, path = self.root.rstrip(storage.sep), path.rstrip(storage.sep)
        if path == root:
            return ""
        if not path.startswith(root + storage.sep):
            raise ValueError(f"{path} is not below {root}")
        return path[len(root) + 1:].replace(storage.sep, "/")

    def view(self, storage: Storage, path: str, listing: list[FileInfo]) -> ManifestView:
        """The entries of directory `path` that the manifest vouches for."""
        rel_dir = self.relative(storage, path)
        prefix = f"{rel_dir}/" if rel_dir else ""
        expected: dict[str, FileRecord] = {}
        subdirs: set[str] = set()
        for rel, record in self.files.items():
            if rel.startswith(prefix):
                head, slash, _rest = rel[len(prefix):].partition("/")
                if slash:
                    subdirs.add(head)
                else:
                    expected[head] = record
        kept, problems, seen = [], [], set()
        for info in listing:
            seen.add(info.name)
            if info.is_dir:
                # Directories the manifest does not imply hold nothing published (an object store
                # may keep listing an emptied prefix, e.g. the pending-claims directory).
                if info.name in subdirs:
                    kept.append(info)
                continue
            if not rel_dir and info.name == MANIFEST:
                continue
            record = expected.get(info.name)
            if record is None:
                problems.append(f"{info.name}: not listed in {MANIFEST} (ignored)")
            elif info.size != record.size:
                problems.append(f"{info.name}: {info.size} bytes, but {MANIFEST} lists "
                                f"{record.size} (ignored)")
            else:
                kept.append(info if record.mtime_ms is None else replace(info, mtime_ms=record.mtime_ms))
        problems += [f"{name}: listed in {MANIFEST} but missing" for name in sorted(expected)
                     if name not in seen]
        missing = [FileInfo(name, storage.join(path, name), 0, True) for name in sorted(subdirs - seen)]
        return ManifestView(kept, problems, missing)


def has_pending_claims(storage: Storage, path: str) -> bool:
    pending = storage.join(path, PENDING_DIR)
    return storage.isdir(pending) and bool(storage.walk(pending))


def load_manifest(storage: Storage, directory: str) -> Manifest:
    file = storage.join(directory, MANIFEST)
    return Manifest.parse(storage.read(file), directory, storage.url_of(file))


def own_manifest(storage: Storage, path: str, listing: list[FileInfo]) -> Manifest | None:
    """The manifest in directory `path` itself (given its listing). Raises UsageError for an
    interrupted kfmt output (a claim without a manifest): nothing in it was published."""
    names = {info.name: info for info in listing}
    if MANIFEST in names and not names[MANIFEST].is_dir:
        return _in_place(storage, path, load_manifest(storage, path))
    if PENDING_DIR in names and names[PENDING_DIR].is_dir and has_pending_claims(storage, path):
        raise unfinished_output(storage, path)
    return None


def find_manifest(storage: Storage, path: str, listing: list[FileInfo]) -> Manifest | None:
    """The manifest that governs directory `path`: its own, or its parent's (a kfmt output that is a
    log directory is read one partition directory at a time). Raises UsageError for an interrupted
    kfmt output there."""
    manifest = own_manifest(storage, path, listing)
    if manifest is not None:
        return manifest
    parent = storage.parent(path)
    if parent and parent != path:
        if storage.exists(storage.join(parent, MANIFEST)):
            return _in_place(storage, parent, load_manifest(storage, parent))
        if has_pending_claims(storage, parent):
            raise unfinished_output(storage, parent)
    return None


def _in_place(storage: Storage, path: str, manifest: Manifest) -> Manifest:
    """The manifest, unless a section says the output cannot be read in place (UsageError)."""
    for section in manifest.sections.values():
        if isinstance(section, dict) and section.get(NOT_IN_PLACE):
            raise UsageError(f"{storage.url_of(path)}: {section[NOT_IN_PLACE]}")
    return manifest


def unfinished_output(storage: Storage, path: str) -> UsageError:
    return UsageError(f"{storage.url_of(path)}: an unfinished kfmt output (its run stopped before "
                      f"publishing {MANIFEST}); nothing in it is trusted: delete it and run again")


def check_tree(storage: Storage, manifest: Manifest) -> list[str]:
    """Every disagreement between the files below the manifest's directory and the manifest (sizes
    and presence; contents are checked against the SHA-256 by whoever reads them whole)."""
    problems = []
    found = {}
    for info in storage.walk(manifest.root):
        rel = manifest.relative(storage, info.path)
        if rel == MANIFEST or rel.startswith(f"{PENDING_DIR}/"):
            continue
        found[rel] = info
    for rel, info in found.items():
        record = manifest.files.get(rel)
        if record is None:
            problems.append(f"{rel}: not listed in {MANIFEST} (ignored)")
        elif record.size != info.size:
            problems.append(f"{rel}: {info.size} bytes, but {MANIFEST} lists {record.size} (ignored)")
    problems += [f"{rel}: listed in {MANIFEST} but missing" for rel in sorted(manifest.files)
                 if rel not in found]
    return sorted(problems)
