"""Storage through fsspec: s3://, memory://, gcs://, ... Anything with a scheme that fsspec knows.

Object stores have no atomic rename and (mostly) no settable mtimes; writers publish there with a
manifest written last (kfmt.staging), and mtimes travel in that manifest.
"""
from __future__ import annotations

import datetime

from kfmt.hookspecs import hookimpl
from kfmt.storage import FileInfo, Storage, StorageBackend


def _mtime_ms(entry: dict) -> int | None:
    for key in ("mtime", "LastModified", "last_modified", "created", "updated"):
        value = entry.get(key)
        if value is None:
            continue
        if isinstance(value, datetime.datetime):
            if value.tzinfo is None:
                value = value.replace(tzinfo=datetime.timezone.utc)
            return int(value.timestamp() * 1000)
        if isinstance(value, (int, float)):
            return int(value * 1000)
        if isinstance(value, str):
            try:
                return int(datetime.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000)
            except ValueError:
                continue
    return None


class FsspecStorage(Storage):
    def __init__(self, fs, protocol: str):
        super().__init__()
        self.fs = fs
        self.protocol = protocol

    def url_of(self, path):
        return path if "://" in path else f"{self.protocol}://{path.lstrip('/') if self.protocol != 'memory' else path}"

    def _entry(self, e: dict) -> FileInfo:
        path = e["name"].rstrip("/")
        return FileInfo(name=path.rsplit("/", 1)[-1], path=path, size=int(e.get("size") or 0),
                        is_dir=e.get("type") == "directory", mtime_ms=_mtime_ms(e))

    def listdir(self, path):
        path = path.rstrip("/")
        entries = [self._entry(e) for e in self.fs.ls(path, detail=True, refresh=True)]
        return sorted((e for e in entries if e.path != path), key=lambda i: i.name)

    def info(self, path):
        return self._entry(self.fs.info(path))

    def exists(self, path):
        return self.fs.exists(path)

    def isdir(self, path):
        return self.fs.isdir(path)

    def _read(self, path, start, end):
        return self.fs.cat_file(path, start=start, end=end)

    def makedirs(self, path):
        self.fs.makedirs(path, exist_ok=True)

    def write(self, path, data, mtime_ms=None):
        self.fs.pipe_file(path, bytes(data))

    def remove(self, path):
        self.fs.rm_file(path)

    def remove_tree(self, path):
        if self.fs.exists(path):
            self.fs.rm(path, recursive=True)

    def rename(self, src, dst):
        self.fs.mv(src, dst, recursive=True)


class FsspecBackend(StorageBackend):
    name = "fsspec"

    def claims(self, url):
        return "://" in url and not url.startswith("file://")

    def open(self, url, options):
        import fsspec.core

        fs, path = fsspec.core.url_to_fs(url, **options)
        protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
        return FsspecStorage(fs, protocol), path.rstrip("/") or "/"


@hookimpl
def kfmt_register_storage(register):
    register(FsspecBackend())
