"""Writing large local files past the page cache (O_DIRECT).

kfmt's transforms write whole segments that nothing reads again during the run, and every file is
fsynced before it counts (kfmt.storage.store), so a write cannot finish before the disk has the data
either way. Through the page cache, though, each written byte is first copied into freshly allocated
cache pages: on the project's VM that copy costs 1.5 to 3 ms of CPU per MB (the hypervisor backs
each new page on first touch; docs/performance.md), against 0.2 ms per MB for O_DIRECT, and the
cached copy evicts the very segments the run is reading. So `DirectFile` writes the bulk of a large
file with O_DIRECT:

* the first CHUNK bytes of a file go through the page cache as usual (small files, most companion
  files, never touch O_DIRECT);
* from the first 4 KiB boundary after that, bytes are gathered in an aligned buffer (CHUNK bytes,
  taken from a small pool so its pages are not fresh ones each time) and written a CHUNK at a time
  with O_DIRECT; a large write whose memory is aligned (a memory-mapped segment) goes straight from
  the caller's buffer, with no copy at all;
* the unaligned end is written through the page cache at close, then the file is fsynced (or, in
  a staging area, later with the rest of it: Storage.defer_sync).

Where O_DIRECT is refused (tmpfs and some FUSE filesystems do, with EINVAL), the file is written the
ordinary way from there on. The bytes in the file are the same either way.
"""
from __future__ import annotations

import errno
import mmap
import os
import threading

import numpy as np

ALIGN = 4096  # O_DIRECT wants buffers, file offsets and lengths aligned to the logical block size
CHUNK = 4 << 20
_POOL_SIZE = 4
_pool: list[mmap.mmap] = []
_pool_lock = threading.Lock()


def _take_buffer() -> mmap.mmap:
    with _pool_lock:
        if _pool:
            return _pool.pop()
    return mmap.mmap(-1, CHUNK)  # anonymous: page-aligned


def _give_back(buffer: mmap.mmap) -> None:
    with _pool_lock:
        if len(_pool) < _POOL_SIZE:
            _pool.append(buffer)
            return
    buffer.close()


def _aligned(view: memoryview) -> bool:
    return np.frombuffer(view, np.uint8).ctypes.data % ALIGN == 0


class DirectFile:
    """A new local file written sequentially, its bulk with O_DIRECT (see the module docstring)."""

    def __init__(self, path: str):
        self.path = path
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666)
        self.offset = 0  # bytes handed to the kernel so far
        self.closed = False
        self._direct_fd: int | None = None
        self._can_direct = hasattr(os, "O_DIRECT")
        self._buffer: mmap.mmap | None = None
        self._view: memoryview | None = None
        self._fill = 0  # bytes of the file [offset, offset + fill) waiting in the buffer

    def fileno(self) -> int:
        return self.fd

    def write(self, data) -> int:
        view = memoryview(data)
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
        n = len(view)
        if self._direct_fd is None:
            view = self._write_cached(view)
        while len(view):
            if self._fill == 0 and len(view) >= ALIGN and _aligned(view):
                k = len(view) - len(view) % ALIGN
                self._write_direct(view[:k])
                view = view[k:]
                continue
            take = min(CHUNK - self._fill, len(view))
            self._view[self._fill:self._fill + take] = view[:take]
            self._fill += take
            view = view[take:]
            if self._fill == CHUNK:
                self._fill = 0
                self._write_direct(self._view)
        return n

    def close(self, sync: bool = True) -> None:
        """Write what is left, fsync (unless told not to) and close."""
        if self.closed:
            return
        try:
            if self._fill:
                self._pwrite(self.fd, self._view[:self._fill])
                self._fill = 0
            if sync:
                os.fsync(self.fd)
        finally:
            self._release()

    def abort(self) -> None:
        if not self.closed:
            self._release()

    # --- the two ways in ---
    def _write_cached(self, view: memoryview) -> memoryview:
        """Through the page cache while the file is small; returns what is left for O_DIRECT."""
        if not self._can_direct or self.offset + len(view) < CHUNK:
            self._pwrite(self.fd, view)
            return view[len(view):]
        lead = -self.offset % ALIGN  # up to the next aligned file offset
        self._pwrite(self.fd, view[:lead])
        try:
            self._direct_fd = os.open(self.path, os.O_WRONLY | os.O_DIRECT | os.O_CLOEXEC)
        except OSError as err:
            if err.errno not in (errno.EINVAL, errno.EOPNOTSUPP):
                raise
            self._can_direct = False
            self._pwrite(self.fd, view[lead:])
            return view[len(view):]
        self._buffer = _take_buffer()
        self._view = memoryview(self._buffer)
        return view[lead:]

    def _write_direct(self, view: memoryview) -> None:
        if self._direct_fd is not None:
            try:
                while len(view):
                    k = os.pwrite(self._direct_fd, view, self.offset)
                    self.offset += k
                    view = view[k:]
                    if k % ALIGN:  # a short write off the alignment: the rest the ordinary way
                        break
            except OSError as err:
                if err.errno != errno.EINVAL:
                    raise
            if len(view):
                self._stop_direct()
        if len(view):
            self._pwrite(self.fd, view)

    def _pwrite(self, fd: int, view: memoryview) -> None:
        while len(view):
            k = os.pwrite(fd, view, self.offset)
            self.offset += k
            view = view[k:]

    def _stop_direct(self) -> None:
        if self._direct_fd is not None:
            os.close(self._direct_fd)
            self._direct_fd = None
        self._can_direct = False

    def _release(self) -> None:
        self.closed = True
        if self._direct_fd is not None:
            os.close(self._direct_fd)
            self._direct_fd = None
        os.close(self.fd)
        if self._buffer is not None:
            self._view.release()
            _give_back(self._buffer)
            self._buffer = self._view = None
