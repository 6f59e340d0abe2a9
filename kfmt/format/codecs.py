"""Compression codecs, as plugins see them (docs/format.md §5).

A codec compresses and decompresses the payload of a batch for a given magic: the legacy wrapper's
value (v0/v1) or everything after a v2 batch header. Which codec a batch uses is the low three bits of
its attributes; the core looks the id up in the registry and never branches on it.

Every decompress call is capped: a payload that expands beyond `max_size` raises
DecompressionLimitExceeded instead of exhausting memory (a decompression bomb).
"""
from __future__ import annotations

import os

from kfmt.errors import CompressionError, DecompressionLimitExceeded, UsageError
from kfmt.format.layout import MAGICS
from kfmt.plugin.options import Option


def _limit_from_environment(default: int = 1 << 30) -> int:
    value = os.environ.get("KFMT_MAX_DECOMPRESSED_BYTES", "").strip()
    if not value:
        return default
    if not value.isdigit():
        raise UsageError(f"KFMT_MAX_DECOMPRESSED_BYTES must be a number of bytes, got {value!r}")
    return int(value)


# The cap on one batch's decompressed size. Kafka's own limits (message.max.bytes, default 1 MiB,
# at most 2 GiB per batch) bound the compressed size, not the decompressed one.
DEFAULT_MAX_DECOMPRESSED = _limit_from_environment()


class Compression:
    """Base class of a compression plugin."""

    #: attribute value (bits 0-2 of a batch's attributes)
    id: int
    #: the name Kafka uses (compression.type, kafka-dump-log's `compresscodec:`)
    name: str
    #: the message formats this codec may appear in (zstd exists only in v2)
    magics: frozenset[int] = frozenset(MAGICS)
    #: the compression levels it takes (an int Option: its range, `low`..`high`, and the level used
    #: when none is asked for, `default`), or None for a codec without levels. `compress` receives
    #: the level asked for, checked against it (`checked_level`), or None for the default.
    level: Option | None = None

    def compress(self, data: bytes, *, magic: int, level: int | None = None) -> bytes:
        raise NotImplementedError

    def decompress(self, data, *, magic: int, max_size: int = DEFAULT_MAX_DECOMPRESSED) -> bytes:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.id}:{self.name}>"


def checked_level(codec: Compression, level: int | None, flag: str = "--level") -> int | None:
    """`level` if `codec` declares it among its levels (None stays None: the codec's default); a
    UsageError naming the codec's range otherwise."""
    if level is None:
        return None
    if codec.level is None:
        raise UsageError(f"{flag}: {codec.name} has no compression levels")
    low, high = codec.level.low, codec.level.high
    if isinstance(level, bool) or not isinstance(level, int) or not low <= level <= high:
        raise UsageError(f"{flag} {level} is outside {codec.name}'s levels {low}..{high}")
    return level


def too_large(codec: str, max_size: int) -> DecompressionLimitExceeded:
    return DecompressionLimitExceeded(
        f"{codec} payload decompresses to more than {max_size} bytes (limit: KFMT_MAX_DECOMPRESSED_BYTES)")


def corrupt(codec: str, detail: object) -> CompressionError:
    return CompressionError(f"corrupt {codec} payload: {detail}")
