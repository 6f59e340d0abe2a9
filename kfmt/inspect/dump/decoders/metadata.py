"""`--cluster-metadata-decoder`: KRaft metadata records as kafka-dump-log prints them
(ClusterMetadataLogMessageParser, the same text in Kafka 3.6 and 4.x): no key, and the payload

    {"type":"TOPIC_RECORD","version":0,"data":{...}}

with "data" as the record's generated JsonConverter writes it (Jackson, compact). A record it
cannot read prints `Error at OFFSET, skipping. MESSAGE` instead, and the dump goes on. What a
version of the tool can read is its own table of record types and versions: Kafka 3.6's knew
fewer (KAFKA_36, below). Control batches (LeaderChange, KRaftVersion, KRaftVoters,
SnapshotHeader/Footer) are not passed to the decoder: log.py prints them.
"""
from __future__ import annotations

from kfmt.errors import DataError
from kfmt.format.internal_topics.metadata import read_metadata_record
from kfmt.inspect.dump.decoders import jackson
from kfmt.inspect.dump.decoders.converter import message_json
from kfmt.inspect.dump.decoders.result import Decoded

# api key -> the highest record version Kafka 3.6's MetadataRecordSerde read (metadata.version up
# to 3.6-IV2); the types it did not know are absent
KAFKA_36 = {0: 2, 1: 0, 2: 0, 3: 0, 4: 0, 5: 0, 7: 0, 8: 0, 9: 0, 10: 0, 11: 0, 12: 0, 14: 0, 15: 0,
            17: 1, 18: 0, 19: 0, 20: 0, 21: 0, 22: 0, 23: 0, 24: 0, 25: 0, 26: 0}


def read_record(value: bytes | None, exact: bool = False, known: dict[int, int] | None = None) -> dict:
    """{"type", "version", "data"} of one metadata record value, "data" as its JsonConverter writes it."""
    record = read_metadata_record(value, exact, known)
    return {"type": record.name, "version": record.version,
            "data": message_json(record.schema, record.fields, record.version)}


def parse(key: bytes | None, value: bytes | None, offset: int, known: dict[int, int] | None = None) -> Decoded:
    try:
        record = read_record(value, known=known)
    except DataError as err:
        return Decoded(None, f"Error at {offset}, skipping. {err}", {"error": str(err)})
    return Decoded(None, jackson.write(record), record)


def parse_kafka_36(key: bytes | None, value: bytes | None, offset: int) -> Decoded:
    return parse(key, value, offset, KAFKA_36)
