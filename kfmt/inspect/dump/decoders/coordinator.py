"""The decoders of Kafka 4.x's coordinator topics, as its kafka-dump-log prints them
(CoordinatorRecordMessageParser): `--offsets-decoder` (__consumer_offsets),
`--transaction-log-decoder` (__transaction_state) and `--share-group-state-decoder`
(__share_group_state).

A record's key is an int16 record type and the key message (version 0); its value an int16 version
and the value message (CoordinatorRecordSerde). Printed:

    key: {"type":"1","data":{...}} payload: {"version":"4","data":{...}}

both Jackson's compact text, the type and version as JSON strings, "data" as the message's
generated JsonConverter writes it; a tombstone's payload is `<DELETE>`. A record type the
coordinator does not know prints `key: Unknown record type N at offset O, skipping.`, any other
record it cannot read `key: Error at offset O, skipping. MESSAGE`, without a payload, and the dump
goes on; a record without a key stops it (Kafka's tool throws). A classic group's consumer-protocol
member subscriptions and assignments are decoded in place, or kept as base64 bytes when they do
not decode.
"""
from __future__ import annotations

from kfmt.errors import DataError
from kfmt.format.internal_topics.group_kinds import (
    CONSUMER_GROUP_RECORDS,
    SHARE_GROUP_RECORDS,
    STREAMS_GROUP_RECORDS,
)
from kfmt.format.internal_topics.groups import (
    CLASSIC_RECORDS,
    CONSUMER_PROTOCOL_ASSIGNMENT,
    CONSUMER_PROTOCOL_SUBSCRIPTION,
)
from kfmt.format.internal_topics.protocol import Message, read_message
from kfmt.format.internal_topics.share_state import SHARE_STATE_RECORDS
from kfmt.format.internal_topics.transactions import TRANSACTION_RECORDS
from kfmt.format.wire import INT16
from kfmt.inspect.dump.decoders import jackson
from kfmt.inspect.dump.decoders.converter import message_json
from kfmt.inspect.dump.decoders.result import Decoded

GROUP_RECORDS = {**CLASSIC_RECORDS, **CONSUMER_GROUP_RECORDS, **SHARE_GROUP_RECORDS, **STREAMS_GROUP_RECORDS}
GROUP_METADATA_TYPE = 2
CONSUMER_PROTOCOL_TYPE = "consumer"


class UnknownRecordType(DataError):
    def __init__(self, record_type: int):
        super().__init__(f"unknown record type {record_type}")
        self.record_type = record_type


def _version(data: bytes, what: str) -> tuple[int, bytes]:
    if len(data) < INT16.size:
        raise DataError(f"Could not read version from {what}'s buffer.")
    return INT16.unpack_from(data)[0], bytes(data[INT16.size:])


def _message(schema: Message, data: bytes, version: int, what: str) -> dict:
    try:
        return read_message(schema, data, version, schema.name)
    except DataError as err:
        raise DataError(f"Could not read record with version {version} from {what}'s buffer due to: "
                        f"{err}.") from None


def read_record(records: dict, key: bytes, value: bytes | None) -> tuple[int, dict, int | None, dict | None]:
    """(record type, key fields, value version, value fields) of a coordinator record; the value
    parts None for a tombstone. Raises UnknownRecordType or DataError."""
    record_type, body = _version(key, "key")
    schemas = records.get(record_type)
    if schemas is None:
        raise UnknownRecordType(record_type)
    key_schema, value_schema = schemas
    key_fields = _message(key_schema, body, 0, "key")
    if value is None:
        return record_type, key_fields, None, None
    version, body = _version(value, "value")
    if not value_schema.valid[0] <= version <= value_schema.valid[1]:
        raise DataError(f"Found an unknown record version {version} for record type {record_type}.")
    return record_type, key_fields, version, _message(value_schema, body, version, "value")


def _value_json(record_type: int, schema: Message, version: int, fields: dict) -> dict:
    data = message_json(schema, fields, version)
    if record_type == GROUP_METADATA_TYPE and fields["protocolType"] == CONSUMER_PROTOCOL_TYPE:
        for out, member in zip(data["members"], fields["members"]):
            for name, protocol in (("subscription", CONSUMER_PROTOCOL_SUBSCRIPTION),
                                   ("assignment", CONSUMER_PROTOCOL_ASSIGNMENT)):
                decoded = _consumer_protocol(protocol, member[name])
                if decoded is not None:
                    out[name] = decoded
    return data


def _consumer_protocol(schema: Message, data: bytes) -> dict | None:
    """The bytes read as `new ConsumerProtocolX(readable, version)` at the version they start with
    (not capped, unlike the consumer's own reader); None where that throws."""
    try:
        version, body = _version(data, schema.name)
        return message_json(schema, read_message(schema, body, version), version)
    except DataError:
        return None


def parse_with(records: dict, key: bytes | None, value: bytes | None, offset: int) -> Decoded:
    if key is None:
        raise DataError(f"Failed to decode message at offset {offset} using the specified decoder "
                        f"(message had a missing key)")
    try:
        record_type, key_fields, version, value_fields = read_record(records, key, value)
    except UnknownRecordType as err:
        return Decoded(f"Unknown record type {err.record_type} at offset {offset}, skipping.", None,
                       {"error": str(err), "recordType": err.record_type})
    except DataError as err:
        return Decoded(f"Error at offset {offset}, skipping. {err}", None, {"error": str(err)})
    key_schema, value_schema = records[record_type]
    key_json = {"type": str(record_type), "data": message_json(key_schema, key_fields, 0)}
    if version is None:
        return Decoded(jackson.write(key_json), "<DELETE>", {"key": key_json, "value": None})
    value_json = {"version": str(version), "data": _value_json(record_type, value_schema, version, value_fields)}
    return Decoded(jackson.write(key_json), jackson.write(value_json), {"key": key_json, "value": value_json})


def parse_offsets(key: bytes | None, value: bytes | None, offset: int) -> Decoded:
    return parse_with(GROUP_RECORDS, key, value, offset)


def parse_transaction_log(key: bytes | None, value: bytes | None, offset: int) -> Decoded:
    return parse_with(TRANSACTION_RECORDS, key, value, offset)


def parse_share_group_state(key: bytes | None, value: bytes | None, offset: int) -> Decoded:
    return parse_with(SHARE_STATE_RECORDS, key, value, offset)
