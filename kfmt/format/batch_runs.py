"""Uncompressed v2 data batches checked and digested where they lie, many at a time.

A transform that copies batches byte for byte (reindex, resegment, the v2 batches of upgrade) must
still check every batch it copies (CRC, record structure) and report the content digest of their
records (kfmt.format.digest), but it needs no record as a column. `checked(data, rows, ...)` gives the
entries of a chunk of frames (kfmt.format.frames) in order, as
* `CheckedRun`s: consecutive uncompressed v2 data batches, each checked as the v2 format plugin's
  decode checks it (CRC-32C, record count, every record as decode_records parses it) and its records
  hashed into the content digest straight from their bytes, in one compiled call
  (kfmt/csrc/digest.c, digest_v2_batches);
* with `messages=True`, `CheckedRun`s of consecutive uncompressed v0/v1 messages too (each its own
  entry, so a legacy segment holds millions: per-entry Python work is what made reindex of old logs
  slow), each message checked as the legacy format plugin's decode checks it and hashed from its
  bytes (kfmt/csrc/legacy.c, digest_legacy_messages); and, on a strict read, runs of compressed
  data batches (v0/v1 wrappers and v2), each inflated by its codec and their records checked and
  hashed without building columns, a run at a time (kfmt.format.inflated_runs.walk). reindex wants
  these; upgrade converts legacy messages and leaves it off;
* decoded `Batch`es (segment.decode) for every other entry: compressed, control, and any batch the
  kernels do not vouch for, which the decode then rejects with the reader's error.

A reader that wants the records as columns (the export rows, kfmt.rows.ranges) takes a run of
uncompressed v2 data batches with `decode_run`: their records as one column block, in one compiled
call per few MB (kfmt/csrc/records_v2.c, decode_v2_batches), batch i's records the next
records_count rows, checked as the v2 format's decode checks each batch.

`digest_run_reference`, `digest_messages_reference` and `decode_run_reference` define what a run
gives (decode each entry; digest its columns or concatenate them); the kernels give the same
(tests/format/test_fast_paths.py), and without them (KFMT_PURE_PYTHON=1) the references run.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, TYPE_CHECKING

import numpy as np

from kfmt.errors import DataError, UsageError
from kfmt.format import inflated_runs, segment
from kfmt.format.digest import ContentDigest
from kfmt.format.frames import FRAME_DTYPE, header_of
from kfmt.format.kernels import native
from kfmt.format.layout import ATTR_CONTROL, MAGIC_V2
from kfmt.format.message_formats import STRICT, ReadOptions
from kfmt.format import model
from kfmt.format.model import Batch

if TYPE_CHECKING:
    import pyarrow as pa  # imported where used: not on the paths that hold no record columns


@dataclass
class CheckedRun:
    """Consecutive uncompressed v2 data batches, checked; their records were not decoded."""

    rows: np.ndarray  # their frames (FRAME_DTYPE): all v2, or all uncompressed v0/v1 messages
    digest: ContentDigest  # of their records
    first_offset: int | None  # of their first record (None: they hold none)

    @property
    def next_offset(self) -> int:
        return int(self.rows["last_offset"][-1]) + 1

    def span(self, base: int = 0) -> tuple[int, int]:
        """Where their bytes lie in the data (whose first byte is at file position `base`)."""
        start = int(self.rows["position"][0]) - base
        last = self.rows[-1]
        return start, int(last["position"]) - base + int(last["size"])


def checked(data, rows: np.ndarray, file: str, options: ReadOptions = STRICT,
            base: int = 0, messages: bool = False) -> Iterator[CheckedRun | Batch]:
    """The entries of `rows` (frames of `data`, the file from position `base` on), in order: runs of
    uncompressed v2 data batches (and with `messages`, of uncompressed v0/v1 messages) checked and
    digested in place, every other entry decoded."""
    rows = _frame_rows(rows)
    # rows no kernel takes (compressed, control) are decoded without asking one first: a segment of
    # compressed batches is all such rows
    plain = ((rows["compression"] == 0) & ((rows["magic"] >= MAGIC_V2) if not messages else True)
             & ~((rows["magic"] >= MAGIC_V2) & (rows["attributes"] & ATTR_CONTROL != 0))).tolist()
    wrappers = ((rows["compression"] != 0).tolist()
                if messages and native is not None and options.check_crc else None)
    start = 0
    while start < len(rows):
        if not plain[start]:
            if wrappers is not None and wrappers[start]:
                walked = inflated_runs.walk(data, rows, start, len(rows), base, options)
                if walked.stop > start:
                    yield CheckedRun(rows[start:walked.stop], walked.digest, walked.first)
                    start = walked.stop
                    continue
            yield segment.decode(data, header_of(rows[start].item()), file, options, base)
            start += 1
            continue
        stop, digest, first = _digest_run(data, rows, start, len(rows), base, options)
        if stop == start and messages:
            stop, digest, first = _digest_messages(data, rows, start, len(rows), base, options)
        if stop > start:
            yield CheckedRun(rows[start:stop], digest, first)
        if stop < len(rows):
            yield segment.decode(data, header_of(rows[stop].item()), file, options, base)
            stop += 1
        start = stop


def digest_run(data, rows: np.ndarray, start: int, stop: int, base: int = 0,
               options: ReadOptions = STRICT) -> tuple[int, ContentDigest, int | None]:
    """(where it stopped, the content digest, the first record's offset) of the uncompressed v2
    data batches of rows[start:stop], up to the first row that is not one or that decode would
    refuse."""
    return _digest_run(data, _frame_rows(rows), start, stop, base, options)


def _digest_run(data, rows, start, stop, base, options):
    return _digested("digest_v2_batches", digest_run_reference, data, rows, start, stop, base, options)


def _digested(kernel: str, reference, data, rows, start, stop, base, options):
    """A run digested by the named kernel, or by its reference where there are no kernels."""
    if native is None:
        return reference(data, rows, start, stop, base, options)
    at, records, high, low, first = getattr(native, kernel)(data, rows, start, stop, base,
                                                            options.check_crc)
    return at, ContentDigest(records, high << 64 | low), first


def digest_run_reference(data, rows: np.ndarray, start: int, stop: int, base: int = 0,
                         options: ReadOptions = STRICT) -> tuple[int, ContentDigest, int | None]:
    digest, first = ContentDigest(), None
    for i in range(start, stop):
        row = rows[i]
        if row["magic"] != MAGIC_V2 or row["compression"] or row["attributes"] & ATTR_CONTROL:
            return i, digest, first
        try:
            batch = segment.decode(data, header_of(row.item()), "", options, base)
        except DataError:  # the caller's decode of this row reports it
            return i, digest, first
        if first is None and len(batch):
            first = batch.records.column(0)[0].as_py()
        digest.update(batch.records)
    return stop, digest, first


def plain_batches(rows: np.ndarray) -> np.ndarray:
    """Which rows are uncompressed v2 data batches (what decode_run takes)."""
    return ((rows["magic"] == MAGIC_V2) & (rows["compression"] == 0)
            & (rows["attributes"] & ATTR_CONTROL == 0))


def decode_run(data, rows: np.ndarray, file: str, options: ReadOptions = STRICT,
               base: int = 0) -> pa.RecordBatch:
    """The records of a run of uncompressed v2 data batches (rows of `data`, the file from position
    `base` on; all plain_batches), as segment.decode of each gives them, concatenated: batch i's
    records are the next rows["records_count"][i] rows. A damaged batch raises the reader's error
    (segment.decode's: file, position, offset). Memory: the run's entries twice over, so callers
    hand it a few MB at a time (kfmt.format.legacy_runs.call_slices)."""
    rows = _plain_rows(rows)
    if native is None:
        return decode_run_reference(data, rows, file, options, base)
    pieces, start = [], 0
    while start < len(rows):
        at, records = native.decode_v2_batches(data, rows, start, len(rows), base, options.check_crc)
        if records.num_rows:
            pieces.append(records)
        if at < len(rows):  # a batch the kernel leaves to the per-batch decode, which reports damage
            pieces.append(segment.decode(data, header_of(rows[at].item()), file, options, base).records)
            at += 1
        start = at
    return _concat(pieces)


def decode_run_reference(data, rows: np.ndarray, file: str, options: ReadOptions = STRICT,
                         base: int = 0) -> pa.RecordBatch:
    rows = _plain_rows(rows)
    return _concat([segment.decode(data, header_of(row), file, options, base).records
                    for row in rows.tolist()])


def _plain_rows(rows: np.ndarray) -> np.ndarray:
    rows = _frame_rows(rows)
    if not plain_batches(rows).all():
        raise UsageError("a run holds uncompressed v2 data batches only (see plain_batches)")
    return rows


def _concat(pieces: list[pa.RecordBatch]) -> pa.RecordBatch:
    pieces = [p for p in pieces if p.num_rows]
    if not pieces:
        return model.EMPTY_RECORDS
    if len(pieces) == 1:
        return pieces[0]
    import pyarrow as pa

    return pa.Table.from_batches(pieces, model.RECORD_SCHEMA).combine_chunks().to_batches()[0]


def digest_messages(data, rows: np.ndarray, start: int, stop: int, base: int = 0,
                    options: ReadOptions = STRICT) -> tuple[int, ContentDigest, int | None]:
    """digest_run for uncompressed v0/v1 messages: up to the first row that is not one or that
    decode would refuse."""
    return _digest_messages(data, _frame_rows(rows), start, stop, base, options)


def _digest_messages(data, rows, start, stop, base, options):
    return _digested("digest_legacy_messages", digest_messages_reference, data, rows, start, stop, base,
                     options)


def digest_messages_reference(data, rows: np.ndarray, start: int, stop: int, base: int = 0,
                              options: ReadOptions = STRICT) -> tuple[int, ContentDigest, int | None]:
    digest, first = ContentDigest(), None
    for i in range(start, stop):
        row = rows[i]
        if row["magic"] >= MAGIC_V2 or row["compression"]:
            return i, digest, first
        try:
            batch = segment.decode(data, header_of(row.item()), "", options, base)
        except DataError:  # the caller's decode of this row reports it
            return i, digest, first
        if first is None:
            first = batch.records.column(0)[0].as_py()
        digest.update(batch.records)
    return stop, digest, first


def _frame_rows(rows: np.ndarray) -> np.ndarray:
    if rows.dtype != FRAME_DTYPE:
        rows = rows.astype(FRAME_DTYPE)
    return np.ascontiguousarray(rows)
