"""kfmt's own LZ4 frame decoder (kfmt/csrc/lz4.c), which the run walks use for the lz4 codec's frames,
held to the codec plugin it stands in for (plugins/compression/lz4.py over python-lz4): where the
kernel gives bytes, they are the plugin's; where the plugin refuses a frame (or finds it too large),
the kernel gives NotImplemented (it may also give NotImplemented where it is not sure, and the plugin
then decides). On frames the plugin and python-lz4's frame module make of random data, on random and
damaged frames and blocks, on hand-made token streams at the block format's edges, on every lz4 entry
of the real-broker corpus and on kafka-python's lz4 batches. Its XXH32 is the xxhash package's."""
from __future__ import annotations

import random
import struct

import lz4.block
import lz4.frame
import numpy as np
import pytest
import xxhash
from hypothesis import given
from hypothesis import strategies as st
from support import kernels
from support.corpus import REALKAFKA
from support.kernels import SETTINGS

from kfmt.errors import DataError
from kfmt.format import segment
from kfmt.format.kernels import native
from kfmt.plugin import registry

pytestmark = pytest.mark.needs("speedups")

MAX = 1 << 20


def plugin():
    return registry.get().compression_for(3, 2)


def held_to_plugin(frame: bytes, magic: int = 2, max_size: int = MAX, vouched: bool = False):
    """The kernel's answer is the plugin's, or NotImplemented; with `vouched`, never NotImplemented."""
    got = native.lz4_frame(frame, magic, max_size)
    try:
        want = plugin().decompress(frame, magic=magic, max_size=max_size)
    except DataError:
        assert got is NotImplemented
        return
    if vouched:
        assert got is not NotImplemented
    if got is not NotImplemented:
        assert got == bytes(want)


texts = st.binary(max_size=3000) | st.builds(
    lambda parts, n: b"".join(parts) * n, st.lists(st.binary(min_size=1, max_size=12), min_size=1, max_size=5),
    st.integers(1, 4000))


@SETTINGS
@given(st.binary(max_size=200))
def test_xxh32_is_the_xxhash_packages(data):
    assert native.xxh32(data) == xxhash.xxh32_intdigest(data)
    assert native.xxh32(data * 7) == xxhash.xxh32_intdigest(data * 7)


@SETTINGS
@given(texts, st.sampled_from([0, 1, 2]), st.sampled_from([None, 1, 9, 12]))
def test_the_plugins_frames(data, magic, level):
    held_to_plugin(plugin().compress(data, magic=magic, level=level), magic, vouched=True)


@SETTINGS
@given(texts, st.sampled_from([lz4.frame.BLOCKSIZE_MAX64KB, lz4.frame.BLOCKSIZE_MAX256KB,
                               lz4.frame.BLOCKSIZE_MAX1MB]), st.booleans(), st.booleans(), st.booleans(),
       st.sampled_from([0, 3, 12]))
def test_other_producers_frames(data, block_size, block_checksum, content_checksum, store_size, level):
    frame = lz4.frame.compress(data, block_linked=False, block_size=block_size, block_checksum=block_checksum,
                               content_checksum=content_checksum, store_size=store_size, compression_level=level)
    held_to_plugin(frame, 2, max_size=8 << 20, vouched=True)


@SETTINGS
@given(texts, st.data())
def test_damaged_frames(data, draw):
    frame = bytearray(plugin().compress(data, magic=2))
    for _ in range(draw.draw(st.integers(1, 3))):
        at = draw.draw(st.integers(0, len(frame) - 1))
        kind = draw.draw(st.sampled_from(["flip", "set", "cut", "insert"]))
        if kind == "flip":
            frame[at] ^= draw.draw(st.integers(1, 255))
        elif kind == "set":
            frame[at] = draw.draw(st.sampled_from([0, 0xFF, 0x0F, 0xF0, 0x80]))
        elif kind == "cut":
            del frame[at:at + draw.draw(st.integers(1, 8))]
        else:
            frame[at:at] = draw.draw(st.binary(min_size=1, max_size=4))
    if len(frame) > 7 and draw.draw(st.booleans()):  # the header checksum made right again
        frame[6] = (xxhash.xxh32_intdigest(bytes(frame[4:6])) >> 8) & 0xFF
    held_to_plugin(bytes(frame))
    held_to_plugin(bytes(frame), max_size=draw.draw(st.integers(0, len(data) + 1)))


