"""Storage on local disk: plain paths and file:// URLs. Segments are memory-mapped, not read.

Writes are durable before they count: a streamed file is fsynced when it is closed, and `sync()`
fsyncs the directories of a tree, so that a staged output renamed into place (kfmt.storage.staging) survives
a crash of the machine, not only of the process. Modification times are kept (docs/format.md §17 item 10).
"""
from __future__ import annotations

import errno
import mmap
import os
import shutil
import stat
import warnings

from kfmt.errors import KfmtWarning
from kfmt.plugin.hookspecs import hookimpl
from kfmt.storage.direct_io import DirectFile
from kfmt.storage.store import FileInfo, Storage, StorageBackend, WriteStream


class LocalWriteStream(WriteStream):
    def __init__(self, path: str, storage: Storage | None = None):
        self.path = path
        self.storage = storage
        self._file = DirectFile(path)  # the bulk of a large file past the page cache (kfmt.storage.direct_io)

    def write(self, data) -> int:
        return self._file.write(data)

    def close(self) -> None:
        self._file.close(sync=True)

    def abort(self) -> None:
        self._file.abort()
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
        real = os.path.realpath(path)
        with os.scandir(path) as it:
            listed = [self._listed(entry, real) for entry in it]
        return sorted((info for info in listed if info is not None), key=lambda i: i.name)

    def _listed(self, entry, real_dir: str):
        """The entry's FileInfo, or None (with a warning) for what kfmt does not follow: a symbolic
        link leading out of the directory (or to it, or nowhere), and what is neither a regular file
        nor a directory (reading a FIFO would wait forever)."""
        link = False
        try:
            link = entry.is_symlink()
            if link:
                target = os.path.realpath(entry.path)
                if target == real_dir or os.path.commonpath([target, real_dir]) != real_dir:
                    return _skipped(entry.path, f"a symbolic link leading out of its directory (to {target})")
            st = entry.stat()  # through a link that stays inside
        except OSError as err:
            if not link and isinstance(err, FileNotFoundError):
                return None  # renamed or deleted since the directory was read (a running broker's)
            return _skipped(entry.path, f"a symbolic link that leads nowhere ({err.strerror})")
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
            return _skipped(entry.path, "neither a regular file nor a directory")
        return self._info(entry.path, entry.name, st, stat.S_ISDIR(st.st_mode))

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
        with _open_regular(path) as f:
            f.seek(start)
            return f.read(-1 if end is None else max(0, end - start))

    def _map(self, path):
        with _open_regular(path) as f:
            if os.fstat(f.fileno()).st_size == 0:
                return b""
            return memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))

    def makedirs(self, path):
        os.makedirs(path, exist_ok=True)

    def open_write(self, path):
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        return LocalWriteStream(path, self)

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


def _open_regular(path: str):
    """A regular file opened for reading; anything else (a FIFO, a device) is refused without
    waiting on it."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", path)
    return os.fdopen(fd, "rb")


def _skipped(path: str, why: str) -> None:
    warnings.warn(f"{path}: {why}: skipped", KfmtWarning, stacklevel=3)
    return None


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
