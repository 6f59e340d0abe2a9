"""Codec 3: lz4, in Kafka's LZ4 frame (docs/format.md §5.4).

    magic: 04 22 4D 18 (0x184D2204 little-endian)
    FLG: 0x60 (version 01, independent blocks); BD: 0x40 (64 KiB blocks)
    HC: (xxHash32(FLG BD) >> 8) & 0xFF = 0x82 -- but for magic 0 Kafka hashes magic FLG BD (0x1a)
    blocks: [int32 LE size, bit 31 = stored uncompressed][data], each <= 64 KiB of input
    end mark: 00 00 00 00

Reading follows Kafka's Lz4BlockInputStream: only the first frame is decoded; dependent blocks and
dictionary ids are rejected; a content-size field is skipped; block checksums are verified; the
header checksum is verified for magic 1 and 2 and ignored for magic 0 (KAFKA-3160, KIP-57).
"""
import struct

import lz4.block
import xxhash

from kfmt.format.codecs import DEFAULT_MAX_DECOMPRESSED, Compression, Levels, corrupt, too_large
from kfmt.format.layout import MAGIC_V0, MAGICS
from kfmt.plugin.hookspecs import hookimpl

FRAME_MAGIC = b"\x04\x22\x4d\x18"
FLG_WRITTEN = 0x60
BD_WRITTEN = 0x40
BLOCK_SIZES = {4: 64 << 10, 5: 256 << 10, 6: 1 << 20, 7: 4 << 20}
UNCOMPRESSED_BIT = 0x80000000
END_MARK = b"\x00\x00\x00\x00"
BLOCK_SIZE_WRITTEN = 64 << 10
# Kafka's default level (KIP-390), at which lz4-java's fast compressor runs (python-lz4's block
# compressor in its default mode here); any other level is the high-compression one at that level
DEFAULT_LEVEL = 9


def broken_checksum(magic: int) -> bool:
    """Whether frames in this message format carry Kafka's historical header checksum (v0: over the
    frame magic too, and not checked on read; KAFKA-3160, KIP-57)."""
    return magic == MAGIC_V0


def header_checksum(descriptor: bytes, magic: int) -> int:
    """HC byte over the frame descriptor (and the frame magic before it, in v0)."""
    hashed = FRAME_MAGIC + descriptor if broken_checksum(magic) else descriptor
    return (xxhash.xxh32_intdigest(hashed) >> 8) & 0xFF


# The header kfmt writes, per message format, and the descriptor-and-checksum bytes that mark a frame
# written the same way: recompress writes one frame per output batch (a million and more for a GB of
# one-message v1 entries) and reads each back, so neither recomputes a constant each time.
_WRITTEN_DESCRIPTOR = bytes((FLG_WRITTEN, BD_WRITTEN))
_HEADERS = {magic: FRAME_MAGIC + _WRITTEN_DESCRIPTOR + bytes((header_checksum(_WRITTEN_DESCRIPTOR, magic),))
            for magic in MAGICS}
_PACK_SIZE = struct.Struct("<I").pack
_UNPACK_SIZE = struct.Struct("<I").unpack_from


