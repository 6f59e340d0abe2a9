"""The topics of a KRaft metadata log (kfmt.partition.cluster_topics) from records a peer encoded:
kafka-python's codec of Kafka's message definitions writes TopicRecord, PartitionRecord,
PartitionChangeRecord and RemoveTopicRecord at every version kfmt declares, framed as
MetadataRecordSerde frames them; kfmt's image must follow them as a broker's does (the replicas of a
PartitionChangeRecord only when it carries them), and a record it cannot read is one error naming it.
The real logs of both corpora are checked against `kafka-topics --describe` in
tests/transforms/test_kafka4_targets.py."""
from __future__ import annotations

import base64
import uuid

import pytest
from support.kafka_messages import peer_encode

from kfmt.errors import DataError
from kfmt.format.internal_topics.metadata import TYPES
from kfmt.partition.cluster_topics import ClusterTopics, apply_record

TOPIC_ID = uuid.UUID("6b9b3d4e-0c1a-4b7e-9a55-1f2e3d4c5b6a").bytes


def framed(api_key: int, version: int, values: dict) -> bytes:
    """A metadata record value: frame version 1, api key, version (unsigned varints, all < 128 here)."""
    schema = TYPES[api_key][1]
    full = {f.name: f.default_value() for f in schema.fields} | values
    return bytes([1, api_key, version]) + peer_encode(schema, full, version)


def image(*records: bytes) -> ClusterTopics:
    topics = ClusterTopics("test")
    for record in records:
        apply_record(topics, record)
    return topics


def topic():
    return framed(2, 0, {"name": "orders", "topicId": TOPIC_ID})


def partition(version: int, number: int, replicas: list[int]) -> bytes:
    values = {"partitionId": number, "topicId": TOPIC_ID, "replicas": replicas, "isr": replicas, "leader": replicas[0]}
    if version >= 1:
        values["directories"] = [uuid.uuid4().bytes for _ in replicas]
    return framed(3, version, values)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_topics_and_partitions_at_every_partition_record_version(version):
    topics = image(topic(), partition(version, 0, [1, 2]), partition(version, 1, [3]))
    tid = topics.ids["orders"]
    assert tid == base64.urlsafe_b64encode(TOPIC_ID).decode().rstrip("=")  # Uuid.toString
    assert topics.partitions[tid] == {0: [1, 2], 1: [3]}


@pytest.mark.parametrize("version", [0, 1, 2])
def test_a_partition_change_moves_replicas_only_when_it_carries_them(version):
    leader_only = framed(5, version, {"partitionId": 0, "topicId": TOPIC_ID, "leader": 2})
    moved = framed(5, version, {"partitionId": 0, "topicId": TOPIC_ID, "replicas": [4, 5]})
    topics = image(topic(), partition(0, 0, [1, 2]), leader_only)
    assert topics.partitions[topics.ids["orders"]] == {0: [1, 2]}
    apply_record(topics, moved)
    assert topics.partitions[topics.ids["orders"]] == {0: [4, 5]}


def test_a_removed_topic_is_gone_and_other_records_change_nothing():
    config = framed(4, 0, {"resourceType": 2, "resourceName": "orders", "name": "retention.ms", "value": "1"})
    topics = image(topic(), partition(0, 0, [1]), config)
    assert list(topics.ids) == ["orders"]
    apply_record(topics, framed(9, 0, {"topicId": TOPIC_ID}))
    assert topics.ids == {} and topics.partitions == {}


@pytest.mark.parametrize("value,says", [
    (bytes([1, 3, 9]) + b"\0" * 40, "version 9 is not a version of PartitionRecord"),
    (bytes([2, 2, 0]), "unknown frame version 2"),
    (bytes([1, 2, 0, 7]), "needed at byte"),  # a TopicRecord cut short
])
def test_a_record_it_cannot_read_is_an_error_naming_it(value, says):
    with pytest.raises(DataError, match=says):
        apply_record(ClusterTopics("test"), value)
