"""`__consumer_offsets` record schemas (Kafka 3.6's group coordinator, KIP-915 flexible versions).

The key's int16 version says what the record is: 0/1 an OffsetCommitKey (a committed offset),
2 a GroupMetadataKey (a classic group's state). Values carry their own int16 version. The
member subscription and assignment bytes of consumer groups ("protocolType": "consumer") are
ConsumerProtocol messages, again with an int16 version in front.
"""
from __future__ import annotations

from kfmt.inspect.dump.decoders.protocol import F, message

OFFSET_COMMIT_KEY = message(
    "OffsetCommitKey", "0-1", None,
    F("group", "string"),
    F("topic", "string"),
    F("partition", "int32"),
)

GROUP_METADATA_KEY = message(
    "GroupMetadataKey", "2", None,
    F("group", "string", "2+"),
)

OFFSET_COMMIT_VALUE = message(
    "OffsetCommitValue", "0-4", "4+",
    F("offset", "int64"),
    F("leaderEpoch", "int32", "3+", default=-1),
    F("metadata", "string"),
    F("commitTimestamp", "int64"),
    F("expireTimestamp", "int64", "1", default=-1),
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
        F("groupInstanceId", "string", "3+", nullable="3+"),
        F("clientId", "string"),
        F("clientHost", "string"),
        F("rebalanceTimeout", "int32", "1+"),
        F("sessionTimeout", "int32"),
        F("subscription", "bytes"),
        F("assignment", "bytes"),
    )),
)

_TOPIC_PARTITIONS = (F("topic", "string"), F("partitions", "[]int32"))

CONSUMER_PROTOCOL_ASSIGNMENT = message(
    "ConsumerProtocolAssignment", "0-3", None,
    F("assignedPartitions", "[]TopicPartition", fields=_TOPIC_PARTITIONS),
    F("userData", "bytes", nullable="0+"),
)

CONSUMER_PROTOCOL_SUBSCRIPTION = message(
    "ConsumerProtocolSubscription", "0-3", None,
    F("topics", "[]string"),
    F("userData", "bytes", nullable="0+"),
    F("ownedPartitions", "[]TopicPartition", "1+", fields=_TOPIC_PARTITIONS),
    F("generationId", "int32", "2+", default=-1),
    F("rackId", "string", "3+", nullable="3+"),
)
