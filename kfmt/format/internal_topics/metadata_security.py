"""KRaft `__cluster_metadata` records of configuration and security: configs, client quotas, ACLs,
SCRAM credentials and delegation tokens (Kafka's metadata/src/main/resources/common/metadata/;
the framing and the other records are in metadata.py)."""
from __future__ import annotations

from kfmt.format.internal_topics.protocol import F, message


def _record(name: str, valid: str, *fields):
    return message(name, valid, "0+", *fields)


SECURITY_TYPES = {
    4: ("CONFIG_RECORD", _record(
        "ConfigRecord", "0",
        F("resourceType", "int8"), F("resourceName", "string"), F("name", "string"),
        F("value", "string", nullable="0+"))),
    10: ("DELEGATION_TOKEN_RECORD", _record(
        "DelegationTokenRecord", "0",
        F("owner", "string"), F("requester", "string"), F("renewers", "[]string"),
        F("issueTimestamp", "int64"), F("maxTimestamp", "int64"),
        F("expirationTimestamp", "int64"), F("tokenId", "string"))),
    11: ("USER_SCRAM_CREDENTIAL_RECORD", _record(
        "UserScramCredentialRecord", "0",
        F("name", "string"), F("mechanism", "int8"), F("salt", "bytes"),
        F("storedKey", "bytes"), F("serverKey", "bytes"), F("iterations", "int32"))),
    14: ("CLIENT_QUOTA_RECORD", _record(
        "ClientQuotaRecord", "0",
        F("entity", "[]EntityData", fields=(
            F("entityType", "string"), F("entityName", "string", nullable="0+"))),
        F("key", "string"), F("value", "float64"), F("remove", "bool"))),
    18: ("ACCESS_CONTROL_ENTRY_RECORD", _record(
        "AccessControlEntryRecord", "0",
        F("id", "uuid"), F("resourceType", "int8"), F("resourceName", "string"),
        F("patternType", "int8"), F("principal", "string"), F("host", "string"),
        F("operation", "int8"), F("permissionType", "int8"))),
    19: ("REMOVE_ACCESS_CONTROL_ENTRY_RECORD", _record(
        "RemoveAccessControlEntryRecord", "0", F("id", "uuid"))),
    22: ("REMOVE_USER_SCRAM_CREDENTIAL_RECORD", _record(
        "RemoveUserScramCredentialRecord", "0", F("name", "string"), F("mechanism", "int8"))),
    26: ("REMOVE_DELEGATION_TOKEN_RECORD", _record(
        "RemoveDelegationTokenRecord", "0", F("tokenId", "string"))),
}
