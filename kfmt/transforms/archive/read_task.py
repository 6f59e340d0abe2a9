"""The task of `kfmt archive` (kfmt.transforms.archive.upload): files of SRC read, described and put
into the archive, on whichever engine runs the tasks (picklable: ArchiveTask in, FileResults out)."""
from __future__ import annotations

import hashlib
import warnings
from dataclasses import dataclass

from kfmt.errors import KfmtWarning
from kfmt.storage.manifest import FileRecord
from kfmt.storage.store import StorageSpec
from kfmt.transforms.archive.archive_format import archived_segment, complete_prefix
from kfmt.transforms.archive.destination import ArchiveTarget, Upload
from kfmt.transforms.archive.generations import object_key
from kfmt.transforms.archive.incremental import SourceFile


@dataclass(frozen=True)
class ArchiveTask:
    source: StorageSpec
    files: tuple[SourceFile, ...]
    target: ArchiveTarget
    deep: bool = False  # segments checked record by record (archive_format.archived_segment)


@dataclass(frozen=True)
class FileResult:
    rel: str
    source_size: int  # of the source file as read (an active segment's object may be shorter)
    upload: Upload | None  # None: the file was gone when the task came to read it
    notes: tuple[str, ...] = ()


def archive_files(task: ArchiveTask) -> list[FileResult]:
    """One task: read each file of SRC, describe it if it is a segment, put it into the archive
    unless a generation holds these bytes already. A file gone by then is read where a live broker
    moves it (read_live), else skipped with a note."""
    storage, _path = task.source.open()
    writer = task.target.writer()
    out = []
    for f in task.files:
        data = read_live(storage, f.path, f.size)
        if data is None:
            out.append(FileResult(f.rel, f.size, None, (
                f"{f.display}: gone before it could be read (the broker deleted or replaced it): "
                f"skipped; the archive keeps the version an earlier generation holds, if any",)))
            continue
        source_size, notes = len(data), []
        if f.active:
            cut = complete_prefix(data, f.display)
            if cut < len(data):
                if any(bytes(data[cut:])):
                    notes.append(f"{f.display}: the active segment archived up to its last complete "
                                 f"entry ({len(data) - cut} byte(s) after position {cut} left out)")
                data = data[:cut]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", KfmtWarning)
            facts = None if f.base_offset is None else archived_segment(data, f.display, f.rel,
                                                                        f.base_offset, f.active, task.deep)
        notes += [str(w.message) for w in caught if issubclass(w.category, KfmtWarning)]
        sha256 = hashlib.sha256(data).hexdigest()
        key, there = object_key(f.rel, sha256, f.versions, f.natural_taken)
        if there:
            upload = Upload(FileRecord(key, len(data), sha256, f.mtime_ms), "archived", facts)
        else:
            upload = writer.put(key, data, f.mtime_ms, facts, sha256)
        out.append(FileResult(f.rel, source_size, upload, tuple(notes)))
    return out


SWAP, DELETED = ".swap", ".deleted"


def read_live(storage, path: str, listed_size: int):
    """The bytes of a file of SRC, or None when they are gone. A running broker moves a segment's
    bytes to another name rather than changing them in place, so a file gone from the listed name is
    read where it went, if it has the listed size there (the same bytes):
    * a `.swap` file is renamed onto the segment's own name (LocalLog.replaceSegments): read there;
    * any other segment file is renamed `.deleted` (retention, or a segment the cleaner merged:
      LocalLog.deleteSegmentFiles) and unlinked only `file.delete.delay.ms` later: read the
      `.deleted` file.
    Skipping instead would leave the offsets of that file out of this generation although SRC held
    them all along (the segments a `.swap` replaced are not listed; a merged segment's records are in
    a segment this run may have read before the cleaner replaced it)."""
    try:
        return storage.map(path)
    except FileNotFoundError:
        pass
    moved = path[:-len(SWAP)] if path.endswith(SWAP) else path + DELETED
    try:
        data = storage.map(moved)
    except FileNotFoundError:
        return None
    # another size: not the listed file (a swap removed rather than renamed leaves the old segment;
    # a later cleaning replaced it again): skipped, the latest generation's version stays
    return data if len(data) == listed_size else None
