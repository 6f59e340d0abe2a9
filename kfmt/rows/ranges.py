"""Segments as units of parallel work (planned in kfmt.rows.range_plan), and reading one into export
rows (kfmt.rows.columns's schema).

Shared by `kfmt export` (kfmt.transforms.export) and the `kafka-log` Spark data source
(kfmt.pipelines.datasource), so both select and shape records the same way.

A unit is the byte range [start, end) of one segment (docs/format.md §2: a segment is a sequence of
entries; each `.log` starts on an entry boundary). Segments bigger than the split size are cut at
positions their `.index` gives: index entries point at entry starts (docs/format.md §6.5; for uncompressed v0/v1 the
start of an append, still an entry start). Each cut is checked the way a seek checks an index entry
(kfmt.partition.reader), and an implausible one is not used, so a stale index can cost parallelism but never
correctness. Units carry a StorageSpec, never an open handle (executors open storage themselves).

Which records a reader gets (`selection`): none below the partition's log start offset
(PartitionDir.log_start_offset, which each range carries) unless `include_deleted`, as a broker
serves the partition; control records only when asked; with read_committed, no
record of an aborted transaction and nothing at or beyond the last stable offset, by the rule of
kfmt.partition.transactions, whose outcomes for the whole partition each unit is given.

On a running broker's log directory (kfmt.partition.live) a range reads the segment as planned: the
last segment up to its planned end (its size when listed), whatever was appended since; a segment
deleted or replaced since the listing raises SegmentGone before any row of the range is made, so a
caller can end the partition at the ranges before it (kfmt.transforms.export_job does).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kfmt.errors import UsageError
from kfmt.format import batch_runs, inflated_runs, legacy_runs, segment
from kfmt.format.layout import ATTR_TRANSACTIONAL, MAGIC_V2
from kfmt.format.frames import header_of
from kfmt.partition.live import SegmentGone, maps_files, segment_bytes
from kfmt.partition.transactions import ABORTED, OPEN, TransactionOutcomes
from kfmt.partition.windows import Wanted, frame_mask
from kfmt.rows.range_chunks import Chunk, NoDigest, RangeTally, block_read  # noqa: F401 (NoDigest: its users')
from kfmt.rows.range_plan import (  # noqa: F401 (planning and reading ranges are one face to their users)
    SegmentRange,
    pack_ranges,
    partition_identity,
    plan_ranges,
    split_points,
    split_ranges,
)
from kfmt.storage.store import StorageSpec

ROWS_PER_CHUNK = 65536  # export rows built at a time (kfmt.rows.part_files gathers row groups)
BYTES_PER_CHUNK = 64 << 20  # ... or fewer, when the records are big

LEFT_OUT_CONTROL = "control"
LEFT_OUT_ABORTED = "aborted"
LEFT_OUT_UNSTABLE = "beyond_last_stable_offset"
LEFT_OUT_DELETED = "below_log_start_offset"
LEFT_OUT_EXPORTED = "below_resume_offset"  # an appending run: exported by an earlier run (kfmt.rows.resume)


@dataclass(frozen=True)
class Selection:
    """Which records a reader gets."""

    include_control: bool = False
    read_committed: bool = False
    include_deleted: bool = False

    def floor(self, rng: "SegmentRange") -> int | None:
        """The first offset read from a range: its partition's log start offset, or where an appending
        run resumes if that is later (None: all)."""
        floors = [f for f in (None if self.include_deleted else rng.log_start, rng.resume_from) if f is not None]
        return max(floors) if floors else None

    def left_out(self, header, outcomes: TransactionOutcomes | None) -> str | None:
        """Why a batch's records are left out (LEFT_OUT_*), or None if they are read."""
        if self.read_committed:
            status = outcomes.status(header)
            if status == OPEN:
                return LEFT_OUT_UNSTABLE
            if status == ABORTED:
                return LEFT_OUT_ABORTED
        if header.is_control and not self.include_control:
            return LEFT_OUT_CONTROL
        return None


