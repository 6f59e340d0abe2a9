"""The gzip codec inflates with ISA-L (the isal package) when it is there, and zlib stays the
definition: on valid streams, concatenated members, trailing bytes, truncated and damaged input,
the codec gives what it gives with zlib alone (same bytes, or the same error)."""
from __future__ import annotations

import gzip
import importlib

from hypothesis import given, settings
from hypothesis import strategies as st

from kfmt.errors import DataError

codec_module = importlib.import_module("kfmt.default_plugins.compression.gzip")


def outcome(data, max_size):
    try:
        return "value", codec_module.Gzip().decompress(data, magic=2, max_size=max_size)
    except DataError as err:
        return "error", err.message


def zlib_only(data, max_size):
    saved = codec_module._fast_zlib
    codec_module._fast_zlib = None
    try:
        return outcome(data, max_size)
    finally:
        codec_module._fast_zlib = saved


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=3000), min_size=1, max_size=3), st.binary(max_size=4),
       st.sampled_from(["none", "truncate", "flip", "trailer"]), st.data(),
       st.sampled_from([10, 1 << 20]))
def test_isal_inflate_agrees_with_zlib(members, tail, damage, data, max_size):
    stream = bytearray(b"".join(gzip.compress(m, mtime=0) for m in members) + tail)
    if damage == "truncate":
        del stream[data.draw(st.integers(0, len(stream) - 1)):]
    elif damage == "flip":
        stream[data.draw(st.integers(0, len(stream) - 1))] ^= data.draw(st.integers(1, 255))
    elif damage == "trailer":  # the CRC-32 or size of the last member
        stream[len(stream) - len(tail) - data.draw(st.integers(1, 8))] ^= 1
    assert outcome(bytes(stream), max_size) == zlib_only(bytes(stream), max_size)


def test_a_member_with_reserved_header_flags_gets_zlibs_verdict():
    """ISA-L reads a member whose FLG byte sets a bit RFC 1952 reserves; zlib refuses it, and zlib is the
    definition (hypothesis found it: a flip in the second member's header)."""
    first, second = gzip.compress(b"kafka", mtime=0), bytearray(gzip.compress(b"", mtime=0))
    for bit in (0x20, 0x40, 0x80):
        damaged = bytearray(second)
        damaged[3] |= bit
        for stream in (bytes(damaged), first + bytes(damaged)):
            assert outcome(stream, 1 << 20) == zlib_only(stream, 1 << 20)