class Lz4(Compression):
    id = 3
    name = "lz4"
    levels = Levels(1, 17, DEFAULT_LEVEL)  # lz4-java's, as Kafka takes them (compression.lz4.level)

    def compress(self, data, *, magic, level=None):
        header = _HEADERS[magic]
        fast = level is None or level == DEFAULT_LEVEL
        if fast and len(data) <= BLOCK_SIZE_WRITTEN:  # one block: most batches
            block = lz4.block.compress(data, store_size=False)
            if len(block) < len(data):
                return b"".join((header, _PACK_SIZE(len(block)), block, END_MARK))
        out = bytearray(header)
        view = memoryview(data)
        for start in range(0, len(view), BLOCK_SIZE_WRITTEN):
            chunk = view[start:start + BLOCK_SIZE_WRITTEN]
            if fast:
                block = lz4.block.compress(chunk, store_size=False)
            else:
                block = lz4.block.compress(chunk, mode="high_compression", compression=level,
                                           store_size=False)
            if len(block) >= len(chunk):  # Kafka stores a block raw when LZ4 does not shrink it
                out += _PACK_SIZE(len(chunk) | UNCOMPRESSED_BIT)
                out += chunk
            else:
                out += _PACK_SIZE(len(block))
                out += block
        out += END_MARK
        return bytes(out)

    def decompress(self, data, *, magic, max_size=DEFAULT_MAX_DECOMPRESSED):
        data = memoryview(data)
        n = len(data)
        if n >= 7 and data[:7] == _HEADERS[magic]:  # written as kfmt and Kafka write
            block_max, block_checksums, pos = BLOCK_SIZE_WRITTEN, False, 7
        else:
            block_max, block_checksums, pos = self._descriptor(data, magic)
        # the blocks' output kept apart and joined once (a batch is often a single block, which is
        # then returned as decompressed, with no copy)
        pieces, total = [], 0
        while True:
            if pos + 4 > n:
                raise corrupt(self.name, "frame ends without an end mark")
            (word,) = _UNPACK_SIZE(data, pos)
            pos += 4
            if word == 0:  # later frames, if any, are ignored as Kafka does
                return pieces[0] if len(pieces) == 1 else b"".join(pieces)
            size = word & ~UNCOMPRESSED_BIT
            if size > block_max or pos + size > n:
                raise corrupt(self.name, f"invalid block size {size} at byte {pos - 4}")
            block = data[pos:pos + size]
            pos += size
            if block_checksums:
                if pos + 4 > n or _UNPACK_SIZE(data, pos)[0] != xxhash.xxh32_intdigest(block):
                    raise corrupt(self.name, f"block checksum mismatch at byte {pos - size - 4}")
                pos += 4
            if total + (size if word & UNCOMPRESSED_BIT else 0) > max_size:
                raise too_large(self.name, max_size)
            if word & UNCOMPRESSED_BIT:
                pieces.append(bytes(block))
                total += size
                continue
            # The output buffer is the frame's declared block maximum (at most 4 MiB), so a block
            # that decodes to more is corrupt, and the cap is checked once per block.
            try:
                piece = lz4.block.decompress(block, uncompressed_size=block_max)
            except lz4.block.LZ4BlockError as e:
                raise corrupt(self.name, f"{e} (block at byte {pos - size - 4})") from None
            pieces.append(piece)
            total += len(piece)
            if total > max_size:
                raise too_large(self.name, max_size)

    def _descriptor(self, data: memoryview, magic: int) -> tuple[int, bool, int]:
        """(block maximum, whether blocks carry checksums, position of the first block) of a frame
        whose header is not the one kfmt writes, checked as Kafka's Lz4BlockInputStream checks it."""
        n = len(data)
        if n < 7 or bytes(data[:4]) != FRAME_MAGIC:
            raise corrupt(self.name, "missing LZ4 frame magic")
        flg, bd = data[4], data[5]
        if flg >> 6 != 1:
            raise corrupt(self.name, f"unsupported LZ4 frame version {flg >> 6}")
        if flg & 0x03:
            raise corrupt(self.name, "reserved bits or a dictionary id in the frame descriptor")
        if not flg & 0x20:
            raise corrupt(self.name, "dependent block stream is unsupported (Kafka rejects it)")
        if bd & 0x8F or (bd >> 4) & 0x07 not in BLOCK_SIZES:
            raise corrupt(self.name, f"invalid block descriptor {bd:#04x}")
        block_max = BLOCK_SIZES[(bd >> 4) & 0x07]
        block_checksums = bool(flg & 0x10)
        descriptor_end = 6 + (8 if flg & 0x08 else 0)  # a content size is skipped
        if n < descriptor_end + 1:
            raise corrupt(self.name, "truncated frame descriptor")
        if not broken_checksum(magic) and data[descriptor_end] != header_checksum(bytes(data[4:descriptor_end]),
                                                                                  magic):
            raise corrupt(self.name, "stream frame descriptor corrupted (header checksum)")
        return block_max, block_checksums, descriptor_end + 1


@hookimpl
def kfmt_register_compressions(register):
    register(Lz4())
