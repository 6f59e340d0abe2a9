"""The content digest: what lets a reader check that a transform kept the records it should.

The content digest covers what a consumer sees of every data record: offset, timestamp (as a
consumer reports it: LogAppendTime and v0 resolved, docs/format.md §3.5, §4.3), key, value and headers.
It does not depend on how the records are batched, compressed, encoded (magic) or split into
segments, so `reindex`, `upgrade`, `resegment` and `recompress` must leave it unchanged. Control
records (transaction markers) are not content: they are counted apart.

Digest definition (version 2), so that other tools can recompute it: each record is written
canonically as offset (int64 big-endian), timestamp (int64 BE), key length (int32 BE, -1 for null),
key, value length, value, header count (int32 BE), then per header key length, key, value length (-1
for null), value; the record's hash is XXH3-128 of those bytes; the digest is the number of records
and the sum of the record hashes modulo 2**128, written `<records>:<32 hex digits>`. A sum can be
computed in parts and added up, so parallel tasks that each see a segment (or a part of one) give the
digest of a partition however it is split; and since every record hash covers its offset, records
cannot trade places unnoticed.
"""
from __future__ import annotations

import struct
from typing import TYPE_CHECKING

import xxhash

from kfmt.format.kernels import native

if TYPE_CHECKING:
    import pyarrow as pa  # imported where used: not on the paths that hold no record columns

DIGEST_VERSION = 2
_MOD = 1 << 128
_OFFSET_AND_TIMESTAMP = struct.Struct(">qq")
_INT32 = struct.Struct(">i")
_NULL = _INT32.pack(-1)


def _sized(data: bytes | None) -> bytes:
    return _NULL if data is None else _INT32.pack(len(data)) + data


def record_hashes_sum(records: pa.RecordBatch) -> int:
    """The sum (mod 2**128) of the records' XXH3-128 hashes of their canonical form (computed in C
    when kfmt.format.kernels has its kernels: kfmt/csrc/digest.c; same result)."""
    import pyarrow as pa  # records were made by it: already imported

    if native is not None and type(records) is pa.RecordBatch:
        total = native.record_hashes_sum(records)
        if total is not NotImplemented:
            high, low = total
            return high << 64 | low
    return record_hashes_sum_reference(records)


def record_hashes_sum_reference(records: pa.RecordBatch) -> int:
    hash128 = xxhash.xxh3_128_intdigest
    total = 0
    cols = [records.column(i).to_pylist() for i in range(5)]
    for offset, timestamp, key, value, headers in zip(*cols):
        parts = [_OFFSET_AND_TIMESTAMP.pack(offset, timestamp), _sized(key), _sized(value),
                 _INT32.pack(len(headers))]
        for header in headers:
            parts.append(_sized(header["key"]))
            parts.append(_sized(header["value"]))
        total += hash128(b"".join(parts))
    return total % _MOD


class _HashSum:
    """A count of hashed things and the sum of their 128-bit hashes modulo 2**128, written
    `<count>:<32 hex digits>`: parts (segments, tasks) add up with `merge` however the work was split."""

    def __init__(self, count: int = 0, total: int = 0):
        self.count = count
        self.total = total

    def _add(self, count: int, total: int) -> None:
        self.count += count
        self.total = (self.total + total) % _MOD

    def merge(self, other):
        self._add(other.count, other.total)
        return self

    def hexdigest(self) -> str:
        return f"{self.count}:{self.total:032x}"

    @classmethod
    def parse(cls, text: str):
        count, _, total = text.partition(":")
        return cls(int(count), int(total, 16))

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and (self.count, self.total) == (other.count, other.total)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.hexdigest()})"


class ContentDigest(_HashSum):
    """The content digest of data records (see the module docstring); parts add up with `merge`."""

    @property
    def records(self) -> int:
        return self.count

    def update(self, records: pa.RecordBatch) -> None:
        if records.num_rows:
            self._add(records.num_rows, record_hashes_sum(records))


class EntriesDigest(_HashSum):
    """The entries digest: what proves a byte-for-byte copy of log entries (kfmt.format.copied_runs).
    Each entry's bytes (from its offset field to its end, as they lie in the segment) hashed with
    XXH3-128, the hashes summed modulo 2**128, written `<entries>:<32 hex digits>`; like the content
    digest it adds up over parts, so it does not depend on how entries are split into segments or
    tasks, but it changes with any byte of them (so it holds only for commands that change none)."""

    @property
    def entries(self) -> int:
        return self.count

    @classmethod
    def of(cls, entry) -> "EntriesDigest":
        digest = cls()
        digest.add(entry)
        return digest

    def add(self, entry) -> None:
        hash128 = native.xxh3_128 if native is not None else xxhash.xxh3_128_intdigest
        self._add(1, hash128(bytes(entry)))
