"""`__share_group_state` record schemas (Kafka's share coordinator, KIP-932,
share-coordinator/src/main/resources/common/message/): record type 0 is a ShareSnapshot (the whole
state of a share-partition), 1 a ShareUpdate (a change to it); both keyed by group, topic id and
partition, with the same key fields."""
from __future__ import annotations

from kfmt.format.internal_topics.groups import key_schema
from kfmt.format.internal_topics.protocol import F, message

_KEY = ("groupId", F("topicId", "uuid"), F("partition", "int32"))
_STATE_BATCH = (
    F("firstOffset", "int64"),
    F("lastOffset", "int64"),
    F("deliveryState", "int8"),  # 0 available, 2 acknowledged, 4 archived
    F("deliveryCount", "int16"),
)

SHARE_SNAPSHOT_VALUE = message(
    "ShareSnapshotValue", "0", "0+",
    F("snapshotEpoch", "int32"),
    F("stateEpoch", "int32"),
    F("leaderEpoch", "int32"),
    F("startOffset", "int64"),
    F("createTimestamp", "int64"),
    F("writeTimestamp", "int64"),
    F("stateBatches", "[]StateBatch", fields=_STATE_BATCH),
)

SHARE_UPDATE_VALUE = message(
    "ShareUpdateValue", "0", "0+",
    F("snapshotEpoch", "int32"),
    F("leaderEpoch", "int32"),
    F("startOffset", "int64"),  # -1: not changed by this update
    F("stateBatches", "[]StateBatch", fields=_STATE_BATCH),
)

# CoordinatorRecordType -> (key, value)
SHARE_STATE_RECORDS = {
    0: (key_schema("ShareSnapshotKey", *_KEY), SHARE_SNAPSHOT_VALUE),
    1: (key_schema("ShareUpdateKey", *_KEY), SHARE_UPDATE_VALUE),
}
