"""`--cluster-metadata-decoder`: KRaft metadata records as Kafka 3.6's kafka-dump-log prints them
(ClusterMetadataLogMessageParser): no key, and the payload

    {"type":"TOPIC_RECORD","version":0,"data":{...}}

with "data" as the record's generated JsonConverter writes it (Jackson, compact). A record it
cannot read prints `Error at OFFSET, skipping. MESSAGE` instead, and the dump goes on. Control
batches (LeaderChange, SnapshotHeader/Footer) are not passed to the decoder: log.py prints them.
"""
from __future__ import annotations

from kfmt.errors import DataError
from kfmt.inspect.dump.decoders import jackson
from kfmt.inspect.dump.decoders.protocol import Reader, message_json, read_message
from kfmt.inspect.dump.decoders.result import Decoded
from kfmt.inspect.dump.decoders.schemas_metadata import TYPES

FRAME_VERSION = 1


def read_record(value: bytes | None, exact: bool = False) -> dict:
    """{"type", "version", "data"} of one metadata record value (MetadataRecordSerde framing)."""
    if value is None:
        raise DataError("the record has no value")
    reader = Reader(value, "metadata record")
    frame = reader.uvarint()
    if frame != FRAME_VERSION:
        raise DataError(f"Could not deserialize metadata record due to unknown frame version "
                        f"{frame}(expected {FRAME_VERSION})")
    api_key, version = reader.uvarint(), reader.uvarint()
    known = TYPES.get(api_key)
    if known is None:
        raise DataError(f"Unknown metadata id {api_key}")
    name, schema = known
    fields = read_message(schema, bytes(value[reader.pos:]), version, schema.name, exact=exact)
    return {"type": name, "version": version, "data": message_json(schema, fields, version)}


def parse(key: bytes | None, value: bytes | None, offset: int) -> Decoded:
    try:
        record = read_record(value)
    except DataError as err:
        return Decoded(None, f"Error at {offset}, skipping. {err}", {"error": str(err)})
    return Decoded(None, jackson.write(record), record)