def read_range(rng: SegmentRange, selection: Selection, outcomes: TransactionOutcomes | None = None,
               tally: RangeTally | None = None, rows_per_chunk: int = ROWS_PER_CHUNK,
               bytes_per_chunk: int = BYTES_PER_CHUNK, wanted: Wanted | None = None,
               gathered: bool = True) -> Iterator[pa.RecordBatch]:
    """Export rows of the selected records of a range, in offset order, in chunks of at most
    `rows_per_chunk` rows (or about `bytes_per_chunk` bytes of records), each made as soon as its
    batches are read: memory holds one chunk, whatever the size of the range. Every batch of the
    range is decoded and checked (CRCs, record structure): bad data raises DataError naming file,
    position and offset. Runs of uncompressed v0/v1 messages (kfmt.format.legacy_runs) and of data
    entries whose records are all selected (uncompressed v2 batches: kfmt.format.batch_runs
    .decode_run; compressed ones and v0/v1 wrappers, each inflated by its codec:
    kfmt.format.inflated_runs) are decoded a run at a time, as one column block; every other batch
    on its own (_runs). `tally` (if given) is filled in as the range is read. `wanted`
    (kfmt.partition.windows) leaves out, undecoded and uncounted, the batches that cannot hold a
    wanted record (the caller filters the rows of the others). With `gathered` False a
    chunk comes as the pieces its rows were built in (for a caller that gathers rows itself, as
    kfmt.rows.part_files does into row groups: the rows are then copied once, not twice)."""
    if selection.read_committed and outcomes is None:
        raise UsageError("read_committed needs the partition's transaction outcomes")
    tally = tally if tally is not None else RangeTally()
    # a pruned read (wanted) reads its range only: mapping counts, and on a cold cache may read ahead
    # into, bytes the query skips
    data, base = range_view(rng.source, rng.log_path, rng.start, rng.end, rng.file,
                            rng.segment_size, rng.last_segment, mapped=wanted is None or wanted.is_everything)
    if base + len(data) < rng.end:
        raise SegmentGone(rng.file, f"it ends at {base + len(data)} bytes, before the planned end of the "
                                    f"range at {rng.end}")
    chunk = Chunk(rng, rows_per_chunk, bytes_per_chunk, tally, gathered)
    floor = selection.floor(rng)
    exported = rng.resume_from is not None and floor == rng.resume_from != rng.log_start
    reason = LEFT_OUT_EXPORTED if exported else LEFT_OUT_DELETED
    scanner = segment.FrameScanner(data, rng.file, rng.start, rng.end, base)
    for rows in _wanted_frames(scanner.chunks(), wanted):
        if floor is not None and len(rows) and rows["last_offset"][0] < floor:
            rows = _deleted_left_out(data, base, rows, floor, rng, tally, reason)
        for kind, start, stop in _runs(rows, selection, outcomes, floor):
            if kind == _MESSAGES:
                yield from _read_messages(data, base, rows[start:stop], rng, selection, outcomes,
                                          tally, chunk)
            elif kind == _BATCHES:
                yield from _read_batches(data, base, rows[start:stop], rng, tally, chunk)
            elif kind == _COMPRESSED:
                run = rows[start:stop]
                if wanted is not None and wanted.timed:
                    run = run[_reaching(data, base, run, wanted)]
                if len(run):
                    yield from _read_compressed(data, base, run, rng, tally, chunk)
            else:
                for row in rows[start:stop].tolist():
                    batch = segment.decode(data, header_of(row), rng.file, base=base)
                    if floor is not None and len(batch) and batch.records.column(0)[0].as_py() < floor:
                        batch = _records_from(batch, floor, tally, reason)
                    yield from chunk.add_batch(batch, _selected(batch, selection, outcomes, tally))
    if scanner.tail.is_error:
        if not rng.ends_log:
            raise scanner.tail.error(rng.file)
        scanner.tail.recovered(rng.file)
        tally.tails.append(scanner.tail.recovery_message(rng.file))
    yield from chunk.flush()


_ONE, _MESSAGES, _BATCHES, _COMPRESSED = 0, 1, 2, 3  # how a run of rows is read (_runs)


