"""Build one v2 record batch, or one uncompressed legacy message, from given records (for tests that
need an entry with exact field values, LogAppendTime set or not)."""
from __future__ import annotations

import struct
import zlib

from kfmt.format.model import BatchHeader, TimestampType
from kfmt.plugin import registry


def v2_batch(records, base_offset: int, lat: bool) -> bytes:
    header = BatchHeader(magic=2, base_offset=base_offset,
                         last_offset=base_offset + max(records.num_rows - 1, 0), compression=0,
                         timestamp_type=TimestampType.LOG_APPEND_TIME if lat else TimestampType.CREATE_TIME,
                         max_timestamp=1700000000000, base_timestamp=0)
    return registry.get().format_for(2).encode(header, records)


def legacy_message(offset: int, magic: int, timestamp: int, key, value, lat: bool = False) -> bytes:
    """One uncompressed v0/v1 message, built with kafka-python's LegacyRecordBatchBuilder (an
    independent encoder), at the offset a broker assigns."""
    from kafka.record.legacy_records import LegacyRecordBatchBuilder
    builder = LegacyRecordBatchBuilder(magic, 0, 1 << 20)
    builder.append(offset, timestamp if magic else None, key, value)
    entry = bytearray(builder.build())
    if lat:  # the LogAppendTime bit is under the CRC (docs/format.md §3.1): recompute it
        entry[17] |= 0x08
        struct.pack_into(">I", entry, 12, zlib.crc32(bytes(entry[16:])))
    return bytes(entry)
