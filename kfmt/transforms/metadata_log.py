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

Unless the output is for another cluster (`--cluster-metadata` of a cluster with another id, or
topic ids other than the source's: kfmt.partition.topic_identity.TargetTopics.other_cluster). A node
of that cluster could not use the source node's files: it refuses a log directory whose
meta.properties names another cluster or node (MetaPropertiesEnsemble.verify: "Invalid cluster.id",
"Stored node id ... doesn't match"), and a data directory holding `__cluster_metadata-0`
(KafkaRaftServer.initializeLogDirs: "Found unexpected metadata location"); as its metadata log
directory it would hold the other cluster's metadata. So those files are left out, with one warning
saying what to do instead: a directory without meta.properties is one `kafka-storage.sh format
--ignore-formatted` formats for its cluster (Formatter: the log directories without one), or its
partition directories move into a target broker's log directory.
"""
from __future__ import annotations

from dataclasses import dataclass

from kfmt.errors import UsageError
from kfmt.partition.layout import METADATA_LOG_DIR, PartitionDir, metadata_log
from kfmt.partition.meta_properties import META_PROPERTIES, read_node_identity
from kfmt.partition.topic_identity import TargetTopics, TopicIdentity
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


def is_node_file(name: str) -> bool:
    """A file of the source node itself (relative to its log directory): meta.properties, the
    bootstrap snapshot, the metadata log's files."""
    return name in (META_PROPERTIES, BOOTSTRAP_CHECKPOINT) or name.startswith(METADATA_LOG_DIR + "/")


@dataclass(frozen=True)
class LeftOut:
    """SRC's node files left out of an output for another cluster: why, per file, and the run's warning."""

    reason: str
    warning: str


def node_files_left_out(target: TargetTopics, storage: Storage, path: str, identities: list[TopicIdentity],
                        destination: str) -> LeftOut | None:
    """Whether the output of the log directory SRC at `path` is for another cluster than SRC's node
    (TargetTopics.other_cluster), and what to say about leaving its node files out; None: carry them."""
    why = target.other_cluster(read_node_identity(storage, path), identities)
    if not why:
        return None
    return LeftOut(f"left out: the output is for another cluster ({why})",
                   f"{destination}: SRC's {META_PROPERTIES}, {BOOTSTRAP_CHECKPOINT} and {METADATA_LOG_DIR} left "
                   f"out: the output is for another cluster ({why}), and a Kafka node refuses a log directory "
                   f"whose {META_PROPERTIES} names another cluster or node (and a data directory holding "
                   f"{METADATA_LOG_DIR}); move its partition directories into a log directory of a target "
                   f"broker, or format it for the target (kafka-storage.sh format --cluster-id ID --config "
                   f"server.properties --ignore-formatted)")