def _runs(rows, selection: Selection, outcomes, floor: int | None) -> list[tuple[int, int, int]]:
    """(kind, start, stop) of consecutive rows read the same way, in order: runs of uncompressed
    legacy messages (_MESSAGES: each its own batch, kfmt.format.legacy_runs), and of data entries
    whose records are all selected: uncompressed v2 batches (_BATCHES: kfmt.format.batch_runs
    .decode_run), compressed v2 batches and v0/v1 wrappers (_COMPRESSED: kfmt.format.inflated_runs);
    every other row on its own (_ONE: decoded, selected as Selection.left_out says). An entry goes on
    its own where a record of it may be left out: one that may hold the log start offset (a wrapper's
    first offset is known only inflated: the chunk's first row), and with read_committed a
    transactional one or one at or beyond the last stable offset."""
    kinds = np.full(len(rows), _ONE, dtype=np.int8)
    messages = (rows["magic"] < MAGIC_V2) & (rows["compression"] == 0)
    whole = np.ones(len(rows), dtype=bool)
    if floor is not None:
        whole &= rows["base_offset"] >= floor
        whole[:1] &= rows["magic"][:1] >= 2  # rows before this chunk's all end below every later one
        # a message below the log start after one above it (offsets out of order) is not in the
        # deleted prefix _deleted_left_out takes away: it goes on its own, where the floor is applied
        messages &= rows["base_offset"] >= floor
    kinds[messages] = _MESSAGES
    if selection.read_committed:
        whole &= (rows["magic"] < MAGIC_V2) | (rows["attributes"] & ATTR_TRANSACTIONAL == 0)
        if outcomes.last_stable_offset is not None:
            whole &= rows["last_offset"] < outcomes.last_stable_offset
    kinds[whole & batch_runs.plain_batches(rows)] = _BATCHES
    kinds[whole & inflated_runs.compressed_entries(rows)] = _COMPRESSED
    edges = np.flatnonzero(np.diff(kinds)) + 1
    bounds = [0, *edges.tolist(), len(rows)]
    return [(int(kinds[a]), a, b) for a, b in zip(bounds, bounds[1:]) if b > a]


def _reaching(data, base: int, rows, wanted: Wanted) -> np.ndarray:
    """Which compressed data entries of `rows` hold a record in the wanted time range, as far as
    inflating them for their records' timestamps alone tells (kfmt.format.inflated_runs.walk: no
    columns, no rows made): a window's late records are kept, while the many entries after it whose
    greatest timestamp reaches into it only through their headers cost an inflate, not rows. Entries
    the walk leaves to the decoder are kept (it decides); with no lower bound at or above 0 (a record
    may have no timestamp, -1) or without the kernels, all are."""
    keep = np.ones(len(rows), dtype=bool)
    lo, hi = wanted.min_timestamp, wanted.max_timestamp
    if lo is None or lo < 0 or inflated_runs.native is None:
        return keep
    i = 0
    while i < len(rows):
        walked = inflated_runs.walk(data, rows, i, len(rows), base, digest=False)
        f = walked.facts
        hit = (f["flags"] & inflated_runs.HAS_TS != 0) & (f["max_ts"] >= lo)
        if hi is not None:
            hit &= f["min_ts"] <= hi
        keep[i:walked.stop] = hit
        i = walked.stop + 1  # an entry the walk leaves to the decoder (kept)
    return keep


def _wanted_frames(chunks, wanted: Wanted | None):
    """The chunks of frames, cut into runs of consecutive frames that may hold wanted records (each
    run stays contiguous in the file, as runs of legacy messages are decoded in one piece)."""
    for rows in chunks:
        keep = None if wanted is None else frame_mask(rows, wanted)
        if keep is None or keep.all():
            yield rows
            continue
        edges = np.flatnonzero(np.diff(np.concatenate(([0], keep.view(np.int8), [0]))))
        for a, b in zip(edges[::2], edges[1::2]):
            yield rows[a:b]


def _deleted_left_out(data, base: int, rows, floor: int, rng: SegmentRange, tally: RangeTally,
                      reason: str = LEFT_OUT_DELETED):
    """The frames of `rows` that hold offsets >= floor; the records of the others (deleted: below
    the log start offset; or exported before the resume point) are counted as left out without
    being checked, as a broker never reads them again. Counts come from the headers; a legacy wrapper's only from decompressing it."""
    below = rows[rows["last_offset"] < floor]
    deleted = 0
    for row in below.tolist():
        header = header_of(row)
        if header.records_count is not None:
            deleted += header.records_count
        else:
            deleted += len(segment.decode(data, header, rng.file, base=base))
    if deleted:
        tally.left_out[reason] = tally.left_out.get(reason, 0) + deleted
    return rows[len(below):]


