"""KRaft `__cluster_metadata` record schemas (Kafka 3.6, metadata.version up to 3.6-IV2).

Each record value is framed by MetadataRecordSerde: uvarint frame version (1), uvarint api key
(the record type below), uvarint record version, then the record, flexible in every version.
TYPES maps an api key to (MetadataRecordType name, schema). The numbers are Kafka 3.6's; types this
table leaves out (api keys Kafka 3.6 did not use or that kfmt has not met) print an error line the
way kafka-dump-log prints a record it cannot read.
"""
from __future__ import annotations

from kfmt.inspect.dump.decoders.protocol import F, message


def _record(name: str, valid: str, *fields):
    return message(name, valid, "0+", *fields)


_REPLICAS = "[]int32"

TYPES = {
    0: ("REGISTER_BROKER_RECORD", _record(
        "RegisterBrokerRecord", "0-2",
        F("brokerId", "int32"),
        F("isMigratingZkBroker", "bool", "2+"),
        F("incarnationId", "uuid"),
        F("brokerEpoch", "int64"),
        F("endPoints", "[]BrokerEndpoint", fields=(
            F("name", "string"), F("host", "string"), F("port", "uint16"),
            F("securityProtocol", "int16"))),
        F("features", "[]BrokerFeature", fields=(
            F("name", "string"), F("minSupportedVersion", "int16"),
            F("maxSupportedVersion", "int16"))),
        F("rack", "string", nullable="0+"),
        F("fenced", "bool", default=True),
        F("inControlledShutdown", "bool", "1+"))),
    1: ("UNREGISTER_BROKER_RECORD", _record(
        "UnregisterBrokerRecord", "0",
        F("brokerId", "int32"), F("brokerEpoch", "int64"))),
    2: ("TOPIC_RECORD", _record(
        "TopicRecord", "0",
        F("name", "string"), F("topicId", "uuid"))),
    3: ("PARTITION_RECORD", _record(
        "PartitionRecord", "0-1",
        F("partitionId", "int32", default=-1),
        F("topicId", "uuid"),
        F("replicas", _REPLICAS),
        F("isr", _REPLICAS),
        F("removingReplicas", _REPLICAS, nullable="0+"),
        F("addingReplicas", _REPLICAS, nullable="0+"),
        F("leader", "int32", default=-1),
        F("leaderEpoch", "int32", default=-1),
        F("partitionEpoch", "int32", default=-1),
        F("leaderRecoveryState", "int8", "1+", tag=0, default=0))),
    4: ("CONFIG_RECORD", _record(
        "ConfigRecord", "0",
        F("resourceType", "int8"), F("resourceName", "string"), F("name", "string"),
        F("value", "string", nullable="0+"))),
    5: ("PARTITION_CHANGE_RECORD", _record(
        "PartitionChangeRecord", "0-1",
        F("partitionId", "int32", default=-1),
        F("topicId", "uuid"),
        F("isr", _REPLICAS, nullable="0+", tag=0),
        F("leader", "int32", tag=1, default=-2),
        F("replicas", _REPLICAS, nullable="0+", tag=2),
        F("removingReplicas", _REPLICAS, nullable="0+", tag=3),
        F("addingReplicas", _REPLICAS, nullable="0+", tag=4),
        F("leaderRecoveryState", "int8", "1+", tag=5, default=-1))),
    7: ("FENCE_BROKER_RECORD", _record(
        "FenceBrokerRecord", "0", F("id", "int32"), F("epoch", "int64"))),
    8: ("UNFENCE_BROKER_RECORD", _record(
        "UnfenceBrokerRecord", "0", F("id", "int32"), F("epoch", "int64"))),
    9: ("REMOVE_TOPIC_RECORD", _record(
        "RemoveTopicRecord", "0", F("topicId", "uuid"))),
    10: ("DELEGATION_TOKEN_RECORD", _record(
        "DelegationTokenRecord", "0",
        F("owner", "string"), F("requester", "string"), F("renewers", "[]string"),
        F("issueTimestamp", "int64"), F("maxTimestamp", "int64"),
        F("expirationTimestamp", "int64"), F("tokenId", "string"))),
    11: ("USER_SCRAM_CREDENTIAL_RECORD", _record(
        "UserScramCredentialRecord", "0",
        F("name", "string"), F("mechanism", "int8"), F("salt", "bytes"),
        F("storedKey", "bytes"), F("serverKey", "bytes"), F("iterations", "int32"))),
    12: ("FEATURE_LEVEL_RECORD", _record(
        "FeatureLevelRecord", "0", F("name", "string"), F("featureLevel", "int16"))),
    14: ("CLIENT_QUOTA_RECORD", _record(
        "ClientQuotaRecord", "0",
        F("entity", "[]EntityData", fields=(
            F("entityType", "string"), F("entityName", "string", nullable="0+"))),
        F("key", "string"), F("value", "float64"), F("remove", "bool"))),
    15: ("PRODUCER_IDS_RECORD", _record(
        "ProducerIdsRecord", "0",
        F("brokerId", "int32"), F("brokerEpoch", "int64"), F("nextProducerId", "int64"))),
    17: ("BROKER_REGISTRATION_CHANGE_RECORD", _record(
        "BrokerRegistrationChangeRecord", "0-1",
        F("brokerId", "int32"),
        F("brokerEpoch", "int64"),
        F("fenced", "int8", tag=0),
        F("inControlledShutdown", "int8", "1+", tag=1))),
    18: ("ACCESS_CONTROL_ENTRY_RECORD", _record(
        "AccessControlEntryRecord", "0",
        F("id", "uuid"), F("resourceType", "int8"), F("resourceName", "string"),
        F("patternType", "int8"), F("principal", "string"), F("host", "string"),
        F("operation", "int8"), F("permissionType", "int8"))),
    19: ("REMOVE_ACCESS_CONTROL_ENTRY_RECORD", _record(
        "RemoveAccessControlEntryRecord", "0", F("id", "uuid"))),
    20: ("NO_OP_RECORD", _record("NoOpRecord", "0")),
    21: ("ZK_MIGRATION_STATE_RECORD", _record(
        "ZkMigrationStateRecord", "0", F("zkMigrationState", "int8"))),
    22: ("REMOVE_USER_SCRAM_CREDENTIAL_RECORD", _record(
        "RemoveUserScramCredentialRecord", "0", F("name", "string"), F("mechanism", "int8"))),
    23: ("BEGIN_TRANSACTION_RECORD", _record(
        "BeginTransactionRecord", "0", F("name", "string", nullable="0+", tag=0))),
    24: ("END_TRANSACTION_RECORD", _record("EndTransactionRecord", "0")),
    25: ("ABORT_TRANSACTION_RECORD", _record(
        "AbortTransactionRecord", "0", F("reason", "string", nullable="0+", tag=0))),
}
