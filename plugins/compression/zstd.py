"""Codec 4: zstd, message format v2 only (KIP-110, docs/format.md §5.5).

Kafka writes one standard zstd frame (zstd-jni streaming, level 3) without a content size, which is
why one-shot decoders that need the size fail on it; this reads with a streaming decoder, capped.
A legacy (v0/v1) message that declares zstd is invalid: the registry refuses it by `magics`.
"""
import zstandard

from kfmt.format.codecs import DEFAULT_MAX_DECOMPRESSED, Compression, Levels, corrupt, too_large
from kfmt.plugin.hookspecs import hookimpl

DEFAULT_LEVEL = 3
# The most output one byte of input can yield: an RLE block is 4 bytes (3-byte header, 1 byte) and
# expands to at most 128 KiB (RFC 8878 §3.1.1.2), i.e. 32768 bytes per input byte.
MAX_EXPANSION = 32768
MIN_FEED = 16
MAX_FEED = 1 << 16


class Zstd(Compression):
    id = 4
    name = "zstd"
    magics = frozenset({2})
    levels = Levels(-131072, 22, DEFAULT_LEVEL)  # zstd-jni's minimum to 22, as Kafka takes them

    def compress(self, data, *, magic, level=None):
        compressor = zstandard.ZstdCompressor(level=DEFAULT_LEVEL if level is None else level,
                                              write_content_size=False)
        return compressor.compress(data)

    def decompress(self, data, *, magic, max_size=DEFAULT_MAX_DECOMPRESSED):
        # Fed in slices no larger than what could expand to the output budget left, so that a
        # decompression bomb is stopped within about one slice's worth past the cap instead of
        # being materialised. Concatenated frames are read on, as zstd-jni's stream does.
        data = memoryview(data)
        out = bytearray()
        pos = 0
        try:
            while pos < len(data):
                decoder = zstandard.ZstdDecompressor().decompressobj()
                while pos < len(data) and not decoder.eof:
                    feed = min(MAX_FEED, max(MIN_FEED, (max_size - len(out)) // MAX_EXPANSION))
                    chunk = data[pos:pos + feed]
                    pos += len(chunk)
                    out += decoder.decompress(chunk)
                    if len(out) > max_size:
                        raise too_large(self.name, max_size)
                if not decoder.eof:
                    raise corrupt(self.name, "truncated zstd frame")
                pos -= len(decoder.unused_data)
        except zstandard.ZstdError as e:
            raise corrupt(self.name, e) from None
        return bytes(out)


@hookimpl
def kfmt_register_compressions(register):
    register(Zstd())
