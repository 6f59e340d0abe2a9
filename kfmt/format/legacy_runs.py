"""Runs of uncompressed v0/v1 messages, a run at a time.

Uncompressed legacy data is not batched (docs/format.md §3): every message is its own log entry, so a
segment holds millions of them, and a loop that makes one Batch (one pyarrow RecordBatch) per message
cannot go near disk speed. These functions take rows of frames (kfmt.format.frames, from
FrameScanner.chunks()) and handle a whole run in one compiled call (kfmt/csrc/legacy.c):

* `message_runs(rows)`: where the runs of uncompressed legacy messages lie in a chunk of rows;
* `decode_run(...)`: the records of a run as one column block, with each message's CRC verdict;
* `record_blocks(...)`: the records of a whole byte range, a block per batch or per run;
* `encode_messages(...)`: uncompressed entries for many records at once;
* `upgrade_pieces(...)` / `upgrade_run(...)`: the v2 batches Kafka 4.0 makes of a run (kfmt.format.convert's rules: one
  single-record batch per message; with `rebatch`, consecutive messages grouped by `joins`, the rule
  of kfmt.transforms.upgrade), their rows, and the content digest of the records converted;
  `RunUpgrader` for a run that arrives chunk by chunk (kfmt upgrade).

The `*_reference` functions define the results, entry by entry through the message-format plugins;
the kernels give the same (tests/format/test_speedups.py). A kernel stops at the first entry it is not sure
of; that entry then goes through the per-entry path, which raises the error a reader reports.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, TYPE_CHECKING

import numpy as np

from kfmt.errors import UsageError
from kfmt.format import segment
from kfmt.format.convert import convert_batch, convert_run, rebatchable
from kfmt.format.digest import ContentDigest
from kfmt.format.frames import FRAME_DTYPE, header_of, rows_of
from kfmt.format.kernels import native
from kfmt.format.layout import LEGACY_MAGICS, LOG_OVERHEAD, MAGIC_V0, MAGIC_V1, MAGIC_V2, V2_BATCH_OVERHEAD
from kfmt.format.message_formats import STRICT, ReadOptions
from kfmt.format import model
from kfmt.format.model import INT32_MAX, Batch, BatchHeader, TimestampType
from kfmt.plugin import registry

if TYPE_CHECKING:
    import pyarrow as pa  # imported where used: not on the paths that hold no record columns

# Kafka's default message.max.bytes (1 MiB + the log overhead), kfmt.transforms.upgrade's default.
DEFAULT_MAX_BATCH_BYTES = 1024 * 1024 + LOG_OVERHEAD
# Entry bytes per kernel call: output memory stays small and reused (allocations below glibc's mmap
# threshold come back from the heap instead of as fresh pages) and within Arrow's 32-bit offsets.
MAX_CALL_BYTES = 1 << 23
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def in_kernels() -> bool:
    """Whether runs of messages are decoded and upgraded by the compiled kernels, which release the
    GIL (threads then suffice: kfmt.transforms.upgrade), rather than by the references here."""
    return native is not None


def message_runs(rows: np.ndarray) -> list[tuple[int, int]]:
    """(start, stop) of every maximal run of uncompressed legacy messages in `rows`."""
    is_message = (rows["magic"] < MAGIC_V2) & (rows["compression"] == 0)
    edges = np.flatnonzero(np.diff(np.concatenate(([0], is_message.view(np.int8), [0]))))
    return [(int(a), int(b)) for a, b in zip(edges[::2], edges[1::2])]


@dataclass
class DecodedRun:
    records: pa.RecordBatch  # RECORD_SCHEMA, one row per message
    crc_valid: np.ndarray  # bool, one per message


@dataclass
class UpgradedRun:
    entries: bytes  # the v2 batches, concatenated
    rows: np.ndarray  # their frames (FRAME_DTYPE), positions from `out_position` on
    digest: ContentDigest  # of the records converted


def decode_run(data, rows: np.ndarray, file: str, options: ReadOptions = STRICT,
               base: int = 0) -> DecodedRun:
    """The records of a run of uncompressed legacy messages (rows of `data`, a segment's bytes from
    file position `base` on), as `segment.decode` of each entry would give them, concatenated."""
    rows = _run_rows(rows)
    if native is None:
        return decode_run_reference(data, rows, file, options, base)
    pieces, valid = [], []
    for start, stop in call_slices(rows):
        while start < stop:
            start_at = start
            start, records, ok = native.decode_legacy_messages(data, rows, start, stop, base,
                                                               options.check_crc)
            if start > start_at:
                pieces.append(records)
                valid.append(np.frombuffer(ok, np.uint8).astype(bool))
            if start < stop:  # an entry the kernel is not sure of: the per-entry path decides
                batch = _decode_one(data, rows, start, file, options, base)
                pieces.append(batch.records)
                valid.append(np.array([batch.crc_valid]))
                start += 1
    return DecodedRun(_concat(pieces), np.concatenate(valid) if valid else np.zeros(0, bool))


def decode_run_reference(data, rows: np.ndarray, file: str, options: ReadOptions = STRICT,
                         base: int = 0) -> DecodedRun:
    batches = [_decode_one(data, rows, i, file, options, base) for i in range(len(rows))]
    return DecodedRun(_concat([b.records for b in batches]),
                      np.array([b.crc_valid for b in batches], dtype=bool))


def record_blocks(data, file: str, options: ReadOptions = STRICT, start: int | None = None,
                  end: int | None = None, base: int = 0) -> Iterator[pa.RecordBatch]:
    """The records of a byte range of a segment (as segment.batches decodes them), a column block per
    batch and one per run of uncompressed legacy messages; raises as segment.scan does at a bad tail."""
    scanner = segment.FrameScanner(data, file, start, end, base)
    for rows in scanner.chunks():
        done = 0
        for run_start, run_stop in message_runs(rows) + [(len(rows), len(rows))]:
            for i in range(done, run_start):
                yield _decode_one(data, rows, i, file, options, base).records
            if run_stop > run_start:
                yield decode_run(data, rows[run_start:run_stop], file, options, base).records
            done = run_stop
    if scanner.tail.is_error:
        raise scanner.tail.error(file)


def encode_messages(records: pa.RecordBatch, magic: int, log_append_time: int | None = None) -> bytes:
    """Uncompressed v0/v1 entries for `records`, one message each, with the records' offsets and
    timestamps (`log_append_time`: the time of a v1 LogAppendTime run, which every message reports)."""
    import pyarrow as pa  # records were made by it: already imported

    if native is not None and type(records) is pa.RecordBatch and magic in LEGACY_MAGICS:
        out = native.encode_legacy_messages(records, magic, 0, log_append_time if magic else None)
        if out is not NotImplemented:
            return out
    return encode_messages_reference(records, magic, log_append_time)


def encode_messages_reference(records: pa.RecordBatch, magic: int,
                              log_append_time: int | None = None) -> bytes:
    encode = registry.get().format_for(magic).encode
    lat = magic == MAGIC_V1 and log_append_time is not None
    ts_type = (TimestampType.NO_TIMESTAMP_TYPE if magic == MAGIC_V0 else
               TimestampType.LOG_APPEND_TIME if lat else TimestampType.CREATE_TIME)
    out = bytearray()
    for i, (offset, timestamp) in enumerate(zip(records.column(0).to_pylist(),
                                                records.column(1).to_pylist())):
        header = BatchHeader(magic, offset, offset, 0, ts_type,
                             max_timestamp=log_append_time if lat else timestamp)
        out += encode(header, records.slice(i, 1))
    return bytes(out)


def upgrade_run(data, rows: np.ndarray, file: str, *, options: ReadOptions = STRICT, base: int = 0,
                out_position: int = 0, rebatch: bool = False,
                max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES) -> UpgradedRun:
    """The v2 batches for a run of uncompressed legacy messages, as kfmt.format.convert makes them and the
    v2 format plugin encodes them; `out_position`: where the first one will sit in its file.
    All in memory: for whole segments, `upgrade_pieces` keeps memory bounded."""
    pieces = list(upgrade_pieces(data, rows, file, options=options, base=base,
                                 out_position=out_position, rebatch=rebatch,
                                 max_batch_bytes=max_batch_bytes))
    digest = ContentDigest()
    for piece in pieces:
        digest.merge(piece.digest)
    return UpgradedRun(b"".join(p.entries for p in pieces),
                       np.concatenate([p.rows for p in pieces]) if pieces else rows[:0].copy(), digest)


def upgrade_pieces(data, rows: np.ndarray, file: str, *, options: ReadOptions = STRICT,
                   base: int = 0, out_position: int = 0, rebatch: bool = False,
                   max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
                   close_last: bool = True) -> Iterator[UpgradedRun]:
    """upgrade_run in consecutive pieces of a few MB each (write each before asking for the next).
    With `close_last` False, a --rebatch group still open after the last row is left unconverted
    (its rows follow the converted ones: every message is one record, so the pieces' record counts
    say how many rows were converted); RunUpgrader gives them again with the run's next rows."""
    rows = _run_rows(rows)
    if native is None:
        run = upgrade_run_reference(data, rows, file, options=options, base=base,
                                    out_position=out_position, rebatch=rebatch,
                                    max_batch_bytes=max_batch_bytes, close_last=close_last)
        if run.digest.records:
            yield run
        return
    ends = np.cumsum(rows["size"], dtype=np.int64)
    start, written, budget = 0, 0, MAX_CALL_BYTES
    while start < len(rows):
        stop = _call_stop(ends, start, budget)
        last = stop == len(rows)
        at, refused, blob, new_rows, (records, high, low) = native.upgrade_legacy_messages(
            data, rows, start, stop, base, options.check_crc, out_position + written, rebatch,
            max_batch_bytes, last and close_last)
        if refused:
            _decode_one(data, rows, at, file, options, base)  # raises the reader's error
            raise AssertionError(f"{file}: kfmt._speedups refused the entry at position "
                                 f"{int(rows['position'][at])} that the reference accepts")
        if blob:
            yield UpgradedRun(blob, np.frombuffer(new_rows, FRAME_DTYPE),
                              ContentDigest(records, high << 64 | low))
        written += len(blob)
        if last and not close_last:
            return  # the group open at the end (if any) waits for the caller's next rows
        # A --rebatch group still open at `stop` is redone by the next call, which starts at its
        # first row; one that fills the whole call gets a larger one.
        budget = MAX_CALL_BYTES if at > start else budget * 2
        start = at


