"""The topics a KRaft cluster knows, read from a copy of its metadata log (`__cluster_metadata-0`):
each topic's id and, per partition, the brokers it is assigned to (docs/format.md §10, §12.6).

This is the part of the metadata image a broker's stray-replica check looks at (`LogManager`,
`TopicsImage.isStrayReplica`), and what a transform needs to stamp the target topic's id into
`partition.metadata`. It is deliberately minimal: four record types, and of each only the leading
fields, which no version changed. `kfmt dump --cluster-metadata-decoder` decodes everything (in
kfmt.inspect, above the transforms that need this, hence a reader of its own down here).

How the image is rebuilt, as a restarting controller or broker rebuilds it: the newest snapshot
(`<end offset 20 digits>-<epoch 10 digits>.checkpoint`, every record below its end offset), then the
log's records from the snapshot's end offset on, in order. A record value is framed by
MetadataRecordSerde: unsigned varint frame version (1), api key (the record type), record version,
then the record in the flexible encoding (compact strings and arrays: unsigned varint length + 1;
tagged fields at the end). The records read:
* TopicRecord (2): name, topicId;
* PartitionRecord (3): partitionId, topicId, replicas;
* PartitionChangeRecord (5): partitionId, topicId, and replicas when tagged field 2 holds them;
* RemoveTopicRecord (9): topicId (the topic and its partitions are gone).
"""
from __future__ import annotations

import base64
import re
from dataclasses import dataclass, field

from kfmt.errors import DataError
from kfmt.format import segment
from kfmt.format.wire import INT32
from kfmt.partition.layout import METADATA_LOG_DIR
from kfmt.storage.store import Storage

SNAPSHOT_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")
LOG_NAME = re.compile(r"^(\d{20})\.log$")
TOPIC_RECORD, PARTITION_RECORD, PARTITION_CHANGE_RECORD, REMOVE_TOPIC_RECORD = 2, 3, 5, 9
REPLICAS_TAG = 2  # PartitionChangeRecord's tagged field holding a new replica list


@dataclass
class ClusterTopics:
    """Topic name -> id, and topic id -> partition -> replica broker ids."""

    source: str  # the metadata directory read (messages name it)
    ids: dict[str, str] = field(default_factory=dict)
    partitions: dict[str, dict[int, list[int]]] = field(default_factory=dict)
    node_id: int | None = None  # the node whose log directory held the metadata (meta.properties)

    def topic_of(self, topic_id: str) -> str | None:
        return next((name for name, tid in self.ids.items() if tid == topic_id), None)


class _Reader:
    """The flexible protocol encoding, as far as these records need it."""

    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            if self.pos >= len(self.data) or shift > 28:
                raise DataError("a varint runs past the end of the record")
            byte = self.data[self.pos]
            self.pos += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise DataError("a field runs past the end of the record")
        self.pos += n
        return self.data[self.pos - n:self.pos]

    def int32(self) -> int:
        return INT32.unpack(self.take(INT32.size))[0]

    def uuid(self) -> str:
        return base64.urlsafe_b64encode(self.take(16)).decode("ascii").rstrip("=")

    def compact_string(self) -> str:
        n = self.uvarint() - 1
        return self.take(n).decode("utf-8") if n >= 0 else ""

    def compact_int32s(self) -> list[int]:
        n = self.uvarint() - 1
        return [v for (v,) in INT32.iter_unpack(self.take(INT32.size * n))] if n > 0 else []

    def tagged(self) -> dict[int, bytes]:
        return {self.uvarint(): self.take(self.uvarint()) for _ in range(self.uvarint())}


def apply_record(topics: ClusterTopics, value: bytes) -> None:
    """One metadata record's effect on the topics (other record types change nothing here)."""
    r = _Reader(bytes(value))
    if r.uvarint() != 1:
        raise DataError("unknown metadata record frame version (expected 1)")
    api_key, _version = r.uvarint(), r.uvarint()
    if api_key == TOPIC_RECORD:
        name = r.compact_string()
        topics.ids[name] = r.uuid()
        topics.partitions.setdefault(topics.ids[name], {})
    elif api_key in (PARTITION_RECORD, PARTITION_CHANGE_RECORD):
        partition, topic_id = r.int32(), r.uuid()
        if api_key == PARTITION_RECORD:
            topics.partitions.setdefault(topic_id, {})[partition] = r.compact_int32s()
        else:
            replicas = r.tagged().get(REPLICAS_TAG)
            if replicas is not None:
                topics.partitions.setdefault(topic_id, {})[partition] = _Reader(replicas).compact_int32s()
    elif api_key == REMOVE_TOPIC_RECORD:
        topic_id = r.uuid()
        topics.partitions.pop(topic_id, None)
        name = topics.topic_of(topic_id)
        if name is not None:
            del topics.ids[name]


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
    topics = ClusterTopics(storage.url_of(directory), node_id=_node_id(storage, storage.parent(directory)))
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


def _node_id(storage: Storage, log_dir: str) -> int | None:
    """node.id of the log directory's meta.properties, when there is one (docs/format.md §11.4)."""
    if not log_dir:
        return None
    path = storage.join(log_dir, "meta.properties")
    if not storage.exists(path):
        return None
    m = re.search(r"^\s*node\.id\s*[=:]\s*(-?\d+)\s*$", bytes(storage.read(path)).decode("latin-1"), re.M)
    return int(m[1]) if m else None
