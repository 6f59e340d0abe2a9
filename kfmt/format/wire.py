"""Byte-level primitives shared by the formats: big-endian structs, zigzag varints (docs/format.md §0),
and the two CRCs (CRC-32 for v0/v1 messages, CRC-32C for v2 batches and producer snapshots)."""
from __future__ import annotations

import struct
import zlib

import crc32c as _crc32c

from kfmt.errors import DataError
from kfmt.format.layout import FIXED, LOG_ENTRY

# Each fixed-size type of kfmt.format.layout, big-endian (Kafka's protocol messages use them too).
TYPES = {name: struct.Struct(">" + code) for name, (code, *_rest) in FIXED.items()}
INT64, INT32, UINT32, INT16, INT8 = (TYPES[t] for t in ("int64", "int32", "uint32", "int16", "int8"))
OFFSET_AND_SIZE = LOG_ENTRY.struct_of("offset", "size")  # the 12-byte log overhead of every entry
# Not Kafka's: two int64 in the machine's order, as the compiled index walk hands over index entries
# (kfmt/csrc/frames.c index_frames, kfmt.partition.segment_recovery).
NATIVE_INT64_PAIR = struct.Struct("=qq")


def crc32(data) -> int:
    """CRC-32 (IEEE) of v0/v1 messages, unsigned."""
    return zlib.crc32(data) & 0xFFFFFFFF


def crc32c(data) -> int:
    """CRC-32C (Castagnoli) of v2 batches and producer snapshots, unsigned."""
    return _crc32c.crc32c(data)


def int64(value: int) -> int:
    """`value` wrapped to a signed 64-bit integer, as Java's long arithmetic does (a corrupt base
    plus delta can leave the range; Kafka's readers then report the wrapped value)."""
    if -(1 << 63) <= value < (1 << 63):
        return value
    return (value + (1 << 63)) % (1 << 64) - (1 << 63)


def read_varint(buf, pos: int, end: int, max_bytes: int = 5) -> tuple[int, int]:
    """Decode a zigzag varint at `pos`; returns (value, next position).

    Kafka rejects an int varint longer than 5 bytes and a long varint longer than 10 (max_bytes=10);
    the value is truncated to the type's width first, as Java's int/long arithmetic does.
    """
    result = 0
    shift = 0
    for i in range(max_bytes):
        if pos >= end:
            raise DataError("varint runs past the end of the data", position=pos)
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            bits = 32 if max_bytes == 5 else 64
            result &= (1 << bits) - 1
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
    raise DataError(f"varint longer than {max_bytes} bytes", position=pos - max_bytes)


def read_varlong(buf, pos: int, end: int) -> tuple[int, int]:
    return read_varint(buf, pos, end, 10)


def varint(value: int) -> bytes:
    """Encode a zigzag varint (int or long: the encoding is the same for in-range values)."""
    n = (value << 1) ^ (value >> 63)
    n &= (1 << 64) - 1
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def varint_size(value: int) -> int:
    n = ((value << 1) ^ (value >> 63)) & ((1 << 64) - 1)
    size = 1
    while n >= 0x80:
        n >>= 7
        size += 1
    return size
