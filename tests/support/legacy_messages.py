"""Build one legacy (v0/v1) message, optionally a compressed wrapper (Kafka's LegacyRecord layout)."""
from __future__ import annotations

import struct
import zlib


def legacy_message(offset: int, magic: int, attributes: int, key, value, timestamp: int = 0) -> bytes:
    """A v0/v1 message built from the byte layout of §3.1, independently of kfmt's encoder."""
    body = struct.pack(">bb", magic, attributes) + (struct.pack(">q", timestamp) if magic else b"")
    for field in (key, value):
        body += struct.pack(">i", -1) if field is None else struct.pack(">i", len(field)) + field
    return struct.pack(">qiI", offset, len(body) + 4, zlib.crc32(body)) + body
