"""Whether a KRaft broker would set each partition directory aside as a stray (docs/format.md §10,
§12.6; kfmt.partition.topic_identity holds the rule): checked against a cluster's metadata, the log
directory's own `__cluster_metadata-0` or the one `--cluster-metadata` names. Notes, not problems:
the data is sound; which cluster loads it decides. A partition without partition.metadata is noted
by the checkpoint checks already (kfmt.inspect.verify.checkpoints). A log directory whose
meta.properties names another cluster than `--cluster-metadata`'s is noted too: a node of that
cluster refuses to start on it (MetaPropertiesEnsemble.verify)."""
from __future__ import annotations

from kfmt.errors import DataError
from kfmt.partition.cluster_topics import ClusterTopics, metadata_dir, read_cluster_topics
from kfmt.partition.layout import METADATA_LOG_DIR, PARTITION_METADATA, PartitionDir
from kfmt.partition.meta_properties import read_node_identity
from kfmt.partition.topic_identity import source_topic_id, stray_consequence, stray_reason
from kfmt.storage.store import Storage, open_storage

from .problems import VerifyReport


def cluster_of(storage: Storage, path: str, log_dir: bool, cluster_metadata: str | None,
               storage_options: dict | None, report: VerifyReport) -> ClusterTopics | None:
    """The cluster metadata to check against: `cluster_metadata` if given, else a log directory's
    own metadata log, else None. One that cannot be read is a problem of its own."""
    try:
        if cluster_metadata is not None:
            meta_storage, meta_path = open_storage(cluster_metadata, storage_options)
            return read_cluster_topics(meta_storage, meta_path)
        if log_dir:
            metadata_dir(storage, path)  # a DataError when the log directory has none
            return read_cluster_topics(storage, path)
    except DataError as err:
        if cluster_metadata is not None:
            report.data_error("cluster-metadata", err, cluster_metadata)
    return None


def check_topic_ids(parts: list[PartitionDir], cluster: ClusterTopics, report: VerifyReport) -> None:
    for part in parts:
        if part.name == METADATA_LOG_DIR:
            continue  # the raft layer's, never in the metadata image it holds (nor LogManager's to load)
        _content, _mtime, topic_id = source_topic_id(part)
        if topic_id is None or part.topic is None:
            continue  # no file, or one that does not parse: the checkpoint checks said so
        reason = stray_reason(part.topic, part.partition, topic_id, cluster, cluster.node_id)
        if reason is not None:
            report.note("stray", f"{reason}: {stray_consequence(part.name)}",
                        part.display(PARTITION_METADATA))


def check_cluster_id(storage: Storage, path: str, cluster: ClusterTopics, report: VerifyReport) -> None:
    """A note when the log directory at `path` belongs to another cluster than `cluster`."""
    node = read_node_identity(storage, path)
    if node is None or node.cluster_id is None or cluster.cluster_id in (None, node.cluster_id):
        return
    report.note("cluster-id", f"cluster.id {node.cluster_id} is not the cluster of the metadata given "
                              f"({cluster.cluster_id}, {cluster.source}): a node of that cluster refuses to "
                              f"start on this log directory (Invalid cluster.id); move its partition "
                              f"directories into one of that node's log directories", node.file)
