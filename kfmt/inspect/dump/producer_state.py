"""Dumping a producer-state `.snapshot` as kafka-dump-log does (docs/format.md §8, §15.2).

Kafka 3.6 reads the file with its Struct schema (ProducerStateManager.readSnapshot): the schema read
comes first, then the version check, then the CRC; any failure is a CorruptSnapshotException whose
message the tool prints on stderr before going on with the next file. Bytes after the declared
entries are not an error there (they only have to match the CRC). The messages below are Kafka's,
so that stderr matches too.
"""
from __future__ import annotations

from kfmt.format.layout import SNAPSHOT_ENTRY, SNAPSHOT_HEADER
from kfmt.format.wire import crc32c
from kfmt.inspect.dump.common import DumpOptions, DumpTarget, Sink
from kfmt.inspect.dump.java_output import java_parse_long
from kfmt.partition.snapshots import COUNT, CRC_FROM, ENTRY, HEADER, VERSION, VERSION_AND_CRC, ProducerEntry

UNDERFLOW = "java.nio.BufferUnderflowException"
# ProducerStateManager's schema: (the name its errors give a field, its size) in file order; the
# sizes are the declaration's (kfmt.format.layout), the names Kafka's schema's own
HEADER_FIELDS = tuple(zip(("version", "crc"), (f.size for f in SNAPSHOT_HEADER.fields[:2])))
ENTRY_FIELDS = tuple(zip(("producer_id", "epoch", "last_sequence", "last_offset", "offset_delta", "timestamp",
                          "coordinator_epoch", "current_txn_first_offset"), (f.size for f in SNAPSHOT_ENTRY.fields)))


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
    if len(data) - pos < COUNT.size:
        raise _schema_error("producer_entries", UNDERFLOW)
    (count,) = COUNT.unpack_from(data, pos)
    pos += COUNT.size
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
    version, stored = VERSION_AND_CRC.unpack_from(data)
    if version != VERSION:
        raise CorruptSnapshot(f"Snapshot contained an unknown file version {version}")
    computed = crc32c(data[CRC_FROM:])
    if stored != computed:
        raise CorruptSnapshot(f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {stored}. "
                              f"Computed crc: {computed}")
    return [ProducerEntry(*ENTRY.unpack_from(data, HEADER.size + i * ENTRY.size)) for i in range(count)]


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