def framed(*blocks: bytes, raw: bool = False, checksums: bool = False) -> bytes:
    """A Kafka-style frame (version 1, independent blocks, 64 KiB) around the given blocks."""
    flg = 0x60 | (0x10 if checksums else 0)
    out = bytearray(b"\x04\x22\x4d\x18" + bytes((flg, 0x40)))
    out.append((xxhash.xxh32_intdigest(bytes(out[4:6])) >> 8) & 0xFF)
    for block in blocks:
        out += struct.pack("<I", len(block) | (0x80000000 if raw else 0)) + block
        if checksums:
            out += struct.pack("<I", xxhash.xxh32_intdigest(block))
    return bytes(out + b"\0\0\0\0")


@st.composite
def token_streams(draw):
    """LZ4 blocks of random sequences: literal runs and matches of every length class (extension
    bytes included), offsets near and past the output written, and endings kept or broken."""
    out, written = bytearray(), 0
    for _ in range(draw(st.integers(0, 6))):
        lit = draw(st.integers(0, 20) | st.integers(250, 300))
        match = draw(st.integers(4, 22) | st.integers(270, 280))
        token = (min(lit, 15) << 4) | min(match - 4, 15)
        out.append(token)
        if lit >= 15:
            rest = lit - 15
            while rest >= 255:
                out.append(255)
                rest -= 255
            out.append(rest)
        out += draw(st.binary(min_size=lit, max_size=lit))
        written += lit
        offset = draw(st.integers(0, written + 2) | st.sampled_from([1, 2, 3, 7, 8, 15, 16, 17]))
        out += struct.pack("<H", offset & 0xFFFF)
        if match - 4 >= 15:
            rest = match - 4 - 15
            while rest >= 255:
                out.append(255)
                rest -= 255
            out.append(rest)
        written += match
    last = draw(st.integers(0, 40))
    out.append(min(last, 15) << 4)
    if last >= 15:
        out.append(last - 15)
    out += draw(st.binary(min_size=last, max_size=last))
    if draw(st.booleans()):  # cut or lengthened
        out = out[:draw(st.integers(0, len(out)))] + draw(st.binary(max_size=3))
    return bytes(out)


@SETTINGS
@given(token_streams(), st.booleans())
def test_hand_made_blocks(block, checksums):
    held_to_plugin(framed(block, checksums=checksums))
    held_to_plugin(framed(block, block, checksums=checksums))


def test_blocks_at_the_edges_of_the_output():
    """Blocks that fill a 64 KiB block to within a few bytes of its end, literals or matches last."""
    rng = random.Random(3)
    for size in (65536, 65535, 65531, 65524, 65523, 65000, 15, 16, 17, 20, 5, 1):
        data = bytes(rng.choice(b"ab") for _ in range(size))
        for mode in ("default", "high_compression"):
            block = lz4.block.compress(data, mode=mode, store_size=False)
            held_to_plugin(framed(block), vouched=True)
    # one long match after one literal, then 5 literals: ending 5 bytes before the capacity, 4 before
    # (into the last 5 bytes, which must be literals), and past it
    for match, fits in ((65530, True), (65531, False), (70000, False)):
        rest, ext = match - 4 - 15, bytearray()
        while rest >= 255:
            ext.append(255)
            rest -= 255
        ext.append(rest)
        block = b"\x1fa" + struct.pack("<H", 1) + bytes(ext) + b"\x50bbbbb"
        held_to_plugin(framed(block), vouched=fits)


def test_offset_zero_is_left_to_the_plugin():
    block = b"\x40abcd" + struct.pack("<H", 0) + b"\x50" + b"efghi"
    assert native.lz4_frame(framed(block), 2, MAX) is NotImplemented
    held_to_plugin(framed(block))


@pytest.mark.parametrize("name", ["v0-lz4-0", "v1-lz4-0", "v2-lz4-0"])
def test_every_lz4_entry_of_the_corpus(name):
    count = 0
    for log in sorted((REALKAFKA / name).glob("*.log")):
        data = log.read_bytes()
        for rows in segment.FrameScanner(data, log.name).chunks():
            rows = np.ascontiguousarray(rows)
            _at, spans = native.compressed_spans(data, rows, 0, len(rows), 0)
            spans = np.frombuffer(spans, np.int64).reshape(-1, 9)
            for at, n, codec, magic in spans[:, :4].tolist():
                if codec == 3 and n >= 0:
                    held_to_plugin(data[at:at + n], magic, vouched=True)
                    count += 1
    assert count


@SETTINGS
@given(kernels.compressed_entries())
def test_kafka_pythons_lz4_batches(case):
    data, _written = case
    for rows in segment.FrameScanner(data, "seg.log").chunks():
        rows = np.ascontiguousarray(rows)
        _at, spans = native.compressed_spans(data, rows, 0, len(rows), 0)
        for at, n, codec, magic in np.frombuffer(spans, np.int64).reshape(-1, 9)[:, :4].tolist():
            if codec == 3 and n >= 0:
                held_to_plugin(data[at:at + n], magic)
