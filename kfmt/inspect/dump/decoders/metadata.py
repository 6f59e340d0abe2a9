"""`--cluster-metadata-decoder`: KRaft metadata records as kafka-dump-log prints them
(ClusterMetadataLogMessageParser, the same text in Kafka 3.6 and 4.x): no key, and the payload

    {"type":"TOPIC_RECORD","version":0,"data":{...}}

with "data" as the record's generated JsonConverter writes it (Jackson, compact). A record it
cannot read prints `Error at OFFSET, skipping. MESSAGE` instead, and the dump goes on. What a
version of the tool can read is its own table of record types and versions: Kafka 3.6's knew
fewer (schemas_metadata.KAFKA_36). Control batches (LeaderChange, KRaftVersion, KRaftVoters,
SnapshotHeader/Footer) are not passed to the decoder: log.py prints them.
"""
from __future__ import annotations

from kfmt.errors import DataError
from kfmt.inspect.dump.decoders import jackson
from kfmt.inspect.dump.decoders.protocol import Reader, message_json, read_message
from kfmt.inspect.dump.decoders.result import Decoded
from kfmt.inspect.dump.decoders.schemas_metadata import KAFKA_36, TYPES

FRAME_VERSION = 1


def read_frame(value: bytes | None, what: str) -> tuple[int, int, bytes]:
    """(api key, version, message bytes) of a value framed by Kafka's AbstractApiMessageSerde
    (MetadataRecordSerde, RemoteLogMetadataSerde): uvarint frame version 1, api key, version."""
    if value is None:
        raise DataError("the record has no value")
    reader = Reader(value, what)
    frame = reader.uvarint()
    if frame != FRAME_VERSION:
        raise DataError(f"Could not deserialize metadata record due to unknown frame version "
                        f"{frame}(expected {FRAME_VERSION})")
    api_key, version = reader.uvarint(), reader.uvarint()
    return api_key, version, bytes(value[reader.pos:])


def read_record(value: bytes | None, exact: bool = False, known: dict[int, int] | None = None) -> dict:
    """{"type", "version", "data"} of one metadata record value (MetadataRecordSerde framing);
    `known` limits the readable types to {api key: highest version} (an older Kafka's table)."""
    api_key, version, body = read_frame(value, "metadata record")
    entry = TYPES.get(api_key)
    if entry is None or (known is not None and api_key not in known):
        raise DataError(f"Unknown metadata id {api_key}")
    name, schema = entry
    if known is not None and version > known[api_key]:
        raise DataError(f"Can't read version {version} of {schema.name}")
    fields = read_message(schema, body, version, schema.name, exact=exact)
    return {"type": name, "version": version, "data": message_json(schema, fields, version)}


def parse(key: bytes | None, value: bytes | None, offset: int, known: dict[int, int] | None = None) -> Decoded:
    try:
        record = read_record(value, known=known)
    except DataError as err:
        return Decoded(None, f"Error at {offset}, skipping. {err}", {"error": str(err)})
    return Decoded(None, jackson.write(record), record)


def parse_kafka_36(key: bytes | None, value: bytes | None, offset: int) -> Decoded:
    return parse(key, value, offset, KAFKA_36)
