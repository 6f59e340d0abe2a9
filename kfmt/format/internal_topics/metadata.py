"""KRaft `__cluster_metadata` record schemas, as Kafka's metadata/src/main/resources/common/metadata/
declares them (record versions up to Kafka 4.x's; the security and configuration records are in
metadata_security.py).

Each record value is framed by MetadataRecordSerde: uvarint frame version (1), uvarint api key
(the record type), uvarint record version, then the record, flexible in every version. TYPES maps
an api key to (MetadataRecordType name, schema); read_metadata_record reads one value. Both
`kfmt dump --cluster-metadata-decoder` and the topic ids of `--cluster-metadata`
(kfmt.partition.cluster_topics) read the log through them.
"""
from __future__ import annotations

from dataclasses import dataclass

from kfmt.errors import DataError
from kfmt.format.internal_topics.metadata_security import SECURITY_TYPES
from kfmt.format.internal_topics.protocol import F, message, read_frame, read_message


def _record(name: str, valid: str, *fields):
    return message(name, valid, "0+", *fields)


_REPLICAS = "[]int32"
_ENDPOINT = (F("name", "string"), F("host", "string"), F("port", "uint16"), F("securityProtocol", "int16"))
_FEATURE = (F("name", "string"), F("minSupportedVersion", "int16"), F("maxSupportedVersion", "int16"))

