"""Compression codecs, as plugins see them (docs/format.md §5).

A codec compresses and decompresses the payload of a batch for a given magic: the legacy wrapper's
value (v0/v1) or everything after a v2 batch header. Which codec a batch uses is the low three bits of
its attributes; the core looks the id up in the registry and never branches on it.

Every decompress call is capped: a payload that expands beyond `max_size` raises
DecompressionLimitExceeded instead of exhausting memory (a decompression bomb).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

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


Level = int | str  # a compression level: a number, or a name a codec declares (Levels)


@dataclass(frozen=True)
class Levels:
    """The compression levels a codec's `compress` takes (what `--compression-level` accepts for it):
    the numbers lowest..highest and the `names` it declares besides; `default` is the level it
    compresses at when given none (docs/performance.md says how each default was chosen); `kafka`
    the level Kafka's own writers use (compression.<codec>.level's default, KIP-390), which compact
    takes so that its output is the broker's cleaner's byte for byte (None: the default)."""

    lowest: int | None
    highest: int | None
    default: Level
    names: tuple[str, ...] = ()
    kafka: Level | None = None

    @property
    def kafka_level(self) -> Level:
        return self.default if self.kafka is None else self.kafka

    def parse(self, codec: str, text: "str | int") -> Level:
        """A level given on the command line (or to a kfmt.* function), checked: a UsageError names
        the levels this codec takes."""
        value = str(text).strip()
        if value in self.names:
            return value
        try:
            number = int(value)
        except ValueError:
            number = None
        if number is None or self.lowest is None or not self.lowest <= number <= self.highest:
            raise UsageError(f"compression level {value} is outside {codec}'s levels {self.describe()}")
        return number

    def describe(self) -> str:
        """'1..9, isal-1, isal-2, isal-3; default isal-1'."""
        taken = ([f"{self.lowest}..{self.highest}"] if self.lowest is not None else []) + list(self.names)
        return f"{', '.join(taken)}; default {self.default}"


class Compression:
    """Base class of a compression plugin."""

    #: attribute value (bits 0-2 of a batch's attributes)
    id: int
    #: the name Kafka uses (compression.type, kafka-dump-log's `compresscodec:`)
    name: str
    #: the message formats this codec may appear in (zstd exists only in v2)
    magics: frozenset[int] = frozenset(MAGICS)
    #: the numeric compression levels it takes, as an int Option (its range `low`..`high` and the level
    #: it compresses at when given none, `default`), or None: the simple declaration, for a codec whose
    #: levels are numbers only (the bzip2 example of docs/plugins.md)
    level: Option | None = None

    @property
    def levels(self) -> Levels | None:
        """The levels `compress` takes (what --level and --compression-level accept). A codec with
        named levels or a Kafka level of its own (gzip's isal-1) declares `levels = Levels(...)`,
        which replaces this; otherwise they are its `level` Option's range and default."""
        option = self.level
        return None if option is None else Levels(option.low, option.high, option.default)

    def compress(self, data: bytes, *, magic: int, level: Level | None = None) -> bytes:
        raise NotImplementedError

    def parse_level(self, text: "str | int") -> Level:
        """A level of this codec given by a user, checked (Levels.parse)."""
        if self.levels is None:
            raise UsageError(f"{self.name} has no compression levels")
        return self.levels.parse(self.name, text)

    def decompress(self, data, *, magic: int, max_size: int = DEFAULT_MAX_DECOMPRESSED) -> bytes:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.id}:{self.name}>"


def too_large(codec: str, max_size: int) -> DecompressionLimitExceeded:
    return DecompressionLimitExceeded(
        f"{codec} payload decompresses to more than {max_size} bytes (limit: KFMT_MAX_DECOMPRESSED_BYTES)")


def corrupt(codec: str, detail: object) -> CompressionError:
    return CompressionError(f"corrupt {codec} payload: {detail}")


def compression_levels(specs, codec: str | None = None) -> dict[int, Level]:
    """The levels a user asked for (`--compression-level`, repeatable), by codec id: each spec is
    `CODEC=LEVEL`, or a bare LEVEL for `codec` (the one codec a command writes, as recompress's
    target); a dict {codec name: level} (the Python API) is taken as those specs. Each level is
    checked against what its codec plugin declares (Compression.levels)."""
    from kfmt.plugin import registry

    if isinstance(specs, dict):
        specs = [f"{name}={level}" for name, level in specs.items()]
    out: dict[int, Level] = {}
    for spec in specs or ():
        name, sep, text = str(spec).partition("=")
        if not sep:
            if codec is None:
                raise UsageError(f"--compression-level {spec}: name the codec, as gzip={spec} (this command "
                                 f"writes batches in the codecs it reads)")
            name, text = codec, spec
        plugin = registry.get().compression_named(name.strip())
        if codec is not None and plugin.name != codec:
            raise UsageError(f"--compression-level {spec}: this command writes {codec}, not {plugin.name}")
        out[plugin.id] = plugin.parse_level(text)
    return out


def named_levels(levels: dict[int, Level]) -> dict[str, Level]:
    """compression_levels' result by codec name, as reports show it."""
    from kfmt.plugin import registry

    return {registry.get().codec_name(codec): level for codec, level in sorted(levels.items())}
