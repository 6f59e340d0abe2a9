"""`__consumer_offsets` record schemas of the group kinds after the classic one (Kafka 4.x's group
coordinator, group-coordinator/src/main/resources/common/message/): consumer groups of the new
protocol (KIP-848, record types 3-8), their regular expressions (16), share groups (KIP-932, 9-15)
and streams groups (KIP-1071, 17-24). Every key is a version-0 message of string fields; every
value is flexible from version 0.

The consumer and share group schemas are those a Kafka 4.1 broker writes (the realkafka4 corpus
holds every one but 4, 9 and 16 and is decoded to its last byte), with the tagged fields added since
(each commented). Every schema was compared field by field with Kafka's trunk of October 2025 (4.2 in
development) and agrees with it; the 4.3 additions (KIP-1263's assignmentTimestamp) come from Kafka's
4.3 sources. The streams group schemas are that trunk's, with no broker's records to check them
against; 9, 18 and 24 are no longer in that trunk (a newer broker does not write them) and are kept
for the logs of the brokers that did. docs/dump.md says which schema is confirmed by what.
"""
from __future__ import annotations

from kfmt.format.internal_topics.groups import key_schema
from kfmt.format.internal_topics.protocol import F, message


def _value(name: str, *fields):
    return message(name, "0", "0+", *fields)


def _group(kind: str):
    return key_schema(f"{kind}Key", "groupId")


def _member(kind: str):
    return key_schema(f"{kind}Key", "groupId", "memberId")


_TOPIC_PARTITIONS = (F("topicId", "uuid"), F("partitions", "[]int32"))
_PARTITION_METADATA = F("topics", "[]TopicMetadata", fields=(
    F("topicId", "uuid"),
    F("topicName", "string"),
    F("numPartitions", "int32"),
    F("partitionMetadata", "[]PartitionMetadata", fields=(  # not used after 4.0
        F("partition", "int32"), F("racks", "[]string"))),
))
_TOPIC_PARTITIONS_INFO = (F("topicId", "uuid"), F("topicName", "string"), F("partitions", "[]int32"))

CONSUMER_GROUP_RECORDS = {
    3: (_group("ConsumerGroupMetadata"), _value(
        "ConsumerGroupMetadataValue",
        F("epoch", "int32"),
        F("metadataHash", "int64", tag=0))),  # KIP-1101 (4.1): the hash of the subscribed topics' metadata
    4: (_group("ConsumerGroupPartitionMetadata"), _value(
        "ConsumerGroupPartitionMetadataValue", _PARTITION_METADATA)),
    5: (_member("ConsumerGroupMemberMetadata"), _value(
        "ConsumerGroupMemberMetadataValue",
        F("instanceId", "string", nullable="0+"),
        F("rackId", "string", nullable="0+"),
        F("clientId", "string"),
        F("clientHost", "string"),
        F("subscribedTopicNames", "[]string"),
        F("subscribedTopicRegex", "string", nullable="0+"),
        F("rebalanceTimeoutMs", "int32", default=-1),
        F("serverAssignor", "string", nullable="0+"),
        # declared `"default": null` (JSON null: no default), so a null here is not the default
        F("classicMemberMetadata", "ClassicMemberMetadata", nullable="0+", tag=0, fields=(
            F("sessionTimeoutMs", "int32"),
            F("supportedProtocols", "[]ClassicProtocol", fields=(
                F("name", "string"), F("metadata", "bytes"))))))),
    6: (_group("ConsumerGroupTargetAssignmentMetadata"), _value(
        "ConsumerGroupTargetAssignmentMetadataValue",
        F("assignmentEpoch", "int32"),
        F("assignmentTimestamp", "int64", tag=0))),  # KIP-1263 (4.3): when the assignment was computed
    7: (_member("ConsumerGroupTargetAssignmentMember"), _value(
        "ConsumerGroupTargetAssignmentMemberValue",
        F("topicPartitions", "[]TopicPartition", fields=_TOPIC_PARTITIONS))),
    8: (_member("ConsumerGroupCurrentMemberAssignment"), _value(
        "ConsumerGroupCurrentMemberAssignmentValue",
        F("memberEpoch", "int32"),
        F("previousMemberEpoch", "int32"),
        F("state", "int8"),
        F("assignedPartitions", "[]TopicPartitions", fields=_TOPIC_PARTITIONS),
        F("partitionsPendingRevocation", "[]TopicPartitions", fields=_TOPIC_PARTITIONS))),
    16: (key_schema("ConsumerGroupRegularExpressionKey", "groupId", "regularExpression"), _value(
        "ConsumerGroupRegularExpressionValue",
        F("topics", "[]string"),
        F("version", "int64"),
        F("timestamp", "int64"))),
}