class RunUpgrader:
    """upgrade_pieces for one run of uncompressed legacy messages that arrives in parts (the rows of
    consecutive FrameScanner.chunks()): a --rebatch group still open at the end of a part waits for
    the next one, so the batches are those of the whole run, while memory holds one part (and one
    open group) at a time."""

    def __init__(self, data, file: str, *, options: ReadOptions = STRICT, base: int = 0,
                 rebatch: bool = False, max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES):
        self.data, self.file, self.options, self.base = data, file, options, base
        self.rebatch, self.max_batch_bytes = rebatch, max_batch_bytes
        self._open: np.ndarray | None = None  # rows of the group left open by the last part

    @property
    def waiting(self) -> np.ndarray | None:
        """The rows of the group left open by the last part (None: none)."""
        return self._open

    def pieces(self, rows: np.ndarray, *, more: bool = False,
               out_position: int = 0) -> Iterator[UpgradedRun]:
        """The v2 batches of the run's next rows (they follow the previous part's); `more`: the
        run may go on in the next part; `out_position`: where the first batch will be written."""
        rows = _run_rows(rows)
        if self._open is not None:
            rows, self._open = np.concatenate([self._open, rows]), None
        converted = 0
        for piece in upgrade_pieces(self.data, rows, self.file, options=self.options, base=self.base,
                                    out_position=out_position, rebatch=self.rebatch,
                                    max_batch_bytes=self.max_batch_bytes, close_last=not more):
            converted += piece.digest.records
            yield piece
        if converted < len(rows):
            self._open = rows[converted:].copy()

    def finish(self, out_position: int = 0) -> Iterator[UpgradedRun]:
        """The batches of a group still open: the run has ended."""
        if self._open is not None:
            rows, self._open = self._open, None
            yield from self.pieces(rows, out_position=out_position)


