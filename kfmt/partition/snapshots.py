"""Producer-state snapshots `<offset>.snapshot` (docs/format.md §8, ProducerSnapshot.json version 1),
as kfmt.format.layout declares them: SNAPSHOT_HEADER (version int16 1, crc uint32: CRC-32C of
everything after it, producerCount int32), then SNAPSHOT_ENTRY per producer (producerId int64,
producerEpoch int16, lastSequence int32, lastOffset int64, offsetDelta int32, timestamp int64,
coordinatorEpoch int32, currentTxnFirstOffset int64).

The snapshot at offset N reflects every batch below N.
"""
from __future__ import annotations

from dataclasses import dataclass

from kfmt.errors import DataError
from kfmt.format.layout import SNAPSHOT_ENTRY, SNAPSHOT_HEADER
from kfmt.format.wire import crc32c

HEADER = SNAPSHOT_HEADER.struct
ENTRY = SNAPSHOT_ENTRY.struct
VERSION_AND_CRC = SNAPSHOT_HEADER.struct_of("version", "crc")
COUNT = SNAPSHOT_HEADER.struct_of("producerCount", "producerCount")
CRC_AT, CRC_FROM = SNAPSHOT_HEADER.at("crc"), SNAPSHOT_HEADER.at("producerCount")  # CRC-32C of [6, end)
VERSION = 1


@dataclass(frozen=True, slots=True)
class ProducerEntry:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1

    @property
    def first_sequence(self) -> int:
        # lastSequence - offsetDelta with wrap-around (DumpLogSegments' firstSequence)
        seq = self.last_sequence - self.offset_delta
        return seq + 2**31 if seq < 0 else seq


def read_snapshot(data, file: str | None = None) -> list[ProducerEntry]:
    data = memoryview(data)
    if len(data) < HEADER.size:
        raise DataError(f"snapshot of {len(data)} bytes is too short for its header", file=file, position=0)
    version, crc, count = HEADER.unpack_from(data)
    if version != VERSION:
        raise DataError(f"unsupported snapshot version {version}", file=file, position=0)
    computed = crc32c(data[CRC_FROM:])
    if computed != crc:
        raise DataError(f"snapshot CRC mismatch (stored {crc}, computed {computed})", file=file, position=CRC_AT)
    if count < 0 or len(data) != HEADER.size + count * ENTRY.size:
        raise DataError(f"snapshot declares {count} entries but holds {len(data) - HEADER.size} bytes "
                        f"of entries", file=file, position=CRC_FROM)
    return [ProducerEntry(*fields) for fields in ENTRY.iter_unpack(data[HEADER.size:])]


def write_snapshot(entries, keep_order: bool = False) -> bytes:
    """Entries sorted by producer id, or (keep_order) in the given order: Kafka writes them in its
    HashMap's iteration order, which kfmt.partition.producer_state reproduces."""
    if not keep_order:
        entries = sorted(entries, key=lambda e: e.producer_id)
    body = COUNT.pack(len(entries)) + b"".join(
        ENTRY.pack(e.producer_id, e.producer_epoch, e.last_sequence, e.last_offset, e.offset_delta,
                   e.timestamp, e.coordinator_epoch, e.current_txn_first_offset)
        for e in entries)
    return VERSION_AND_CRC.pack(VERSION, crc32c(body)) + body
