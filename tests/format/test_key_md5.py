"""kfmt's own MD5 (kfmt/csrc/md5.c, the compaction offset map's key hash) against hashlib.md5.

It is reached through the kernel the offset map calls, key_md5s(records, indices). MD5's padding
changes shape at 56 bytes into a block (the length no longer fits: a second padding block), so every
key length up to a few blocks is checked, then hypothesis keys and index choices.
"""
from __future__ import annotations

import hashlib
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kfmt.format import kernels as speedups
from kfmt.format.model import make_records
from kfmt.format.offset_map import record_key_hashes

native = speedups.native
pytestmark = pytest.mark.needs("speedups")  # the compiled kernels against their peers


def with_keys(keys: list[bytes | None]):
    n = len(keys)
    return make_records(list(range(n)), [0] * n, keys, [b"v"] * n)


def native_md5s(keys: list[bytes | None], indices: list[int]) -> list[bytes]:
    raw = native.key_md5s(with_keys(keys), np.array(indices, dtype=np.int64))
    assert raw is not NotImplemented
    return [raw[16 * i:16 * i + 16] for i in range(len(indices))]


def test_every_key_length_up_to_five_blocks():
    rng = random.Random(1321)
    keys = [rng.randbytes(n) for n in range(321)] + [b"\x00" * 56, b"\xff" * 64, b"a" * 1_000_000]
    assert native_md5s(keys, list(range(len(keys)))) == [hashlib.md5(k).digest() for k in keys]


def test_rfc_1321_test_suite():
    # the test suite in RFC 1321's appendix A.5
    suite = {b"": "d41d8cd98f00b204e9800998ecf8427e", b"a": "0cc175b9c0f1b6a831c399e269772661",
             b"abc": "900150983cd24fb0d6963f7d28e17f72", b"message digest": "f96b697d7cb7938d525a2f31aaf161d0",
             b"abcdefghijklmnopqrstuvwxyz": "c3fcd3d76192e4007dfb496cca67e13b",
             b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789":
                 "d174ab98d277d9f5a5611c2c9f419d9f",
             b"1234567890" * 8: "57edf4a22be3c955ac49da2e2107b67a"}
    keys = list(suite)
    assert [d.hex() for d in native_md5s(keys, list(range(len(keys))))] == list(suite.values())


@settings(max_examples=100, deadline=None)
@given(st.lists(st.binary(max_size=300), min_size=1, max_size=20), st.data())
def test_keys_and_indices(keys, data):
    indices = data.draw(st.lists(st.integers(0, len(keys) - 1), max_size=30))
    assert native_md5s(keys, indices) == [hashlib.md5(keys[i]).digest() for i in indices]


def test_a_null_key_is_left_to_the_reference():
    records = with_keys([b"k", None])
    assert native.key_md5s(records, np.array([1], dtype=np.int64)) is NotImplemented
    # while a present key goes through the kernel, as the offset map reads it (big-endian halves)
    digest = hashlib.md5(b"k").digest()
    expected = [int.from_bytes(digest[:8], "big"), int.from_bytes(digest[8:], "big")]
    assert record_key_hashes(records, np.array([0])).tolist() == [expected]