CLUSTER_TYPES = {
    0: ("REGISTER_BROKER_RECORD", _record(
        "RegisterBrokerRecord", "0-3",
        F("brokerId", "int32"),
        F("isMigratingZkBroker", "bool", "2+"),
        F("incarnationId", "uuid"),
        F("brokerEpoch", "int64"),
        F("endPoints", "[]BrokerEndpoint", fields=_ENDPOINT),
        F("features", "[]BrokerFeature", fields=_FEATURE),
        F("rack", "string", nullable="0+"),
        F("fenced", "bool", default=True),
        F("inControlledShutdown", "bool", "1+"),
        F("logDirs", "[]uuid", "3+", tag=0))),  # KIP-858
    1: ("UNREGISTER_BROKER_RECORD", _record(
        "UnregisterBrokerRecord", "0",
        F("brokerId", "int32"), F("brokerEpoch", "int64"))),
    2: ("TOPIC_RECORD", _record(
        "TopicRecord", "0",
        F("name", "string"), F("topicId", "uuid"))),
    3: ("PARTITION_RECORD", _record(
        "PartitionRecord", "0-2",
        F("partitionId", "int32", default=-1),
        F("topicId", "uuid"),
        F("replicas", _REPLICAS),
        F("isr", _REPLICAS),
        F("removingReplicas", _REPLICAS),
        F("addingReplicas", _REPLICAS),
        F("leader", "int32", default=-1),
        F("leaderRecoveryState", "int8", tag=0),
        F("leaderEpoch", "int32", default=-1),
        F("partitionEpoch", "int32", default=-1),
        F("directories", "[]uuid", "1+"),  # KIP-858
        # eligible leader replicas (KIP-966), on by default for new clusters from 4.1
        F("eligibleLeaderReplicas", _REPLICAS, "2+", nullable="2+", tag=1, default=None),
        F("lastKnownElr", _REPLICAS, "2+", nullable="2+", tag=2, default=None))),
    5: ("PARTITION_CHANGE_RECORD", _record(
        "PartitionChangeRecord", "0-2",
        F("partitionId", "int32", default=-1),
        F("topicId", "uuid"),
        F("isr", _REPLICAS, nullable="0+", tag=0, default=None),
        F("leader", "int32", tag=1, default=-2),
        F("replicas", _REPLICAS, nullable="0+", tag=2, default=None),
        F("removingReplicas", _REPLICAS, nullable="0+", tag=3, default=None),
        F("addingReplicas", _REPLICAS, nullable="0+", tag=4, default=None),
        F("leaderRecoveryState", "int8", tag=5, default=-1),
        F("directories", "[]uuid", "1+", nullable="1+", tag=8, default=None),
        F("eligibleLeaderReplicas", _REPLICAS, "2+", nullable="2+", tag=6, default=None),
        F("lastKnownElr", _REPLICAS, "2+", nullable="2+", tag=7, default=None))),
    7: ("FENCE_BROKER_RECORD", _record(
        "FenceBrokerRecord", "0", F("id", "int32"), F("epoch", "int64"))),
    8: ("UNFENCE_BROKER_RECORD", _record(
        "UnfenceBrokerRecord", "0", F("id", "int32"), F("epoch", "int64"))),
    9: ("REMOVE_TOPIC_RECORD", _record(
        "RemoveTopicRecord", "0", F("topicId", "uuid"))),
    12: ("FEATURE_LEVEL_RECORD", _record(
        "FeatureLevelRecord", "0", F("name", "string"), F("featureLevel", "int16"))),
    15: ("PRODUCER_IDS_RECORD", _record(
        "ProducerIdsRecord", "0",
        F("brokerId", "int32"), F("brokerEpoch", "int64", default=-1), F("nextProducerId", "int64"))),
    17: ("BROKER_REGISTRATION_CHANGE_RECORD", _record(
        "BrokerRegistrationChangeRecord", "0-2",
        F("brokerId", "int32"),
        F("brokerEpoch", "int64"),
        F("fenced", "int8", tag=0),
        F("inControlledShutdown", "int8", "1+", tag=1),
        F("logDirs", "[]uuid", "2+", tag=2))),
    20: ("NO_OP_RECORD", _record("NoOpRecord", "0")),
    21: ("ZK_MIGRATION_STATE_RECORD", _record(
        "ZkMigrationStateRecord", "0", F("zkMigrationState", "int8"))),
    23: ("BEGIN_TRANSACTION_RECORD", _record(
        "BeginTransactionRecord", "0", F("name", "string", nullable="0+", tag=0, default=None))),
    24: ("END_TRANSACTION_RECORD", _record("EndTransactionRecord", "0")),
    25: ("ABORT_TRANSACTION_RECORD", _record(
        "AbortTransactionRecord", "0", F("reason", "string", nullable="0+", tag=0, default=None))),
    27: ("REGISTER_CONTROLLER_RECORD", _record(
        "RegisterControllerRecord", "0",
        F("controllerId", "int32"),
        F("incarnationId", "uuid"),
        F("zkMigrationReady", "bool"),
        F("endPoints", "[]ControllerEndpoint", fields=_ENDPOINT),
        F("features", "[]ControllerFeature", fields=_FEATURE))),
    28: ("CLEAR_ELR_RECORD", _record(  # Kafka 4.0
        "ClearElrRecord", "0", F("topicName", "string"))),
    29: ("UNREGISTER_CONTROLLER_RECORD", _record(  # Kafka 4.1
        "UnregisterControllerRecord", "0", F("controllerId", "int32"))),
}

TYPES = {**CLUSTER_TYPES, **SECURITY_TYPES}


@dataclass(frozen=True)
class MetadataRecord:
    api_key: int
    name: str  # MetadataRecordType's (TOPIC_RECORD)
    version: int
    fields: dict  # {field name: value}, as kfmt.format.internal_topics.protocol.read_message gives them
    schema: object


def read_metadata_record(value: bytes | None, exact: bool = False,
                         known: dict[int, int] | None = None) -> MetadataRecord:
    """One metadata record value (MetadataRecordSerde framing). `known` limits the readable types to
    {api key: highest version} (an older Kafka's table); a DataError for anything else, worded as
    Kafka's serde words it."""
    api_key, version, body = read_frame(value, "metadata record")
    entry = TYPES.get(api_key)
    if entry is None or (known is not None and api_key not in known):
        raise DataError(f"Unknown metadata id {api_key}")
    name, schema = entry
    if known is not None and version > known[api_key]:
        raise DataError(f"Can't read version {version} of {schema.name}")
    return MetadataRecord(api_key, name, version, read_message(schema, body, version, schema.name, exact=exact),
                          schema)
