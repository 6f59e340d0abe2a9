"""The topics a KRaft cluster knows, read from a copy of its metadata log (`__cluster_metadata-0`):
each topic's id and, per partition, the brokers it is assigned to (docs/format.md §10, §12.6).

This is the part of the metadata image a broker's stray-replica check looks at (`LogManager`,
`TopicsImage.isStrayReplica`), and what a transform needs to stamp the target topic's id into
`partition.metadata`. The records are read by the same declared schemas and reader as
`kfmt dump --cluster-metadata-decoder` (kfmt.format.internal_topics.metadata): a record version kfmt does not
know is an error naming it, not a guess.

How the image is rebuilt, as a restarting controller or broker rebuilds it: the newest snapshot
(`<end offset 20 digits>-<epoch 10 digits>.checkpoint`, every record below its end offset), then the
log's records from the snapshot's end offset on, in order. The records that change it:
* TopicRecord (2): name, topicId;
* PartitionRecord (3): partitionId, topicId, replicas;
* PartitionChangeRecord (5): partitionId, topicId, and replicas when the record changes them (a
  tagged field, null when unchanged);
* RemoveTopicRecord (9): topicId (the topic and its partitions are gone);
* FeatureLevelRecord (12): name, featureLevel (metadata.version and the other finalized features,
  KIP-584/KIP-778; a level of 0 removes the feature, as FeaturesDelta.replay does).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from kfmt.errors import DataError
from kfmt.format import segment
from kfmt.format.internal_topics.metadata import TYPES
from kfmt.format.internal_topics.protocol import kafka_uuid, read_frame, read_message
from kfmt.partition.layout import METADATA_LOG_DIR
from kfmt.partition.meta_properties import read_node_identity
from kfmt.storage.store import Storage

SNAPSHOT_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")
LOG_NAME = re.compile(r"^(\d{20})\.log$")
TOPIC_RECORD, PARTITION_RECORD, PARTITION_CHANGE_RECORD, REMOVE_TOPIC_RECORD = 2, 3, 5, 9
FEATURE_LEVEL_RECORD = 12
APPLIED = (TOPIC_RECORD, PARTITION_RECORD, PARTITION_CHANGE_RECORD, REMOVE_TOPIC_RECORD, FEATURE_LEVEL_RECORD)


@dataclass
class ClusterTopics:
    """Topic name -> id, and topic id -> partition -> replica broker ids."""

    source: str  # the metadata directory read (messages name it)
    ids: dict[str, str] = field(default_factory=dict)
    partitions: dict[str, dict[int, list[int]]] = field(default_factory=dict)
    node_id: int | None = None  # the node whose log directory held the metadata (meta.properties)
    cluster_id: str | None = None  # that directory's cluster.id: the cluster this metadata is
    features: dict[str, int] = field(default_factory=dict)  # finalized feature -> level (metadata.version...)

    def topic_of(self, topic_id: str) -> str | None:
        return next((name for name, tid in self.ids.items() if tid == topic_id), None)


def apply_record(topics: ClusterTopics, value: bytes) -> None:
    """One metadata record's effect on the topics (other record types change nothing here)."""
    api_key, version, body = read_frame(bytes(value), "metadata record")
    if api_key not in APPLIED:
        return
    schema = TYPES[api_key][1]
    record = read_message(schema, body, version, schema.name)
    if api_key == FEATURE_LEVEL_RECORD:
        if record["featureLevel"]:
            topics.features[record["name"]] = record["featureLevel"]
        else:
            topics.features.pop(record["name"], None)
        return
    topic_id = kafka_uuid(record["topicId"])
    if api_key == TOPIC_RECORD:
        topics.ids[record["name"]] = topic_id
        topics.partitions.setdefault(topic_id, {})
    elif api_key == REMOVE_TOPIC_RECORD:
        topics.partitions.pop(topic_id, None)
        name = topics.topic_of(topic_id)
        if name is not None:
            del topics.ids[name]
    elif record["replicas"] is not None:  # a PartitionChangeRecord's is null when they did not change
        topics.partitions.setdefault(topic_id, {})[record["partitionId"]] = record["replicas"]


def metadata_dir(storage: Storage, path: str) -> str:
    """`path` itself when it is a metadata log directory, else its `__cluster_metadata-0` child."""
    if storage.isdir(path) and storage.url_of(path).rstrip("/").endswith(METADATA_LOG_DIR):
        return path
    child = storage.join(path, METADATA_LOG_DIR)
    if storage.isdir(child):
        return child
    raise DataError(f"{storage.url_of(path)}: neither a {METADATA_LOG_DIR} directory nor a log directory "
                    f"holding one (a copy of the target cluster's KRaft metadata log)")


def read_cluster_topics(storage: Storage, path: str) -> ClusterTopics:
    """The topics of the metadata log at `path` (a `__cluster_metadata-0` directory or the log
    directory holding it): the newest snapshot, then the log from its end offset."""
    directory = metadata_dir(storage, path)
    files = {info.name: info for info in storage.listdir(directory) if not info.is_dir}
    snapshots = sorted((int(m[1]), name) for name in files if (m := SNAPSHOT_NAME.match(name)))
    logs = sorted((int(m[1]), name) for name in files if (m := LOG_NAME.match(name)))
    node = read_node_identity(storage, storage.parent(directory))
    topics = ClusterTopics(storage.url_of(directory), node_id=node and node.node_id,
                           cluster_id=node and node.cluster_id)
    start = 0
    if snapshots:
        start, name = snapshots[-1]
        _replay(storage, files[name].path, topics, 0, last=False)
    for i, (_base, name) in enumerate(logs):
        _replay(storage, files[name].path, topics, start, last=i == len(logs) - 1)
    return topics


def _replay(storage: Storage, path: str, topics: ClusterTopics, from_offset: int, last: bool) -> None:
    file = storage.url_of(path)
    for batch in segment.batches(storage.map(path), file, recover_tail=last):
        if batch.header.is_control or batch.header.last_offset < from_offset:
            continue
        offsets, values = batch.records.column(0).to_pylist(), batch.records.column(3).to_pylist()
        for offset, value in zip(offsets, values):
            if offset < from_offset or value is None:
                continue
            try:
                apply_record(topics, value)
            except DataError as err:
                raise err.located(file=file, base_position=batch.header.position, offset=offset) from None
