"""The compiled checksums (kfmt/csrc/crc.c) against independent implementations: CRC-32 of v0/v1
messages against zlib.crc32, CRC-32C of v2 batches against kafka-python's calc_crc32c.

CRC-32 folds 64 bytes at a time with carry-less multiplies from 64 bytes on, then 16 at a time, and
finishes with the table: every length 0..4096 crosses each of those boundaries, from every start
offset within a word, and large buffers run the main loop long. CRC-32C runs three chains of 64
bytes at once and joins them with shift tables (192 bytes a round), then one chain: the same lengths
cross its round boundaries, and runs of zeros and of ones the extremes of the shift tables.
"""
from __future__ import annotations

import random
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.util import calc_crc32c

from kfmt.format import kernels as speedups

native = speedups.native
pytestmark = pytest.mark.needs("speedups")  # the compiled kernels against their peers


def test_crc32_of_every_length_up_to_4096():
    data = random.Random(32).randbytes(4096 + 8)
    for n in range(4097):
        start = n % 8  # and every alignment
        piece = memoryview(data)[start:start + n]
        assert native.crc32(piece) == zlib.crc32(piece), n


def test_crc32_of_large_buffers():
    rng = random.Random(64)
    for n in (64 << 10, (1 << 20) + 13, 3 * (1 << 20) + 64 + 15):
        data = rng.randbytes(n)
        assert native.crc32(data) == zlib.crc32(data), n


def test_crc32_of_constant_bytes():
    # zeros leave the folded lanes empty and all-ones fill every product: the extremes of the algebra
    for n in (0, 1, 63, 64, 65, 79, 80, 127, 128, 129, 1000, 65536):
        for fill in (b"\x00", b"\xff"):
            assert native.crc32(fill * n) == zlib.crc32(fill * n), (n, fill)


@settings(max_examples=80, deadline=None)
@given(st.binary(max_size=5000))
def test_crc32_of_any_bytes(data):
    assert native.crc32(data) == zlib.crc32(data)


def test_crc32c_check_value_and_lengths():
    assert native.crc32c(b"123456789") == 0xE3069283  # the CRC-32C catalogue's check value
    data = random.Random(3).randbytes(700)
    for n in range(0, 700, 7):
        assert native.crc32c(data[:n]) == calc_crc32c(data[:n]), n


def test_crc32c_of_every_length_up_to_4096():
    data = random.Random(33).randbytes(4096 + 8)
    for n in range(4097):
        start = n % 8
        piece = bytes(data[start:start + n])
        assert native.crc32c(piece) == calc_crc32c(piece), n
    for n in (191, 192, 193, 384, 385, 1 << 20):
        for fill in (b"\x00", b"\xff"):
            assert native.crc32c(fill * n) == calc_crc32c(fill * n), (n, fill)


@settings(max_examples=80, deadline=None)
@given(st.binary(max_size=5000), st.integers(0, 7))
def test_crc32c_of_any_bytes(data, start):
    assert native.crc32c(memoryview(data)[start:]) == calc_crc32c(data[start:])
