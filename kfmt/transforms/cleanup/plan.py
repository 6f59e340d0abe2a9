"""What `kfmt retain` and `kfmt compact` share: the partitions of SRC as picklable units of work,
the offsets a broker keeps for them in its log directory, and the log directory's files in DST.

A broker's log directory records, per partition, offsets the cleanup policies depend on (reference
§11.2): `log-start-offset-checkpoint` (the log start offset, which DeleteRecords raises),
`replication-offset-checkpoint` (the high watermark: retention never deletes past it, the cleaner never
cleans past it) and `cleaner-offset-checkpoint` (where the dirty section of a compacted log starts).
For a log-directory SRC they are read from SRC; for a partition-directory SRC from the directory
beside it (its parent), where a broker's copy keeps them. Missing files or lines mean "no entry", as
for the broker.

DST gets the log directory's files the way `kfmt reindex` treats them (kfmt.transforms.directory_plan:
meta.properties copied, offset checkpoints reduced to the partitions written, .kafka_cleanshutdown
left out), except that the checkpoints a cleanup changes carry the new values: a new log start offset after retention,
the new first dirty offset after a cleaning.
"""
from __future__ import annotations

from dataclasses import dataclass

from kfmt.errors import UsageError
from kfmt.partition.checkpoints import checkpoint_text, read_offset_checkpoint
from kfmt.partition.layout import PartitionDir, find_partitions
from kfmt.partition.topic_identity import TargetTopics, TopicIdentity
from kfmt.storage.store import Storage, StorageSpec
from kfmt.transforms.directory_plan import DirectoryPlan, plan_directory

COMPACT, DELETE = "compact", "delete"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"


def cleanup_policy(value: str) -> frozenset[str]:
    """The topic's cleanup.policy as LogConfig reads it: a comma-separated list of `delete` and
    `compact` (duplicates and spaces ignored). An empty policy, which Kafka 4.2 documents as infinite
    retention (KIP-1161), neither deletes by time or size nor compacts: only DeleteRecords (the log
    start offset) removes data, as with `compact` alone (UnifiedLog.deleteOldSegments)."""
    policy = frozenset(p.strip() for p in value.split(",") if p.strip())
    if policy - {COMPACT, DELETE}:
        raise UsageError(f"cleanup.policy {value!r}: expected a comma-separated list of "
                         f"{DELETE!r} and {COMPACT!r}, or nothing (infinite retention)")
    return policy


@dataclass(frozen=True)
class PartitionJob:
    """One partition to clean up: where it is, where it goes, and its log directory's offsets
    (picklable, for a Spark task)."""

    source: StorageSpec
    path: str  # the partition directory in the source storage
    rel: str  # its directory inside DST ('' when DST is the partition directory itself)
    label: str
    log_start_offset: int | None  # log-start-offset-checkpoint entry
    high_watermark: int | None  # replication-offset-checkpoint entry
    cleaner_offset: int | None  # cleaner-offset-checkpoint entry
    checkpoints_from: str | None  # the directory the entries were read from
    identity: TopicIdentity | None = None  # the partition.metadata to write (kfmt.partition.topic_identity)

    def open(self) -> PartitionDir:
        storage, _ = self.source.open()
        return find_partitions(storage, self.path)[0]

    def rel_path(self, name: str) -> str:
        return f"{self.rel}/{name}" if self.rel else name


@dataclass
class CleanupPlan:
    """The partitions of a run and the log directory files of DST (from kfmt.transforms.directory_plan)."""

    layout: DirectoryPlan
    jobs: list[PartitionJob]

    @property
    def log_dir(self) -> bool:
        return self.layout.log_dir


def plan_cleanup(src_storage: Storage, src_path: str, dst_storage: Storage, dst_path: str,
                 topic: str | None = None, partition: int | None = None,
                 target: TargetTopics | None = None) -> CleanupPlan:
    layout = plan_directory(src_storage, src_path, dst_storage, dst_path, topic, partition, target=target)
    checkpoints_dir = src_path if layout.log_dir else src_storage.parent(src_path)
    offsets = {name: _checkpoint(src_storage, checkpoints_dir, name)
               for name in (LOG_START_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT,
                            CLEANER_OFFSET_CHECKPOINT)}
    found = any(offsets.values())
    spec = src_storage.spec or StorageSpec.of(src_storage.url_of(src_path))
    jobs = []
    for p in layout.partitions:
        tp = (p.part.topic, p.part.partition)
        jobs.append(PartitionJob(
            spec, p.part.path, p.rel, p.part.label,
            offsets[LOG_START_OFFSET_CHECKPOINT].get(tp),
            offsets[REPLICATION_OFFSET_CHECKPOINT].get(tp),
            offsets[CLEANER_OFFSET_CHECKPOINT].get(tp),
            src_storage.url_of(checkpoints_dir) if found else None, p.identity))
    return CleanupPlan(layout, jobs)


def _checkpoint(storage: Storage, directory: str, name: str) -> dict:
    if not directory:
        return {}
    path = storage.join(directory, name)
    if not storage.exists(path) or storage.isdir(path):
        return {}
    return read_offset_checkpoint(checkpoint_text(storage.read(path), storage.url_of(path)),
                                  storage.url_of(path))


def check_destination_empty(storage: Storage, path: str) -> None:
    """What a run would refuse, checked by a dry run too: DST must not exist, or be empty."""
    if storage.exists(path) and (not storage.isdir(path) or storage.listdir(path)):
        raise UsageError(f"{storage.url_of(path)}: the destination exists and is not empty")
