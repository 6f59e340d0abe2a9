"""`__consumer_offsets` record schemas of classic groups and offset commits (Kafka's group
coordinator: group-coordinator/src/main/resources/common/message/, KIP-915 flexible versions).

A record key starts with an int16: in Kafka 3.6's words the key version, in 4.x's the record type
(CoordinatorRecordType); 0 and 1 are offset commits (LegacyOffsetCommitKey, OffsetCommitKey, the
same fields), 2 a classic group's metadata (GroupMetadataKey); the types of the new group kinds
are in group_kinds.py. The key message itself is read at version 0. Values carry their own
int16 version. The member subscription and assignment bytes of consumer groups ("protocolType":
"consumer") are ConsumerProtocol messages, again with an int16 version in front.
"""
from __future__ import annotations

from kfmt.format.internal_topics.protocol import F, message


def key_schema(name: str, *fields) -> object:
    """A coordinator record key: version 0, not flexible, string fields unless given as F."""
    return message(name, "0", None, *(f if not isinstance(f, str) else F(f, "string") for f in fields))


OFFSET_COMMIT_KEY = key_schema("OffsetCommitKey", "group", "topic", F("partition", "int32"))
LEGACY_OFFSET_COMMIT_KEY = key_schema("LegacyOffsetCommitKey", "group", "topic", F("partition", "int32"))
GROUP_METADATA_KEY = key_schema("GroupMetadataKey", "group")

LEGACY_OFFSET_COMMIT_VALUE = message(
    "LegacyOffsetCommitValue", "0", None,
    F("offset", "int64"),
    F("metadata", "string"),
    F("commitTimestamp", "int64"),
)

OFFSET_COMMIT_VALUE = message(
    "OffsetCommitValue", "0-4", "4+",
    F("offset", "int64"),
    F("leaderEpoch", "int32", "3+", default=-1),
    F("metadata", "string"),
    F("commitTimestamp", "int64"),
    F("expireTimestamp", "int64", "1", default=-1),
    F("topicId", "uuid", "4+", tag=0),  # the committed partition's topic id (Kafka 4.2 trunk; absent before)
)

GROUP_METADATA_VALUE = message(
    "GroupMetadataValue", "0-4", "4+",
    F("protocolType", "string"),
    F("generation", "int32"),
    F("protocol", "string", nullable="0+"),
    F("leader", "string", nullable="0+"),
    F("currentStateTimestamp", "int64", "2+", default=-1),
    F("members", "[]MemberMetadata", fields=(
        F("memberId", "string"),
        F("groupInstanceId", "string", "3+", nullable="3+", default=None),
        F("clientId", "string"),
        F("clientHost", "string"),
        F("rebalanceTimeout", "int32", "1+", default=-1),
        F("sessionTimeout", "int32"),
        F("subscription", "bytes"),
        F("assignment", "bytes"),
    )),
)

_TOPIC_PARTITIONS = (F("topic", "string"), F("partitions", "[]int32"))

CONSUMER_PROTOCOL_ASSIGNMENT = message(
    "ConsumerProtocolAssignment", "0-3", None,
    F("assignedPartitions", "[]TopicPartition", fields=_TOPIC_PARTITIONS),
    F("userData", "bytes", nullable="0+", default=None),
)

CONSUMER_PROTOCOL_SUBSCRIPTION = message(
    "ConsumerProtocolSubscription", "0-3", None,
    F("topics", "[]string"),
    F("userData", "bytes", nullable="0+", default=None),
    F("ownedPartitions", "[]TopicPartition", "1+", fields=_TOPIC_PARTITIONS),
    F("generationId", "int32", "2+", default=-1),
    F("rackId", "string", "3+", nullable="3+", default=None),
)

# CoordinatorRecordType -> (key, value) of the classic records
CLASSIC_RECORDS = {
    0: (LEGACY_OFFSET_COMMIT_KEY, LEGACY_OFFSET_COMMIT_VALUE),
    1: (OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE),
    2: (GROUP_METADATA_KEY, GROUP_METADATA_VALUE),
}
