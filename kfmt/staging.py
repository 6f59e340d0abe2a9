"""Atomic, lossless output: a destination is written in staging and published at once.

Local disk: files go to a hidden sibling directory, renamed onto DST on commit (atomic on POSIX).
Object storage (no atomic rename): files are written under DST and a manifest listing every file is
written last; readers of a kfmt-written prefix trust only what the manifest lists, so a run killed
part-way leaves nothing a reader would take for output. A failed run removes what it staged; the
source is never touched. DST must not exist, or be an empty directory.
"""
from __future__ import annotations

import hashlib
import json
import os
import uuid

from kfmt.errors import UsageError
from kfmt.storage import Storage

MANIFEST = "_kfmt_manifest.json"


class StagedOutput:
    def __init__(self, storage: Storage, dst: str):
        self.storage = storage
        self.dst = dst
        if storage.exists(dst) and (not storage.isdir(dst) or storage.listdir(dst)):
            raise UsageError(f"{storage.url_of(dst)}: the destination exists and is not empty")
        if storage.atomic_rename:
            parent, name = storage.parent(dst), storage.basename(dst)
            self.root = storage.join(parent, f".{name}.kfmt-staging-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        else:
            self.root = dst
        storage.makedirs(self.root)
        self.files: dict[str, dict] = {}  # relative path -> {"size", "sha256", "mtime_ms"}
        self.committed = False

    def path(self, rel: str) -> str:
        return self.storage.join(self.root, *rel.split("/"))

    def makedirs(self, rel: str) -> None:
        self.storage.makedirs(self.path(rel))

    def write(self, rel: str, data, mtime_ms: int | None = None) -> None:
        self.storage.write(self.path(rel), data, mtime_ms)
        self.files[rel] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                           "mtime_ms": mtime_ms}

    def commit(self) -> None:
        if self.storage.atomic_rename:
            self.storage.rename(self.root, self.dst)
        else:
            manifest = {"version": 1, "files": dict(sorted(self.files.items()))}
            self.storage.write(self.storage.join(self.dst, MANIFEST),
                               json.dumps(manifest, indent=1).encode())
        self.committed = True

    def abort(self) -> None:
        if not self.committed:
            self.storage.remove_tree(self.root)

    def __enter__(self) -> "StagedOutput":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.abort()