def upgrade_run_reference(data, rows: np.ndarray, file: str, *, options: ReadOptions = STRICT,
                          base: int = 0, out_position: int = 0, rebatch: bool = False,
                          max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
                          close_last: bool = True) -> UpgradedRun:
    digest = ContentDigest()
    encode = registry.get().format_for(MAGIC_V2).encode
    out = bytearray()
    group: list[Batch] = []
    group_bytes = 0

    def flush():
        header, records = convert_batch(group[0]) if len(group) == 1 else convert_run(group)
        out.extend(encode(header, records))
        for member in group:
            digest.update(member.records)

    for i in range(len(rows)):
        batch = _decode_one(data, rows, i, file, options, base)
        if group and rebatch and joins(group[0], group_bytes, batch, max_batch_bytes):
            group.append(batch)
            group_bytes += batch.header.size
            continue
        if group:
            flush()
        group, group_bytes = [batch], batch.header.size
    if group and close_last:
        flush()
    scanned = segment.FrameScanner(bytes(out), file, base=out_position)
    return UpgradedRun(bytes(out), rows_of(list(scanned)), digest)


def joins(first: Batch, group_bytes: int, batch: Batch, max_batch_bytes: int) -> bool:
    """Whether `batch` (an uncompressed legacy message) may join the --rebatch group that starts with
    `first` and holds `group_bytes` of legacy entries: kfmt.transforms.upgrade's rule (CreateTime
    messages only; the legacy entries, larger than the v2 records they become, within
    max_batch_bytes with a v2 batch header), plus deltas that the v2 fields can hold."""
    if not rebatchable(first, batch):
        return False
    a, b = first.records, batch.records
    offset_delta = b.column(0)[0].as_py() - a.column(0)[0].as_py()
    time_delta = b.column(1)[0].as_py() - a.column(1)[0].as_py()
    return (0 <= offset_delta <= INT32_MAX and _INT64_MIN <= time_delta <= _INT64_MAX
            and V2_BATCH_OVERHEAD + group_bytes + batch.header.size <= max_batch_bytes)


