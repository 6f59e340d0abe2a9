"""Entries copied byte for byte, checked as Kafka's log recovery checks them and digested by their bytes.

A command that copies batches as they are (reindex, resegment, restore, retain, archive) changes no
record, so it has no record to check: Kafka's own recovery (LogSegment.recover) asks of each batch only
that it is whole and its CRC holds (RecordBatch.ensureValid) -- the CRC covers the stored bytes, a
compressed batch's compressed ones -- and never inflates it. kfmt does the same by default and proves
the copy with the entries digest (kfmt.format.digest.EntriesDigest: XXH3-128 of every entry's bytes,
summed) of what it read and of what it wrote; both run at memory speed. The record-level check --
every batch inflated, every record parsed, the content digest of the records -- is `--deep` (and
`kfmt verify`).

`copied(data, rows, file)` gives the entries of a chunk of frames in order as CopiedRuns: runs checked
and digested in one compiled call (kfmt/csrc/entries.c, entries_digest), and single entries decoded --
control batches, whose markers the companion files need, and any entry the check refuses, whose
strict decode then raises the reader's error (file, position, offset). `entries_digest_reference`
defines the check; without the kernels (KFMT_PURE_PYTHON=1) it runs instead.

What the headers tell of the records is counted from the rows (`header_counts`): a v2 batch's record
count, one record per uncompressed v0/v1 message; a compressed v0/v1 wrapper's records are known only
inflated, so it is counted apart (`uncounted`), and where one comes first the first offset is unknown.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from kfmt.format import segment
from kfmt.format.digest import EntriesDigest
from kfmt.format.frames import FRAME_DTYPE, header_of
from kfmt.format.layout import ATTR_CONTROL, LEGACY_MESSAGES, LOG_OVERHEAD, RECORD_OVERHEAD
from kfmt.format.kernels import native
from kfmt.format.message_formats import STRICT, ReadOptions
from kfmt.format.model import Batch
from kfmt.format.wire import crc32, crc32c

_V2_OVERHEAD = 61
_V2_CRC_FROM = 21  # the CRC-32C covers a v2 batch from its attributes on (docs/format.md §4.1)
_LEGACY_CRC_FROM = 16  # the CRC-32 covers a v0/v1 message from its magic on (docs/format.md §3.1)
_V2_HEADER = struct.Struct(">qiibIhiqqqhii")
_LEGACY_PREFIX = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_INT32 = struct.Struct(">i")


@dataclass
class CopiedRun:
    """Consecutive entries checked and digested by their bytes; `batch`: the one entry of the run,
    decoded (a control batch, or an entry the check left to the decode)."""

    rows: np.ndarray
    digest: EntriesDigest
    batch: Batch | None = None


def in_kernels() -> bool:
    """Whether the check runs in the compiled walk, which releases the GIL: then threads of one process
    check copies in parallel as well as worker processes would (kfmt.pipelines.engine), the rest of a
    copy's work being writes and SHA-256, which release it too."""
    return native is not None


def copied(data, rows: np.ndarray, file: str, base: int = 0,
           options: ReadOptions = STRICT) -> Iterator[CopiedRun]:
    """The entries of `rows` (frames of `data`, the file from position `base` on), in order (see the
    module doc)."""
    rows = _frame_rows(rows)
    controls = np.flatnonzero((rows["magic"] >= 2) & (rows["attributes"] & ATTR_CONTROL != 0)).tolist()
    start = 0
    for stop in controls + [len(rows)]:  # the runs between control batches, then each control batch
        while start < stop:
            at, digest = entries_digest(data, rows, start, stop, base)
            if at > start:
                yield CopiedRun(rows[start:at], digest)
            if at < stop:  # the check refuses it: the decode says why (or reads it after all)
                yield _decoded(data, rows, at, file, options, base)
                at += 1
            start = at
        if stop < len(rows):
            yield _decoded(data, rows, stop, file, options, base)
            start = stop + 1


def _decoded(data, rows: np.ndarray, i: int, file: str, options: ReadOptions, base: int) -> CopiedRun:
    row = rows[i]
    batch = segment.decode(data, header_of(row.item()), file, options, base)
    at = int(row["position"]) - base
    return CopiedRun(rows[i:i + 1], EntriesDigest.of(data[at:at + int(row["size"])]), batch)


def entries_digest(data, rows: np.ndarray, start: int, stop: int, base: int = 0) -> tuple[int, EntriesDigest]:
    """(where the check stopped, the entries digest of rows[start:that]): the compiled walk, or its
    reference where there are no kernels."""
    if native is None:
        return entries_digest_reference(data, rows, start, stop, base)
    at, high, low = native.entries_digest(data, rows, start, stop, base)
    return at, EntriesDigest(at - start, high << 64 | low)


