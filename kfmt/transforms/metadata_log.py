"""The KRaft metadata log in a transform: carried byte for byte, never rewritten.

A KRaft node keeps its metadata log, `__cluster_metadata-0/`, in its metadata log directory beside
the partitions (docs/format.md §1.1), with the bootstrap snapshot `bootstrap.checkpoint` that
`kafka-storage format` wrote. LogManager does not load it; the raft layer does (KafkaMetadataLog.apply:
a UnifiedLog with `lastShutdownClean = false` and recovery point 0, so every start recovers it
whole, rebuilding its indexes, whatever the directory's clean-shutdown marker says), with its own
snapshots (`<end offset>-<epoch>.checkpoint`) and vote state (`quorum-state`). It is never compacted
and never deleted by retention (retention.ms and retention.bytes must be -1: snapshots replace old
segments), and its records are the cluster's topics, configs and features: a node started on a copy
without it has lost the cluster's metadata.

So every transform of a log directory (reindex, upgrade, resegment, recompress, compact, retain,
salvage, archive and restore) carries every file of it byte for byte, with its modification time,
as it carries `meta.properties`, whatever --topic/--partition select: the bootstrap snapshot and
the metadata log are the node's, not a topic's. No transform rewrites it; given as SRC on its own,
it is refused with the reason (a copy of the directory is what a transform would make of it).
"""
from __future__ import annotations

from kfmt.errors import UsageError
from kfmt.partition.layout import METADATA_LOG_DIR, PartitionDir, metadata_log
from kfmt.storage.store import Storage

CARRIED = ("the KRaft metadata log, which the raft layer loads and recovers itself (KafkaMetadataLog): "
           "carried byte for byte, never rewritten")
BOOTSTRAP_CHECKPOINT = "bootstrap.checkpoint"
BOOTSTRAP_REASON = ("the KRaft bootstrap snapshot kafka-storage format wrote (metadata.version and the "
                    "records a new cluster starts from)")


def split_metadata_log(parts: list[PartitionDir], log_dir: bool, storage: Storage,
                       path: str) -> tuple[list[PartitionDir], PartitionDir | None]:
    """(the partitions to transform, the metadata log to carry or None) of SRC at `path`. The
    metadata log is carried whatever --topic/--partition selected, as meta.properties is: it is the
    node's, not a topic's. SRC that is the metadata log itself is refused (UsageError)."""
    metadata = next((p for p in parts if p.name == METADATA_LOG_DIR), None)
    if metadata is None:
        return parts, metadata_log(storage, path) if log_dir else None
    if not log_dir:
        url = metadata.storage.url_of(metadata.path)
        raise UsageError(f"{url}: the KRaft metadata log, which no kfmt transform rewrites (the raft "
                         f"layer owns it: KafkaMetadataLog); give its log directory, where it is carried "
                         f"byte for byte, or copy this directory as it is")
    return [p for p in parts if p is not metadata], metadata


def metadata_log_files(metadata: PartitionDir) -> list[str]:
    """Every file of the metadata log, as paths relative to its log directory."""
    return [f"{metadata.name}/{name}" for name in sorted(metadata.files)]