def _records_from(batch, floor: int, tally: RangeTally, reason: str = LEFT_OUT_DELETED):
    """A batch holding the log start offset (or an appending run's resume point): its records from
    there on (the others counted as left out). Each row keeps its batch's facts, so it reads as it
    would from the whole batch."""
    kept = pc.greater_equal(batch.records.column(0), floor)
    records = batch.records.filter(kept)
    tally.left_out[reason] = tally.left_out.get(reason, 0) + len(batch) - records.num_rows
    return replace(batch, records=records, legacy=None)


def range_view(source: StorageSpec, path: str, start: int, end: int, file: str | None = None,
               listed_size: int | None = None, last_segment: bool = True, mapped: bool = True
               ) -> tuple[object, int]:
    """(bytes holding [start, end) of a file, the file position of their first byte): the whole file
    where the store memory-maps files (a view costs no memory of the process) and `mapped` allows,
    else the range read. With the listed size, a file gone or replaced since raises SegmentGone
    (kfmt.partition.live)."""
    storage, _ = source.open()
    whole = mapped and maps_files(storage)
    if listed_size is not None:  # mapped whole where the store maps (start 0), else the range
        return segment_bytes(storage, path, file or path, listed_size, last_segment,
                             0 if whole else start, end, mapped=whole)
    if whole:
        return storage.map(path), 0
    return storage.read(path, start, end), start


def _selected(batch, selection: Selection, outcomes, tally: RangeTally) -> bool:
    """Count a decoded batch in the tally; whether its records are exported."""
    header = batch.header
    tally.batches += 1
    tally.next_offset = header.next_offset
    n = len(batch)
    if header.is_control:
        tally.control_seen += n
    reason = selection.left_out(header, outcomes)
    if reason is not None:
        if n:
            tally.left_out[reason] = tally.left_out.get(reason, 0) + n
        return False
    if not n:
        return False  # an empty batch (compaction leaves them): no rows
    if header.is_control:
        tally.control_records += n
    else:
        if tally.first_offset is None:
            tally.first_offset = batch.records.column(0)[0].as_py()
        tally.records += n  # digested with the chunk's other batches (_Chunk._batches_done)
    return True


def _read_messages(data, base: int, rows, rng: SegmentRange, selection: Selection, outcomes,
                   tally: RangeTally, chunk: Chunk) -> Iterator[pa.RecordBatch]:
    """A run of uncompressed legacy messages: decoded (and checked) as one column block; each message
    is its own batch, selected as Selection.left_out selects it: a legacy message is neither control
    nor transactional, so only a read_committed reader's last stable offset can leave it out."""
    records = legacy_runs.decode_run(data, rows, rng.file, base=base).records
    n = len(rows)
    tally.batches += n
    tally.next_offset = int(rows["last_offset"][-1]) + 1
    kept = n
    if selection.read_committed and outcomes.last_stable_offset is not None:
        kept = int(np.searchsorted(rows["last_offset"], outcomes.last_stable_offset))
        if kept < n:
            tally.left_out[LEFT_OUT_UNSTABLE] = tally.left_out.get(LEFT_OUT_UNSTABLE, 0) + n - kept
    if not kept:
        return
    records = records.slice(0, kept)
    if tally.first_offset is None:
        tally.first_offset = int(rows["last_offset"][0])
    tally.records += kept
    tally.digest.update(records)
    yield from chunk.add_run(records, rows[:kept])


def _read_batches(data, base: int, rows, rng: SegmentRange, tally: RangeTally,
                  chunk: Chunk) -> Iterator[pa.RecordBatch]:
    """A run of uncompressed v2 data batches whose records are all selected (_runs): decoded and
    checked a few MB at a time as one column block each."""
    for start, stop in legacy_runs.call_slices(rows):
        piece = rows[start:stop]
        yield from block_read(batch_runs.decode_run(data, piece, rng.file, base=base), piece, tally, chunk)


def _read_compressed(data, base: int, rows, rng: SegmentRange, tally: RangeTally,
                     chunk: Chunk) -> Iterator[pa.RecordBatch]:
    """A run of compressed data entries whose records are all selected (_runs): each inflated by its
    codec, then decoded and checked a block of a few MB of records at a time."""
    for block in inflated_runs.inflated_blocks(data, rows, rng.file, base=base):
        yield from block_read(block.records, block.rows, tally, chunk, block.counts, block.base_offsets)
