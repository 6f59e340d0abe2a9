"""Codec 2: snappy (docs/format.md §5.3).

Kafka writes snappy-java's SnappyOutputStream ("xerial") framing for every magic, v2 included:

    magic: 82 53 4E 41 50 50 59 00, version: int32 BE (1), compatible version: int32 BE (1),
    then chunks of [int32 BE compressed length][one raw snappy block] (32 KiB of input per block).

Readers must also accept a payload that is one raw snappy block with no framing (sarama writes that),
and must not care about the version fields' byte order (some producers write them little-endian).
The official snappy *framing format* is not Kafka's and is not accepted.
"""
import cramjam

from kfmt.format.codecs import DEFAULT_MAX_DECOMPRESSED, Compression, corrupt, too_large
from kfmt.plugin.hookspecs import hookimpl

XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + b"\x00\x00\x00\x01\x00\x00\x00\x01"
BLOCK = 32 * 1024  # snappy-java's DEFAULT_BLOCK_SIZE
MAX_CHUNK = 512 << 20  # SnappyInputStream rejects larger chunk lengths


def _uncompressed_length(block) -> int:
    """The varint at the start of a raw snappy block: its uncompressed length."""
    value = shift = 0
    for i in range(min(5, len(block))):
        b = block[i]
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value
        shift += 7
    raise ValueError("bad length preamble")


class Snappy(Compression):
    id = 2
    name = "snappy"

    def compress(self, data, *, magic, level=None):
        out = bytearray(XERIAL_HEADER)
        view = memoryview(data)
        for start in range(0, len(view), BLOCK):
            block = bytes(cramjam.snappy.compress_raw(view[start:start + BLOCK]))
            out += len(block).to_bytes(4, "big")
            out += block
        return bytes(out)

    def decompress(self, data, *, magic, max_size=DEFAULT_MAX_DECOMPRESSED):
        data = memoryview(data)
        if bytes(data[:8]) != XERIAL_MAGIC:
            return self._raw_block(data, max_size, 0)
        out = bytearray()
        pos = 16
        while pos < len(data):
            if len(data) - pos < 4:
                raise corrupt(self.name, f"truncated chunk length at byte {pos}")
            if bytes(data[pos:pos + 8]) == XERIAL_MAGIC:  # a concatenated second stream
                pos += 16
                continue
            n = int.from_bytes(data[pos:pos + 4], "big", signed=True)
            pos += 4
            if n < 0 or n > MAX_CHUNK or pos + n > len(data):
                raise corrupt(self.name, f"invalid chunk length {n} at byte {pos - 4}")
            out += self._raw_block(data[pos:pos + n], max_size, pos, len(out))
            pos += n
        return bytes(out)

    def _raw_block(self, block, max_size, where, produced=0):
        """One raw block; `produced` bytes came from earlier chunks. The block's declared length
        is checked against the cap before anything is allocated."""
        try:
            declared = _uncompressed_length(block)
        except ValueError as e:
            raise corrupt(self.name, f"{e} at byte {where}") from None
        if produced + declared > max_size:
            raise too_large(self.name, max_size)
        try:
            return bytes(cramjam.snappy.decompress_raw(block))
        except Exception as e:  # cramjam raises its own DecompressionError
            raise corrupt(self.name, f"{e} (block at byte {where})") from None


@hookimpl
def kfmt_register_compressions(register):
    register(Snappy())
