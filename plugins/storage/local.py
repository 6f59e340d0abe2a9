"""Storage on local disk: plain paths and file:// URLs. Segments are memory-mapped, not read.

Writes are durable before they count: a streamed file is fsynced when it is closed, and `sync()`
fsyncs the directories of a tree, so that a staged output renamed into place (kfmt.staging) survives
a crash of the machine, not only of the process. Modification times are kept (reference §17 item 10).
"""
from __future__ import annotations

import mmap
import os
import shutil

from kfmt.hookspecs import hookimpl
from kfmt.storage import FileInfo, Storage, StorageBackend, WriteStream


class LocalWriteStream(WriteStream):
    def __init__(self, path: str):
        self.path = path
        self._file = open(path, "wb")

    def write(self, data) -> int:
        return self._file.write(data)

    def close(self) -> None:
        if self._file.closed:
            return
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()

    def abort(self) -> None:
        if not self._file.closed:
            self._file.close()
        try:
            os.remove(self.path)
        except FileNotFoundError:
            pass


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class LocalStorage(Storage):
    sep = os.sep
    atomic_rename = True
    keeps_mtime = True

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

    def open_write(self, path):
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        return LocalWriteStream(path)

    def set_mtime(self, path, mtime_ms):
        os.utime(path, ns=(mtime_ms * 1_000_000, mtime_ms * 1_000_000))
        return True

    def sync(self, path):
        for dirpath, _dirs, _files in os.walk(path):
            fsync_dir(dirpath)

    def remove(self, path):
        os.remove(path)

    def remove_tree(self, path):
        shutil.rmtree(path, ignore_errors=True)

    def rename(self, src, dst):
        """Atomic on POSIX within one filesystem: a directory replaces `dst` only if `dst` is an
        empty directory (otherwise OSError), so a published output is never overwritten."""
        os.rename(src, dst)
        for parent in {os.path.dirname(src), os.path.dirname(dst)}:
            fsync_dir(parent or ".")


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
