"""Dumping a producer-state `.snapshot` as kafka-dump-log does (docs/format.md §8, §15.2).

Kafka 3.6 reads the file with its Struct schema (ProducerStateManager.readSnapshot): the schema read
comes first, then the version check, then the CRC; any failure is a CorruptSnapshotException whose
message the tool prints on stderr before going on with the next file. Bytes after the declared
entries are not an error there (they only have to match the CRC). The messages below are Kafka's,
so that stderr matches too.
"""
from __future__ import annotations

from kfmt.format.wire import crc32c
from kfmt.inspect.dump.common import DumpOptions, DumpTarget, Sink
from kfmt.inspect.dump.java_output import java_parse_long
from kfmt.partition.snapshots import ENTRY, VERSION, ProducerEntry

UNDERFLOW = "java.nio.BufferUnderflowException"
# ProducerStateManager's schema: (field name, size) in file order
HEADER_FIELDS = (("version", 2), ("crc", 4))
ENTRY_FIELDS = (("producer_id", 8), ("epoch", 2), ("last_sequence", 4), ("last_offset", 8),
                ("offset_delta", 4), ("timestamp", 8), ("coordinator_epoch", 4),
                ("current_txn_first_offset", 8))
assert sum(size for _, size in ENTRY_FIELDS) == ENTRY.size


class CorruptSnapshot(Exception):
    pass


def _schema_error(field: str, detail: str) -> CorruptSnapshot:
    return CorruptSnapshot(f"Snapshot failed schema validation: Error reading field '{field}': {detail}")


def read_snapshot_like_kafka(data) -> list[ProducerEntry]:
    """The entries of a snapshot, or CorruptSnapshot with the message Kafka 3.6 would give."""
    data = memoryview(data)
    pos = 0
    for name, size in HEADER_FIELDS:
        if len(data) - pos < size:
            raise _schema_error(name, UNDERFLOW)
        pos += size
    if len(data) - pos < 4:
        raise _schema_error("producer_entries", UNDERFLOW)
    count = int.from_bytes(data[pos:pos + 4], "big", signed=True)
    pos += 4
    if count < 0:
        raise _schema_error("producer_entries", f"Array size {count} cannot be negative")
    if count > len(data) - pos:  # Kafka compares the count with the bytes left, not the entries
        raise _schema_error("producer_entries",
                            f"Error reading array of size {count}, only {len(data) - pos} bytes available")
    if len(data) - pos < count * ENTRY.size:
        available = (len(data) - pos) % ENTRY.size
        for name, size in ENTRY_FIELDS:
            if available < size:
                raise _schema_error("producer_entries", f"Error reading field '{name}': {UNDERFLOW}")
            available -= size
    version = int.from_bytes(data[0:2], "big", signed=True)
    if version != VERSION:
        raise CorruptSnapshot(f"Snapshot contained an unknown file version {version}")
    stored = int.from_bytes(data[2:6], "big")
    computed = crc32c(data[6:])
    if stored != computed:
        raise CorruptSnapshot(f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {stored}. "
                              f"Computed crc: {computed}")
    return [ProducerEntry(*ENTRY.unpack_from(data, 10 + i * ENTRY.size)) for i in range(count)]


def dump_snapshot(target: DumpTarget, options: DumpOptions, sink: Sink) -> bool:
    """Report the producers; False (after reporting it) when the snapshot is corrupt."""
    # Kafka does not read the offset in the name of a snapshot; it is given where there is one
    sink.describe_file(target, "snapshot", offset=java_parse_long(target.name.split(".")[0]))
    target.require()
    try:
        entries = read_snapshot_like_kafka(target.read_all())
    except CorruptSnapshot as err:
        sink.snapshot_corrupt(target, str(err))
        return False
    for entry in entries:
        sink.producer(target, entry)
    return True


def java_int(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def first_sequence(entry: ProducerEntry) -> int:
    """BatchMetadata.firstSeq: DefaultRecordBatch.decrementSequence(lastSeq, offsetDelta) in Java
    int arithmetic (it wraps below 0 to the top of the int range)."""
    seq, delta = entry.last_sequence, entry.offset_delta
    if seq < delta:
        return java_int(2**31 - 1 - (delta - seq) + 1)
    return java_int(seq - delta)
