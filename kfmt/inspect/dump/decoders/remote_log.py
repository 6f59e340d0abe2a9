"""`--remote-log-metadata-decoder`: `__remote_log_metadata` records as Kafka 4.x's kafka-dump-log
prints them (RemoteMetadataLogMessageParser): no key, and the payload the Java `toString()` of the
RemoteLogMetadata the record deserializes to (RemoteLogMetadataSerde), e.g.

    RemoteLogSegmentMetadataUpdate{remoteLogSegmentId=RemoteLogSegmentId{topicIdPartition=ID:t-0,
    id=ID}, customMetadata=Optional.empty, state=COPY_SEGMENT_FINISHED, eventTimestampMs=T, brokerId=1}

(one line). A record it cannot read prints `Error at offset O, skipping. MESSAGE`.
"""
from __future__ import annotations

from kfmt.errors import DataError
from kfmt.format.internal_topics.protocol import kafka_uuid, read_frame, read_message
from kfmt.format.internal_topics.remote_log import PARTITION_DELETE_STATES, SEGMENT_STATES, TYPES
from kfmt.inspect.dump.decoders.converter import message_json
from kfmt.inspect.dump.decoders.result import Decoded


def read_record(value: bytes | None) -> tuple[str, int, int, dict]:
    """(class name, api key, version, fields) of one record value (AbstractApiMessageSerde framing)."""
    api_key, version, body = read_frame(value, "remote log metadata record")
    if api_key not in TYPES:
        raise DataError(f"Unknown metadata id {api_key}")
    name, schema = TYPES[api_key]
    fields = read_message(schema, body, version, schema.name, exact=True)
    return name, api_key, version, fields


def _state(states: tuple[str, ...], state_id: int) -> str:
    if not 0 <= state_id < len(states):
        raise DataError(f"Invalid state id {state_id}")
    return states[state_id]


def _topic_id_partition(tip: dict) -> str:
    return f"{kafka_uuid(tip['id'])}:{tip['name']}-{tip['partition']}"  # TopicIdPartition.toString


def _segment_id(entry: dict) -> str:
    return (f"RemoteLogSegmentId{{topicIdPartition={_topic_id_partition(entry['topicIdPartition'])}, "
            f"id={kafka_uuid(entry['id'])}}}")


def _custom(data: bytes | None) -> str:
    return "Optional.empty" if data is None else f"Optional[CustomMetadata{{{len(data)} bytes}}]"


def _leader_epochs(entries: list[dict]) -> str:
    """A TreeMap<Integer, Long>'s toString (the last entry of a repeated epoch wins)."""
    epochs = {e["leaderEpoch"]: e["offset"] for e in entries}
    return "{" + ", ".join(f"{k}={epochs[k]}" for k in sorted(epochs)) + "}"


def _bool(value: bool) -> str:
    return "true" if value else "false"


def to_text(name: str, f: dict) -> str:
    """The toString() of the class the record becomes."""
    if name == "RemotePartitionDeleteMetadata":
        return (f"{name}{{topicPartition={_topic_id_partition(f['topicIdPartition'])}, state="
                f"{_state(PARTITION_DELETE_STATES, f['remotePartitionDeleteState'])}, eventTimestampMs="
                f"{f['eventTimestampMs']}, brokerId={f['brokerId']}}}")
    state = _state(SEGMENT_STATES, f["remoteLogSegmentState"])
    if name == "RemoteLogSegmentMetadataUpdate":
        return (f"{name}{{remoteLogSegmentId={_segment_id(f['remoteLogSegmentId'])}, customMetadata="
                f"{_custom(f['customMetadata'])}, state={state}, eventTimestampMs={f['eventTimestampMs']}, "
                f"brokerId={f['brokerId']}}}")
    tail = f"startOffset={f['startOffset']}, endOffset={f['endOffset']}"
    if name == "RemoteLogSegmentMetadata":
        head = f"remoteLogSegmentId={_segment_id(f['remoteLogSegmentId'])}, {tail}, brokerId={f['brokerId']}"
    else:  # RemoteLogSegmentMetadataSnapshot
        head = f"segmentId={kafka_uuid(f['segmentId'])}, {tail}"
    event = f", eventTimestampMs={f['eventTimestampMs']}" if name == "RemoteLogSegmentMetadata" else ""
    return (f"{name}{{{head}, maxTimestampMs={f['maxTimestampMs']}{event}, segmentLeaderEpochs="
            f"{_leader_epochs(f['segmentLeaderEpochs'])}, segmentSizeInBytes={f['segmentSizeInBytes']}, "
            f"customMetadata={_custom(f['customMetadata'])}, state={state}, txnIdxEmpty="
            f"{_bool(f['txnIndexEmpty'])}}}")


def parse(key: bytes | None, value: bytes | None, offset: int) -> Decoded:
    try:
        name, api_key, version, fields = read_record(value)
        text = to_text(name, fields)
    except DataError as err:
        return Decoded(None, f"Error at offset {offset}, skipping. {err}", {"error": str(err)})
    schema = TYPES[api_key][1]
    return Decoded(None, text, {"type": name, "version": version,
                                "data": message_json(schema, fields, version)})
