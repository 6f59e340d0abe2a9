"""Partitions of values made by independent encoders (confluent-kafka's serializers, fastavro), written
as Kafka segments by kafka-python's record batch builder, and schema sources to decode them with."""
from __future__ import annotations

import json
from pathlib import Path


def write_partition(directory: Path, records: list[tuple[bytes | None, bytes | None]],
                    batch_records: int = 50) -> Path:
    """A partition directory with one segment of one v2 batch per `batch_records` records
    (kafka-python's DefaultRecordBatchBuilder: not kfmt's encoder), offsets from 0."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    directory.mkdir(parents=True, exist_ok=True)
    out = bytearray()
    for start in range(0, len(records), batch_records):
        builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 24)
        for i, (key, value) in enumerate(records[start:start + batch_records]):
            builder.append(i, 1_700_000_000_000 + start + i, key, value, [])
        batch = bytearray(builder.build())
        batch[0:8] = start.to_bytes(8, "big")  # the base offset a broker assigns
        out += batch
    (directory / "00000000000000000000.log").write_bytes(bytes(out))
    return directory


def schema_directory(directory: Path, entries: list[dict]) -> Path:
    """A schema directory (kfmt.rows.schemas.directory): entries {id, subject, version, schema,
    type (avsc/proto/json)} written as files with their schemas.json."""
    directory.mkdir(parents=True, exist_ok=True)
    mapping = []
    for e in entries:
        name = f"{e['subject']}-v{e['version']}.{e.get('type', 'avsc')}"
        text = e["schema"] if isinstance(e["schema"], str) else json.dumps(e["schema"])
        (directory / name).write_text(text)
        mapping.append({"id": e["id"], "file": name, "subject": e["subject"], "version": e["version"]})
    (directory / "schemas.json").write_text(json.dumps({"schemas": mapping}))
    return directory


def rabin_fingerprint(canonical: bytes) -> int:
    """CRC-64-AVRO of a schema's Parsing Canonical Form, from the Avro specification's reference
    algorithm ("Schema Fingerprints")."""
    empty = 0xC15D213AA4D7A795
    table = []
    for i in range(256):
        fp = i
        for _ in range(8):
            fp = (fp >> 1) ^ (empty & -(fp & 1))
        table.append(fp)
    fp = empty
    for byte in canonical:
        fp = (fp >> 8) ^ table[(fp ^ byte) & 0xFF]
    return fp
