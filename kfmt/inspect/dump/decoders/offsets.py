"""`--offsets-decoder --kafka-version 3.6`: `__consumer_offsets` records as Kafka 3.6's kafka-dump-log
prints them (4.x's JSON is coordinator.py's).

Kafka 3.6 (OffsetsMessageParser) prints text, not the JSON later versions print:
* offset commit: `offset_commit::group=G,partition=T-P` / `offset=N` or `offset=N,metadata=M`
  (the metadata part left out when it is empty; leader epoch and timestamps not shown);
* group metadata: `group_metadata::group=G` / a JSON object (protocolType, protocol,
  generationId, assignment) whose "assignment" is a string `{member=[t-0, t-1],...}`: members in
  the order of the group's Scala HashMap, each consumer assignment as Java prints a
  List<TopicPartition>, with `:HEX` after it when the assignment carries user data; the raw
  assignment in hex for other protocol types. Hex is `"%X".format(BigInt(1, bytes))`: upper
  case, leading zeros dropped;
* a tombstone (no value): `<DELETE>`;
* a key version other than 0-2: `unknown::version=V` and no payload.
"""
from __future__ import annotations

from kfmt.errors import DataError
from kfmt.format.internal_topics.groups import (
    CONSUMER_PROTOCOL_ASSIGNMENT,
    CONSUMER_PROTOCOL_SUBSCRIPTION,
    GROUP_METADATA_KEY,
    GROUP_METADATA_VALUE,
    OFFSET_COMMIT_KEY,
    OFFSET_COMMIT_VALUE,
)
from kfmt.format.internal_topics.protocol import read_message
from kfmt.format.wire import INT16
from kfmt.inspect.dump.decoders import jackson
from kfmt.inspect.dump.decoders.converter import message_json
from kfmt.inspect.dump.decoders.result import Decoded
from kfmt.inspect.dump.decoders.scalaorder import member_order

CONSUMER_PROTOCOL_TYPE = "consumer"


def split_version(data: bytes, what: str) -> tuple[int, bytes]:
    """The int16 version every coordinator key and value starts with, and the rest."""
    if data is None or len(data) < INT16.size:
        raise DataError(f"{what} of {0 if data is None else len(data)} bytes has no version")
    return INT16.unpack_from(data)[0], bytes(data[INT16.size:])


def read_key(key: bytes) -> tuple[str, int, dict | None]:
    """('offset_commit' | 'group_metadata' | 'unknown', version, fields)."""
    version, body = split_version(key, "__consumer_offsets record key")
    if version in (0, 1):  # both versions have the same fields
        return "offset_commit", version, read_message(OFFSET_COMMIT_KEY, body, 0)
    if version == 2:
        return "group_metadata", version, read_message(GROUP_METADATA_KEY, body, 0)
    return "unknown", version, None


def read_offset_value(value: bytes) -> tuple[int, dict]:
    version, body = split_version(value, "offset commit value")
    if not 0 <= version <= 4:
        raise DataError(f"Unknown offset message version: {version}")
    return version, read_message(OFFSET_COMMIT_VALUE, body, version)


def read_group_value(value: bytes) -> tuple[int, dict]:
    version, body = split_version(value, "group metadata value")
    if not 0 <= version <= 4:
        raise DataError(f"Unknown group metadata message version: {version}")
    return version, read_message(GROUP_METADATA_VALUE, body, version)


def read_assignment(data: bytes) -> tuple[int, dict]:
    """ConsumerProtocol.deserializeAssignment: newer versions are read as the newest known."""
    version, body = split_version(data, "consumer assignment")
    if version < 0:
        raise DataError(f"consumer assignment version {version} is negative")
    version = min(version, CONSUMER_PROTOCOL_ASSIGNMENT.valid[1])
    return version, read_message(CONSUMER_PROTOCOL_ASSIGNMENT, body, version)


def read_subscription(data: bytes) -> tuple[int, dict]:
    version, body = split_version(data, "consumer subscription")
    if version < 0:
        raise DataError(f"consumer subscription version {version} is negative")
    version = min(version, CONSUMER_PROTOCOL_SUBSCRIPTION.valid[1])
    return version, read_message(CONSUMER_PROTOCOL_SUBSCRIPTION, body, version)


def kafka_hex(data: bytes | None) -> str:
    if not data:
        return ""
    return data.hex().lstrip("0").upper() or "0"  # the bytes as one unsigned number


def _partition_list(assignment: dict) -> str:
    names = [f"{tp['topic']}-{p}" for tp in assignment["assignedPartitions"] for p in tp["partitions"]]
    return "[" + ", ".join(names) + "]"


def assignment_text(group: dict) -> str:
    protocol_type = group["protocolType"]
    members = group["members"]
    parts = []
    for i in member_order([m["memberId"] for m in members]):
        member = members[i]
        if protocol_type == CONSUMER_PROTOCOL_TYPE:
            _version, assignment = read_assignment(member["assignment"])
            user_data = kafka_hex(assignment["userData"])
            text = f"{member['memberId']}={_partition_list(assignment)}"
            parts.append(f"{text}:{user_data}" if user_data else text)
        else:
            parts.append(f"{member['memberId']}={kafka_hex(member['assignment'])}")
    return "{" + ",".join(parts) + "}"


def _group_json(version: int, group: dict) -> dict:
    """The value as structured JSON, consumer subscriptions and assignments decoded."""
    data = message_json(GROUP_METADATA_VALUE, group, version)
    if group["protocolType"] == CONSUMER_PROTOCOL_TYPE:
        for out, member in zip(data["members"], group["members"]):
            for name, reader, schema in (("subscription", read_subscription, CONSUMER_PROTOCOL_SUBSCRIPTION),
                                         ("assignment", read_assignment, CONSUMER_PROTOCOL_ASSIGNMENT)):
                try:
                    v, decoded = reader(member[name])
                except DataError:
                    continue  # kept as base64
                out[name] = {"version": v, "data": message_json(schema, decoded, v)}
    return data


def parse(key: bytes | None, value: bytes | None, offset: int) -> Decoded:
    if key is None:
        return Decoded(None, None)
    try:
        kind, key_version, k = read_key(key)
        if kind == "unknown":
            return Decoded(f"unknown::version={key_version}", None,
                           {"key": {"type": "unknown", "version": key_version}})
        key_content = {"type": kind, "version": key_version, "data": k}
        if kind == "offset_commit":
            key_text = f"offset_commit::group={k['group']},partition={k['topic']}-{k['partition']}"
            if value is None:
                return Decoded(key_text, "<DELETE>", {"key": key_content, "value": None})
            version, v = read_offset_value(value)
            payload = f"offset={v['offset']}"
            if v["metadata"]:
                payload += f",metadata={v['metadata']}"
            return Decoded(key_text, payload, {
                "key": key_content,
                "value": {"version": version, "data": message_json(OFFSET_COMMIT_VALUE, v, version)}})
        key_text = f"group_metadata::group={k['group']}"
        if value is None:
            return Decoded(key_text, "<DELETE>", {"key": key_content, "value": None})
        version, group = read_group_value(value)
        payload = jackson.write({
            "protocolType": group["protocolType"],
            "protocol": group["protocol"],
            "generationId": group["generation"],
            "assignment": assignment_text(group)})
        return Decoded(key_text, payload, {"key": key_content,
                                           "value": {"version": version, "data": _group_json(version, group)}})
    except DataError as err:
        raise DataError(f"offsets decoder: {err}") from None
