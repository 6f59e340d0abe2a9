"""Storage on local disk: plain paths and file:// URLs. Segments are memory-mapped, not read."""
from __future__ import annotations

import mmap
import os
import shutil

from kfmt.hookspecs import hookimpl
from kfmt.storage import FileInfo, Storage, StorageBackend


class LocalStorage(Storage):
    sep = os.sep
    atomic_rename = True

    def join(self, *parts):
        return os.path.join(*parts)

    def basename(self, path):
        return os.path.basename(path.rstrip(os.sep)) or path

    def parent(self, path):
        return os.path.dirname(path.rstrip(os.sep))

    def listdir(self, path):
        with os.scandir(path) as it:
            return sorted((self._info(e.path, e.name, e.stat(follow_symlinks=False), e.is_dir())
                           for e in it), key=lambda i: i.name)

    def info(self, path):
        st = os.stat(path)
        return self._info(path, os.path.basename(path), st, os.path.isdir(path))

    @staticmethod
    def _info(path, name, st, is_dir):
        return FileInfo(name=name, path=path, size=st.st_size, is_dir=is_dir,
                        mtime_ms=st.st_mtime_ns // 1_000_000)

    def exists(self, path):
        return os.path.lexists(path)

    def isdir(self, path):
        return os.path.isdir(path)

    def _read(self, path, start, end):
        with open(path, "rb") as f:
            f.seek(start)
            return f.read(-1 if end is None else max(0, end - start))

    def _map(self, path):
        with open(path, "rb") as f:
            if os.fstat(f.fileno()).st_size == 0:
                return b""
            return memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))

    def makedirs(self, path):
        os.makedirs(path, exist_ok=True)

    def write(self, path, data, mtime_ms=None):
        with open(path, "wb") as f:
            f.write(data)
        if mtime_ms is not None:
            os.utime(path, ns=(mtime_ms * 1_000_000, mtime_ms * 1_000_000))

    def remove(self, path):
        os.remove(path)

    def remove_tree(self, path):
        shutil.rmtree(path, ignore_errors=True)

    def rename(self, src, dst):
        os.rename(src, dst)


class LocalBackend(StorageBackend):
    name = "local"

    def claims(self, url):
        return "://" not in url or url.startswith("file://")

    def open(self, url, options):
        path = url[len("file://"):] if url.startswith("file://") else url
        return LocalStorage(), os.path.abspath(path) if path else os.getcwd()


@hookimpl
def kfmt_register_storage(register):
    register(LocalBackend())