SHARE_GROUP_RECORDS = {
    9: (_group("ShareGroupPartitionMetadata"), _value(
        "ShareGroupPartitionMetadataValue", _PARTITION_METADATA)),
    10: (_member("ShareGroupMemberMetadata"), _value(
        "ShareGroupMemberMetadataValue",
        F("rackId", "string", nullable="0+"),
        F("clientId", "string"),
        F("clientHost", "string"),
        F("subscribedTopicNames", "[]string"))),
    11: (_group("ShareGroupMetadata"), _value(
        "ShareGroupMetadataValue",
        F("epoch", "int32"),
        F("metadataHash", "int64"))),  # KIP-1101, not tagged: share groups were a preview
    12: (_group("ShareGroupTargetAssignmentMetadata"), _value(
        "ShareGroupTargetAssignmentMetadataValue", F("assignmentEpoch", "int32"))),
    13: (_member("ShareGroupTargetAssignmentMember"), _value(
        "ShareGroupTargetAssignmentMemberValue",
        F("topicPartitions", "[]TopicPartition", fields=_TOPIC_PARTITIONS))),
    14: (_member("ShareGroupCurrentMemberAssignment"), _value(
        "ShareGroupCurrentMemberAssignmentValue",
        F("memberEpoch", "int32"),
        F("previousMemberEpoch", "int32"),
        F("state", "int8"),
        F("assignedPartitions", "[]TopicPartitions", fields=_TOPIC_PARTITIONS))),
    # which partitions of which topics have share-group state (and their names, which
    # `kfmt offsets` uses to name a share group's partitions)
    15: (_group("ShareGroupStatePartitionMetadata"), _value(
        "ShareGroupStatePartitionMetadataValue",
        F("initializingTopics", "[]TopicPartitionsInfo", fields=_TOPIC_PARTITIONS_INFO),
        F("initializedTopics", "[]TopicPartitionsInfo", fields=_TOPIC_PARTITIONS_INFO),
        F("deletingTopics", "[]TopicInfo", fields=(F("topicId", "uuid"), F("topicName", "string"))))),
}

_TASK_IDS = (F("subtopologyId", "string"), F("partitions", "[]int32"))
_TOPIC_INFO = (
    F("name", "string"),
    F("partitions", "int32"),
    F("replicationFactor", "int16"),
    F("topicConfigs", "[]TopicConfig", fields=(F("key", "string"), F("value", "string"))),
)


def _tasks(*names: str) -> tuple:
    return tuple(F(name, "[]TaskIds", fields=_TASK_IDS) for name in names)


STREAMS_GROUP_RECORDS = {
    17: (_group("StreamsGroupMetadata"), _value(
        "StreamsGroupMetadataValue",
        F("epoch", "int32"),
        F("metadataHash", "int64"),  # KIP-1101; not tagged: the streams protocol was early access
        F("validatedTopologyEpoch", "int32", tag=0, default=-1),
        # the assignment configuration of the last group epoch bump (num.standby.replicas); declared
        # `"default": null` (JSON null: no default, so an empty list), as classicMemberMetadata above
        F("lastAssignmentConfigs", "[]LastAssignmentConfig", nullable="0+", tag=1,
          fields=(F("key", "string"), F("value", "string"))))),
    18: (_group("StreamsGroupPartitionMetadata"), _value(
        "StreamsGroupPartitionMetadataValue", _PARTITION_METADATA)),
    19: (_member("StreamsGroupMemberMetadata"), _value(
        "StreamsGroupMemberMetadataValue",
        F("instanceId", "string", nullable="0+"),
        F("rackId", "string", nullable="0+"),
        F("clientId", "string"),
        F("clientHost", "string"),
        F("rebalanceTimeoutMs", "int32", default=-1),
        F("topologyEpoch", "int32"),
        F("processId", "string"),
        F("userEndpoint", "Endpoint", nullable="0+", default=None,
          fields=(F("host", "string"), F("port", "uint16"))),
        F("clientTags", "[]KeyValue", fields=(F("key", "string"), F("value", "string"))))),
    20: (_group("StreamsGroupTargetAssignmentMetadata"), _value(
        "StreamsGroupTargetAssignmentMetadataValue",
        F("assignmentEpoch", "int32"),
        F("assignmentTimestamp", "int64", tag=0))),  # KIP-1263 (4.3), as for consumer groups
    21: (_member("StreamsGroupTargetAssignmentMember"), _value(
        "StreamsGroupTargetAssignmentMemberValue",
        *_tasks("activeTasks", "standbyTasks", "warmupTasks"))),
    22: (_member("StreamsGroupCurrentMemberAssignment"), _value(
        "StreamsGroupCurrentMemberAssignmentValue",
        F("memberEpoch", "int32"),
        F("previousMemberEpoch", "int32"),
        F("state", "int8"),
        *_tasks("activeTasks", "standbyTasks", "warmupTasks", "activeTasksPendingRevocation",
                "standbyTasksPendingRevocation", "warmupTasksPendingRevocation"))),
    23: (_group("StreamsGroupTopology"), _value(
        "StreamsGroupTopologyValue",
        F("epoch", "int32"),
        F("subtopologies", "[]Subtopology", fields=(
            F("subtopologyId", "string"),
            F("sourceTopics", "[]string"),
            F("sourceTopicRegex", "[]string"),
            F("stateChangelogTopics", "[]TopicInfo", fields=_TOPIC_INFO),
            F("repartitionSinkTopics", "[]string"),
            F("repartitionSourceTopics", "[]TopicInfo", fields=_TOPIC_INFO),
            F("copartitionGroups", "[]CopartitionGroup", fields=(
                F("sourceTopics", "[]int16"),
                F("sourceTopicRegex", "[]int16"),
                F("repartitionSourceTopics", "[]int16"))))))),
    24: (_group("StreamsGroupTargetAssignmentResolvedTopicIds"), _value(
        "StreamsGroupTargetAssignmentResolvedTopicIdsValue",
        F("assignmentEpoch", "int32"),
        F("resolvedTopicIdsBySubtopology", "[]ResolvedTopicIds", fields=(
            F("subtopologyId", "string"), F("topicIds", "[]uuid"))))),
}

# the record type whose key names a group of each kind (what `kfmt offsets` calls its kind)
GROUP_KIND_OF_TYPE = {2: "classic", 3: "consumer", 11: "share", 17: "streams"}