def entries_digest_reference(data, rows: np.ndarray, start: int, stop: int,
                             base: int = 0) -> tuple[int, EntriesDigest]:
    digest = EntriesDigest()
    for i in range(start, stop):
        row = rows[i]
        at, size = int(row["position"]) - base, int(row["size"])
        if at < 0 or size < LOG_OVERHEAD + 5 or at + size > len(data):
            return i, digest
        entry = bytes(data[at:at + size])
        if not (_v2_valid(entry, row) if row["magic"] == 2 else _legacy_valid(entry, row)):
            return i, digest
        digest.add(entry)
    return stop, digest


def _v2_valid(entry: bytes, row) -> bool:
    """A v2 batch whose header is the row's and whose CRC-32C holds."""
    if len(entry) < _V2_OVERHEAD:
        return False
    (base_offset, length, epoch, magic, crc, attributes, last_delta, base_ts, max_ts, pid, pepoch, seq,
     count) = _V2_HEADER.unpack_from(entry)
    described = ((base_offset, length + LOG_OVERHEAD, epoch, magic, crc, attributes, base_ts, max_ts, pid,
                  pepoch, seq, count)
                 == (row["base_offset"], row["size"], row["partition_leader_epoch"], 2, row["crc"],
                     row["attributes"], row["base_timestamp"], row["max_timestamp"], row["producer_id"],
                     row["producer_epoch"], row["base_sequence"], row["records_count"])
                 and _wrapped(base_offset + last_delta) == row["last_offset"]
                 and row["compression"] == attributes & 0x07
                 and row["timestamp_type"] == (1 if attributes & 0x08 else 0))
    return described and crc32c(entry[_V2_CRC_FROM:]) == crc


def _legacy_valid(entry: bytes, row) -> bool:
    """A v0/v1 message framed as LegacyMessage frames it (key and value lengths filling it exactly),
    whose CRC-32 holds and whose offset, magic, CRC and codec are the row's."""
    offset, _size, crc, magic, attributes = _LEGACY_PREFIX.unpack_from(entry)
    if magic not in LEGACY_MESSAGES or len(entry) - LOG_OVERHEAD < RECORD_OVERHEAD[magic]:
        return False
    pos = LEGACY_MESSAGES[magic].at("key")
    for _ in range(2):  # key, then value
        if pos + 4 > len(entry):
            return False
        (n,) = _INT32.unpack_from(entry, pos)
        pos += 4 + max(n, 0)
        if pos > len(entry):
            return False
    return (pos == len(entry) and crc32(entry[_LEGACY_CRC_FROM:]) == crc
            and (offset, magic, crc, attributes & 0x07)
            == (row["last_offset"], row["magic"], row["crc"], row["compression"]))


def _wrapped(value: int) -> int:
    return (value + (1 << 63)) % (1 << 64) - (1 << 63)


@dataclass
class HeaderCounts:
    """What the headers of some entries say of their records (data records only)."""

    records: int  # v2 data batches' counts and one per uncompressed v0/v1 message
    uncounted: int  # compressed v0/v1 wrappers: their records are known only inflated
    first_offset: int | None  # of the first data entry holding records (None: none, or a wrapper first)
    first_known: bool  # whether some data entry with records (or a wrapper) came: first_offset is final


def header_counts(rows: np.ndarray) -> HeaderCounts:
    """The records of data entries (no control batch) as their headers count them (see the module
    doc). A v2 batch's first offset is taken as its base offset (a compacted batch's first record may
    lie above it: `--deep` reads it)."""
    wrapper = (rows["magic"] < 2) & (rows["compression"] != 0)
    counts = np.where(rows["magic"] >= 2, rows["records_count"], 1)
    counts = np.where(wrapper, 0, counts)
    holding = np.flatnonzero(wrapper | (counts > 0))
    first = None
    if len(holding):
        row = rows[holding[0]]
        first = None if wrapper[holding[0]] else int(row["base_offset"] if row["magic"] >= 2 else row["last_offset"])
    return HeaderCounts(int(counts.sum()), int(wrapper.sum()), first, bool(len(holding)))


def _frame_rows(rows: np.ndarray) -> np.ndarray:
    if rows.dtype != FRAME_DTYPE:
        rows = rows.astype(FRAME_DTYPE)
    return np.ascontiguousarray(rows)
