"""`__remote_log_metadata` record schemas (tiered storage, KIP-405: Kafka's
storage/src/main/resources/message/, the records TopicBasedRemoteLogMetadataManager writes). A value
is framed as a metadata record is (uvarint frame version 1, api key, version); there is no key."""
from __future__ import annotations

from kfmt.format.internal_topics.protocol import F, message

_TOPIC_ID_PARTITION = (F("name", "string"), F("id", "uuid"), F("partition", "int32"))
_SEGMENT_ID = F("remoteLogSegmentId", "RemoteLogSegmentIdEntry", fields=(
    F("topicIdPartition", "TopicIdPartitionEntry", fields=_TOPIC_ID_PARTITION),
    F("id", "uuid")))
_LEADER_EPOCHS = F("segmentLeaderEpochs", "[]SegmentLeaderEpochEntry", fields=(
    F("leaderEpoch", "int32"), F("offset", "int64")))
_CUSTOM_METADATA = F("customMetadata", "bytes", nullable="0+", default=None)


def _record(name: str, *fields):
    return message(name, "0", "0+", *fields)


# api key -> (class whose toString is printed, schema)
TYPES = {
    0: ("RemoteLogSegmentMetadata", _record(
        "RemoteLogSegmentMetadataRecord",
        _SEGMENT_ID,
        F("startOffset", "int64"), F("endOffset", "int64"), F("brokerId", "int32"),
        F("maxTimestampMs", "int64"), F("eventTimestampMs", "int64"), _LEADER_EPOCHS,
        F("segmentSizeInBytes", "int32"), _CUSTOM_METADATA, F("remoteLogSegmentState", "int8"),
        F("txnIndexEmpty", "bool", tag=0))),
    1: ("RemoteLogSegmentMetadataUpdate", _record(
        "RemoteLogSegmentMetadataUpdateRecord",
        _SEGMENT_ID,
        F("brokerId", "int32"), F("eventTimestampMs", "int64"), _CUSTOM_METADATA,
        F("remoteLogSegmentState", "int8"))),
    2: ("RemotePartitionDeleteMetadata", _record(
        "RemotePartitionDeleteMetadataRecord",
        F("topicIdPartition", "TopicIdPartitionEntry", fields=_TOPIC_ID_PARTITION),
        F("brokerId", "int32"), F("eventTimestampMs", "int64"), F("remotePartitionDeleteState", "int8"))),
    3: ("RemoteLogSegmentMetadataSnapshot", _record(
        "RemoteLogSegmentMetadataSnapshotRecord",
        F("segmentId", "uuid"),
        F("startOffset", "int64"), F("endOffset", "int64"), F("brokerId", "int32"),
        F("maxTimestampMs", "int64"), F("eventTimestampMs", "int64"), _LEADER_EPOCHS,
        F("segmentSizeInBytes", "int32"), _CUSTOM_METADATA, F("remoteLogSegmentState", "int8"),
        F("txnIndexEmpty", "bool", tag=0))),
}

SEGMENT_STATES = ("COPY_SEGMENT_STARTED", "COPY_SEGMENT_FINISHED", "DELETE_SEGMENT_STARTED",
                  "DELETE_SEGMENT_FINISHED")  # RemoteLogSegmentState, by id
PARTITION_DELETE_STATES = ("DELETE_PARTITION_MARKED", "DELETE_PARTITION_STARTED",
                           "DELETE_PARTITION_FINISHED")  # RemotePartitionDeleteState, by id
