"""Which segments a broker recovers when it loads a partition, rebuilding their index files.

LogManager.loadLogs looks for `.kafka_cleanshutdown` in the log directory (docs/format.md §11.3). With
it, LogLoader trusts every segment's `.index`, `.timeindex` and `.txnindex`. Without it (a crash, a
copy of a running broker), LogLoader.recoverLog recovers every segment from the one holding the
partition's recovery point (its `recovery-point-offset-checkpoint` entry; 0 without one, or when the
file cannot be read) to the end: LogSegment.recover resets the segment's indexes and rebuilds them
from its batches, so whatever those files held (a preallocated zero tail, no final time-index entry,
0 bytes) is never read. The KRaft metadata log is always recovered whole (KafkaMetadataLog.apply
loads it with `lastShutdownClean = false` and recovery point 0).

kfmt knows a partition's log directory when PATH is one, or when the partition directory's parent
holds a file of a log directory (layout.LOG_DIR_FILES); a partition directory copied on its own is
judged as a broker trusting its files (the strict reading).
"""
from __future__ import annotations

from dataclasses import dataclass

from kfmt.errors import DataError
from kfmt.partition.checkpoints import checkpoint_text, read_offset_checkpoint
from kfmt.partition.layout import (
    CLEAN_SHUTDOWN,
    LOG_DIR_FILES,
    METADATA_LOG_DIR,
    RECOVERY_POINT_CHECKPOINT,
    PartitionDir,
    Segment,
)
from kfmt.storage.store import Storage


@dataclass(frozen=True)
class LoadRecovery:
    """From which offset a broker loading the partition recovers its segments (None: it trusts
    them all), and why, in words for a note."""

    from_offset: int | None
    why: str = ""

    def rebuilds(self, segments: list[Segment], i: int) -> bool:
        """Whether segment i is recovered: it holds the recovery point or lies after it (LogSegments
        .values(recoveryPoint, Long.MAX_VALUE) starts at the floor segment of the recovery point)."""
        if self.from_offset is None:
            return False
        following = segments[i + 1].base_offset if i + 1 < len(segments) else None
        return following is None or following > self.from_offset


TRUSTED = LoadRecovery(None)


def load_recoveries(storage: Storage, log_dir: str | None,
                    parts: list[PartitionDir]) -> dict[str, LoadRecovery]:
    """Partition path -> its LoadRecovery. `log_dir`: the log directory the partitions are in, None
    when it is not known."""
    listing = _log_dir_listing(storage, log_dir)
    clean = listing is None or CLEAN_SHUTDOWN in listing
    points = {} if clean else _recovery_points(storage, log_dir, listing)
    out = {}
    for part in parts:
        if part.name == METADATA_LOG_DIR:
            out[part.path] = LoadRecovery(0, "Kafka rebuilds it on load: the raft layer recovers the KRaft "
                                             "metadata log whole on every start (KafkaMetadataLog.apply: "
                                             "lastShutdownClean = false, recovery point 0)")
        elif clean:
            out[part.path] = TRUSTED
        else:
            point = points.get((part.topic, part.partition), 0)
            out[part.path] = LoadRecovery(point, f"Kafka rebuilds it on load: with no {CLEAN_SHUTDOWN} in the "
                                                 f"log directory, LogLoader.recoverLog recovers the segments "
                                                 f"from the recovery point {point} on")
    return out


def _log_dir_listing(storage: Storage, log_dir: str | None) -> set[str] | None:
    """The names of the log directory's own files, None when it is not known to be one."""
    if not log_dir:
        return None
    try:
        names = {info.name for info in storage.listdir(log_dir) if not info.is_dir}
    except OSError:  # a parent the user may not list (a bucket's root)
        return None
    return names if names & set(LOG_DIR_FILES) else None


def _recovery_points(storage: Storage, log_dir: str, listing: set[str]) -> dict:
    """The recovery-point checkpoint's entries; {} when it is missing or unreadable (LogManager then
    recovers from offset 0: `verify` reports the file's own problems)."""
    if RECOVERY_POINT_CHECKPOINT not in listing:
        return {}
    path = storage.join(log_dir, RECOVERY_POINT_CHECKPOINT)
    try:
        return read_offset_checkpoint(checkpoint_text(storage.read(path), storage.url_of(path)),
                                      storage.url_of(path))
    except (DataError, OSError):
        return {}
