"""Reading the log directory of a running broker: files that change or go while kfmt reads them.

A partition is planned from one listing of its directory, then read file by file. Meanwhile a running
broker appends to the last segment, rolls it, deletes the oldest segments (UnifiedLog.deleteSegments
renames them `.deleted`, then unlinks them) and replaces cleaned ones (LocalLog.replaceSegments renames a
`.swap` file onto the first replaced segment's name). What that means for a reader:

* the last segment of the listing grows (or has rolled since): it is read as it is when opened, up
  to its last complete entry (kfmt.format.segment: a torn tail there is what log recovery truncates);
* any other segment never changes while it exists: one that is gone when opened, or whose size is not
  the listed one (a cleaned replacement, a truncation), is `SegmentGone`. The records read before it
  are all correct and contiguous; a reader ends the partition there with one warning (streaming
  readers: cat, export), reads the partition again from a new listing (readers that report only
  at the end: info, verify, export's transaction task), or fails in one line (the data source,
  whose tasks cannot end a partition for each other);
* index files are read as copies, never mapped: a broker appends to the active segment's and trims
  them on roll. An index file gone is no index (the segment is scanned).

Only stores that memory-map (local disk) are checked for sizes: a log directory on object storage is
a copy, not a running broker.
"""
from __future__ import annotations

import errno

from kfmt.errors import KfmtError
from kfmt.storage.store import Storage

# How often a whole-partition reader (info, verify) starts a partition again after a file went.
RETRIES = 3


class SegmentGone(KfmtError):
    """A segment file the listing named is gone or was replaced while the partition was read."""

    def __init__(self, file: str, why: str):
        super().__init__(f"{file}: {why} while being read (the broker deleted or replaced it: "
                         f"retention or the log cleaner)")
        self.file, self.why = file, why


def is_gone(err: BaseException) -> bool:
    """A storage failure that means the file is no longer there."""
    return isinstance(err, FileNotFoundError) or getattr(err, "errno", None) == errno.ENOENT


def maps_files(storage: Storage) -> bool:
    return type(storage)._map is not Storage._map


def segment_bytes(storage: Storage, path: str, file: str, listed_size: int, is_last: bool,
                  start: int = 0, end: int | None = None, mapped: bool = True) -> tuple[object, int]:
    """(bytes of the segment file holding [start, end), the file position of their first byte): the
    whole file where the store maps files, `mapped` allows it and `start` is 0 (a map holds the file
    even if it is deleted next), else the range. Raises SegmentGone for a file that is gone, or not the listed
    size (the last segment may have grown: a map of it holds what was appended since)."""
    try:
        local = maps_files(storage)
        if local and mapped and start == 0:
            data = storage.map(path)
            _check_size(file, len(data), listed_size, is_last)
            return data, 0
        if local:  # a seek: only the bytes from `start` are read, the size is asked for
            _check_size(file, storage.info(path).size, listed_size, is_last)
        return storage.read(path, start, listed_size if end is None else end), start
    except SegmentGone:
        raise
    except OSError as err:
        if is_gone(err):
            raise SegmentGone(file, "deleted") from None
        raise


def _check_size(file: str, size: int, listed_size: int, is_last: bool) -> None:
    if size != listed_size and not (is_last and size > listed_size):
        raise SegmentGone(file, f"{size} bytes, not the {listed_size} listed: replaced")


def read_companion(storage: Storage, path: str):
    """An index file's bytes, or None when it is gone (its segment is being deleted or replaced:
    readers scan the segment instead)."""
    try:
        return storage.read(path)
    except OSError as err:
        if is_gone(err):
            return None
        raise


def stopped_warning(label: str, gone: str, next_offset: int | None) -> str:
    """The one line a streaming reader gives when it ends a partition early (`gone`: the
    SegmentGone's message)."""
    where = f"up to offset {next_offset - 1}" if next_offset is not None else "nothing"
    return f"{gone}: {label} read {where}; run again to read on"


def read_whole(part, read):
    """`read(part)` for a reader that reports only at the end (info, verify): when a file goes while
    it runs (SegmentGone, or any of the partition's other files gone), the partition is listed
    again and read anew, at most RETRIES more times."""
    from kfmt.partition.layout import relisted

    for attempt in range(RETRIES + 1):
        try:
            return read(part)
        except (SegmentGone, OSError) as err:
            if attempt == RETRIES or not (isinstance(err, SegmentGone) or is_gone(err)):
                raise
            part = relisted(part)
