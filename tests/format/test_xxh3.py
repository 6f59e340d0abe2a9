"""kfmt's own XXH3-128 (kfmt/csrc/xxh3.c, the content digest's record hash) against the xxhash package.

The algorithm mixes seven length classes differently (0, 1-3, 4-8, 9-16, 17-128, 129-240 and longer,
where 64-byte stripes, 1024-byte blocks with a scramble after each, and a last overlapping stripe
meet), so every length up to a little past two blocks is checked, then random lengths up to 1 MiB,
with each vector width of the long loop this CPU runs (scalar, SSE2, AVX2, AVX-512).
The digest kernels that call it are checked against the pure-Python reference (which hashes with the
xxhash package) on records whose canonical forms land in each class.
"""
from __future__ import annotations

import random

import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from kfmt.format import kernels as speedups
from kfmt.format.digest import record_hashes_sum, record_hashes_sum_reference
from kfmt.format.model import make_records

native = speedups.native
pytestmark = pytest.mark.needs("speedups")  # the compiled kernels against their peers
WIDTHS = ["scalar", "sse2", "avx2", "avx512f"]


@pytest.fixture(params=WIDTHS)
def width(request):
    """Run the test with the long loop of one vector width (skipped where the CPU lacks it)."""
    chosen = native.implementation()["xxh3"]
    if not native.xxh3_select(request.param):
        pytest.skip(f"no {request.param} long loop on this machine")
    try:
        yield request.param
    finally:
        assert native.xxh3_select(chosen)


def test_the_widest_loop_is_chosen():
    chosen = native.implementation()["xxh3"]
    wider = WIDTHS[WIDTHS.index(chosen) + 1:]
    assert not any(native.xxh3_select(name) for name in wider)
    assert native.implementation()["xxh3"] == chosen


def test_every_length_up_to_two_blocks_and_a_bit(width):
    rng = random.Random(13)
    data = rng.randbytes(2100)
    for n in range(2101):
        assert native.xxh3_128(data[:n]) == xxhash.xxh3_128_intdigest(data[:n]), n


def test_input_not_at_the_start_of_a_buffer():
    # unaligned reads: the same lengths from every offset within a word
    data = random.Random(7).randbytes(1200)
    for start in range(1, 9):
        for n in (3, 8, 16, 17, 128, 129, 240, 241, 1024, 1025):
            piece = memoryview(data)[start:start + n]
            assert native.xxh3_128(piece) == xxhash.xxh3_128_intdigest(bytes(piece)), (start, n)


def test_bytes_that_differ_only_in_one_place(width):
    # all-zero and all-0xff inputs and single flipped bits: the lane carries and the 32x32 products'
    # extremes, which random bytes seldom reach
    for n in (0, 1, 3, 4, 8, 9, 16, 17, 100, 128, 129, 200, 240, 241, 1024, 1025, 4096, 70000):
        for fill in (0x00, 0xFF):
            data = bytearray([fill]) * n
            assert native.xxh3_128(data) == xxhash.xxh3_128_intdigest(bytes(data)), (n, fill)
            if n:
                data[n // 2] ^= 0x80
                assert native.xxh3_128(data) == xxhash.xxh3_128_intdigest(bytes(data)), (n, fill, "flip")


@pytest.mark.parametrize("name", WIDTHS)
def test_random_lengths_up_to_a_mebibyte(name):
    chosen = native.implementation()["xxh3"]
    if not native.xxh3_select(name):
        pytest.skip(f"no {name} long loop on this machine")

    # The bytes come from a seeded random.Random, not from hypothesis's own (which draws a megabyte
    # byte by byte and can take minutes): hypothesis picks the length and the seed.
    @settings(max_examples=40, deadline=None)
    @given(st.integers(0, 1 << 20), st.integers(0, 2**32 - 1))
    def check(n, seed):
        data = random.Random(seed).randbytes(n)
        assert native.xxh3_128(data) == xxhash.xxh3_128_intdigest(data)

    try:
        check()
    finally:
        assert native.xxh3_select(chosen)


def records_of_sizes(sizes: list[int]):
    """Records whose values have the given sizes (the canonical form adds 32 bytes and any headers)."""
    rng = random.Random(sum(sizes))
    n = len(sizes)
    return make_records(list(range(100, 100 + n)), [1_700_000_000_000 + i for i in range(n)],
                        [rng.randbytes(rng.randrange(0, 9)) if i % 3 else None for i in range(n)],
                        [rng.randbytes(size) for size in sizes],
                        [[(b"h", rng.randbytes(5))] if i % 4 == 1 else [] for i in range(n)])


def test_record_digest_in_every_length_class():
    # canonical forms from 32 bytes (the smallest record) to several blocks
    sizes = [0, 1, 5, 40, 90, 97, 150, 200, 208, 209, 300, 1000, 1024, 3000, 70000]
    records = records_of_sizes(sizes)
    assert record_hashes_sum(records) == record_hashes_sum_reference(records)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 5000), max_size=12))
def test_record_digest_of_random_sizes(sizes):
    records = records_of_sizes(sizes)
    assert record_hashes_sum(records) == record_hashes_sum_reference(records)