def _run_rows(rows: np.ndarray) -> np.ndarray:
    if rows.dtype != FRAME_DTYPE:
        rows = rows.astype(FRAME_DTYPE)
    if len(rows) and not ((rows["magic"] < MAGIC_V2) & (rows["compression"] == 0)).all():
        raise UsageError("a run holds uncompressed v0/v1 messages only (see message_runs)")
    return np.ascontiguousarray(rows)


def call_slices(rows: np.ndarray, max_bytes: int = MAX_CALL_BYTES) -> list[tuple[int, int]]:
    """Slices of rows whose entries hold at most `max_bytes` (more when one entry is larger)."""
    ends = np.cumsum(rows["size"], dtype=np.int64)
    out, start = [], 0
    while start < len(rows):
        stop = _call_stop(ends, start, max_bytes)
        out.append((start, stop))
        start = stop
    return out


def _call_stop(ends: np.ndarray, start: int, budget: int) -> int:
    done = int(ends[start - 1]) if start else 0
    return max(int(np.searchsorted(ends, done + budget, side="right")), start + 1)


def _decode_one(data, rows: np.ndarray, i: int, file: str, options: ReadOptions, base: int) -> Batch:
    return segment.decode(data, header_of(rows[i].item()), file, options, base)


def _concat(pieces: list[pa.RecordBatch]) -> pa.RecordBatch:
    if not pieces:
        return model.EMPTY_RECORDS
    if len(pieces) == 1:
        return pieces[0]
    import pyarrow as pa

    table = pa.Table.from_batches(pieces, model.RECORD_SCHEMA).combine_chunks()
    return table.to_batches()[0] if table.num_rows else model.EMPTY_RECORDS
