"""Segments as units of parallel work, and reading one into export rows (kfmt.rows.columns's schema).

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

from dataclasses import dataclass, field, replace
from typing import Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kfmt.defaults import DEFAULT_SPLIT_BYTES
from kfmt.errors import DataError, UsageError
from kfmt.format import batch_runs, inflated_runs, legacy_runs, segment
from kfmt.format.digest import ContentDigest
from kfmt.format.layout import ATTR_TRANSACTIONAL, MAGIC_V2
from kfmt.format.frames import header_of
from kfmt.partition.indexes import OffsetEntry
from kfmt.partition.layout import PartitionDir
from kfmt.partition.live import SegmentGone, maps_files, segment_bytes
from kfmt.partition.reader import PartitionReader
from kfmt.partition.transactions import ABORTED, OPEN, TransactionOutcomes
from kfmt.partition.windows import Wanted, frame_mask
from kfmt.rows.columns import concat_records, export_batch, export_frames
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


@dataclass(frozen=True)
class SegmentRange:
    """One unit of work: bytes [start, end) of one segment, starting on an entry boundary."""

    source: StorageSpec  # opens the storage holding the segment
    log_path: str  # the .log inside that storage
    file: str  # how messages name the file
    topic: str
    partition: int
    segment_base: int
    index: int  # its number among the ranges of its segment (0 when the segment is not cut)
    start: int
    end: int
    log_start: int | None = None  # the partition's log start offset (PartitionDir.log_start_offset)
    ends_log: bool = False  # the last range of the partition's last segment: a bad tail there is
    # what log recovery truncates (kfmt.partition.segment), left out with a warning
    segment_size: int | None = None  # the .log's size when listed (None: not checked)
    last_segment: bool = False  # of the partition's last segment (which may grow while read)
    resume_from: int | None = None  # an appending run: the offset it resumes from, which may lie inside
    # a batch; the records below it were exported before and are left out (kfmt.rows.resume)


def partition_identity(part: PartitionDir) -> tuple[str, int]:
    """(topic, partition) of a partition directory, from its `<topic>-<partition>` name."""
    if part.topic is None or part.partition is None:
        raise UsageError(f"{part.storage.url_of(part.path)}: cannot tell the topic and partition from "
                         f"the directory name {part.name!r} (a partition directory is named "
                         f"<topic>-<partition>)")
    return part.topic, part.partition


def plan_ranges(part: PartitionDir, split_bytes: int = DEFAULT_SPLIT_BYTES,
                reader: PartitionReader | None = None) -> list[SegmentRange]:
    """The units of a partition, in offset order; empty segments give none. `reader`: the
    partition's PartitionReader where the caller has one."""
    if split_bytes <= 0:
        raise UsageError(f"the split size must be positive, not {split_bytes}")
    topic, partition = partition_identity(part)
    reader = reader or PartitionReader(part)
    spec = part.storage.spec
    if spec is None:
        raise UsageError("units of work need storage opened with open_storage()")
    out = []
    for seg in part.segments:
        if seg.size == 0:
            continue
        last = seg is part.segments[-1]
        offset_at = {}  # position -> indexed offset (the last entry at a position, as a lookup finds it)
        if seg.size > split_bytes:
            columns = reader.offset_columns(seg)
            offset_at = dict(zip(columns.positions.tolist(), columns.offsets.tolist()))
        cuts = split_points(seg.size, list(offset_at), split_bytes,
                            lambda position: reader.plausible_entry(seg, OffsetEntry(offset_at[position], position)))
        for i, (start, end) in enumerate(zip(cuts, cuts[1:])):
            out.append(SegmentRange(spec, seg.log.path, part.display(seg.log), topic, partition,
                                    seg.base_offset, i, start, end, part.log_start_offset,
                                    last and end == seg.size, seg.size, last))
    return out


def split_points(end: int, entry_starts: list[int], split_bytes: int,
                 usable: Callable[[int], bool] = lambda position: True, start: int = 0) -> list[int]:
    """Range boundaries [start, ..., end] cutting bytes [start, end) of a segment about every
    `split_bytes`, only at known entry starts that are `usable` (asked only of the candidates), so
    that each range begins on an entry boundary: each cut is the first usable entry start at least
    `split_bytes` after the one before."""
    starts = np.unique(np.asarray(entry_starts, dtype=np.int64))
    cuts = [start]
    i = int(np.searchsorted(starts, start + split_bytes))
    while i < len(starts) and starts[i] < end:
        position = int(starts[i])
        if usable(position):
            cuts.append(position)
            i = int(np.searchsorted(starts, position + split_bytes))
        else:
            i += 1
    cuts.append(end)
    return cuts


def split_ranges(ranges: list[SegmentRange], split_bytes: int, reader: PartitionReader) -> list[SegmentRange]:
    """One partition's ranges (offset order, `reader` its PartitionReader) cut further into pieces of
    about `split_bytes`, at index entries checked as plan_ranges checks its cuts; each range is cut
    from its own start, so that what a query narrowed to (kfmt.pipelines.pushdown) is shared evenly.
    The ranges of a segment are numbered again in order."""
    segments = {seg.base_offset: seg for seg in reader.part.segments}
    offsets_at: dict[int, dict] = {}  # segment base -> {entry start: indexed offset}
    pieces = []
    for rng in ranges:
        if rng.end - rng.start <= split_bytes:
            pieces.append(rng)
            continue
        seg = segments[rng.segment_base]
        if seg.base_offset not in offsets_at:
            columns = reader.offset_columns(seg)
            offsets_at[seg.base_offset] = dict(zip(columns.positions.tolist(), columns.offsets.tolist()))
        offset_at = offsets_at[seg.base_offset]
        cuts = split_points(rng.end, list(offset_at), split_bytes,
                            lambda position: reader.plausible_entry(seg, OffsetEntry(offset_at[position], position)),
                            start=rng.start)
        pieces += [replace(rng, start=a, end=b, ends_log=rng.ends_log and b == rng.end)
                   for a, b in zip(cuts, cuts[1:])]
    numbered, seen = [], {}
    for rng in pieces:
        n = seen[rng.segment_base] = seen.get(rng.segment_base, -1) + 1
        numbered.append(rng if rng.index == n else replace(rng, index=n))
    return numbered


def pack_ranges(ranges: list[SegmentRange], target_bytes: int = DEFAULT_SPLIT_BYTES
                ) -> list[tuple[SegmentRange, ...]]:
    """Consecutive ranges of one partition grouped into units of about `target_bytes` at most.

    A Spark task costs tens of milliseconds however little it reads, so segments much smaller than
    a task's worth (time-rolled segments of a quiet topic, compacted ones) share one; a range of a
    cut segment is about `target_bytes` already and stays alone.
    """
    units: list[list[SegmentRange]] = []
    size = 0
    for rng in ranges:
        length = rng.end - rng.start
        last = units[-1][-1] if units else None
        if (last is None or (last.topic, last.partition) != (rng.topic, rng.partition)
                or size + length > target_bytes):
            units.append([])
            size = 0
        units[-1].append(rng)
        size += length
    return [tuple(unit) for unit in units]


class NoDigest:
    """A tally's digest where nobody reads it (the data source's tasks): no hashing of records."""

    def update(self, records) -> None:
        pass

    def merge(self, other) -> None:
        pass

    def hexdigest(self) -> str:
        raise TypeError("this tally keeps no digest")


@dataclass
class RangeTally:
    """What reading a range found (small and picklable: it travels back to the driver)."""

    batches: int = 0
    records: int = 0  # data records read (not control, not left out)
    control_records: int = 0  # control records read (not left out)
    control_seen: int = 0  # control records in the batches read, left out or not
    left_out: dict = field(default_factory=dict)  # reason -> records left out
    first_offset: int | None = None  # of the first data record read
    next_offset: int | None = None  # after the last batch of the range
    digest: ContentDigest = field(default_factory=ContentDigest)  # of the data records read
    tails: list = field(default_factory=list)  # warnings about a last segment's tail left out
    gone: str | None = None  # a segment deleted or replaced while read: where the read ended, why

    @property
    def rows(self) -> int:
        return self.records + self.control_records

    def merge(self, other: "RangeTally") -> "RangeTally":
        """Add a later range of the same partition."""
        self.batches += other.batches
        self.records += other.records
        self.control_records += other.control_records
        self.control_seen += other.control_seen
        for reason, n in other.left_out.items():
            self.left_out[reason] = self.left_out.get(reason, 0) + n
        if self.first_offset is None:
            self.first_offset = other.first_offset
        if other.next_offset is not None:
            self.next_offset = other.next_offset
        self.digest.merge(other.digest)
        self.tails += other.tails
        self.gone = self.gone or other.gone
        return self


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
    chunk = _Chunk(rng, rows_per_chunk, bytes_per_chunk, tally, gathered)
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
                   tally: RangeTally, chunk: "_Chunk") -> Iterator[pa.RecordBatch]:
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
                  chunk: "_Chunk") -> Iterator[pa.RecordBatch]:
    """A run of uncompressed v2 data batches whose records are all selected (_runs): decoded and
    checked a few MB at a time as one column block each."""
    for start, stop in legacy_runs.call_slices(rows):
        piece = rows[start:stop]
        yield from _block_read(batch_runs.decode_run(data, piece, rng.file, base=base), piece, tally, chunk)


def _read_compressed(data, base: int, rows, rng: SegmentRange, tally: RangeTally,
                     chunk: "_Chunk") -> Iterator[pa.RecordBatch]:
    """A run of compressed data entries whose records are all selected (_runs): each inflated by its
    codec, then decoded and checked a block of a few MB of records at a time."""
    for block in inflated_runs.inflated_blocks(data, rows, rng.file, base=base):
        yield from _block_read(block.records, block.rows, tally, chunk, block.counts, block.base_offsets)


def _block_read(records: pa.RecordBatch, rows, tally: RangeTally, chunk: "_Chunk", counts=None,
                base_offsets=None) -> Iterator[pa.RecordBatch]:
    """Count and digest the records of entries read as one block, all selected, and add their rows."""
    tally.batches += len(rows)
    tally.next_offset = int(rows["last_offset"][-1]) + 1
    if records.num_rows:
        if tally.first_offset is None:
            tally.first_offset = records.column(0)[0].as_py()
        tally.records += records.num_rows
        tally.digest.update(records)
        yield from chunk.add_run(records, rows, counts, base_offsets)


class _Chunk:
    """Export rows being gathered: decoded batches, and runs of batches or messages decoded as one
    column block (their records and rows of frames), turned into one RecordBatch when a chunk's worth
    is there. The records of decoded data batches are digested into the tally a chunk at a time
    (one kernel call, not one per batch)."""

    def __init__(self, rng: SegmentRange, rows: int, size: int, tally: RangeTally,
                 gathered: bool = True):
        self.rng, self.max_rows, self.max_bytes, self.tally = rng, rows, size, tally
        self.gathered = gathered  # a chunk as one RecordBatch (else as its parts)
        self.batches: list = []  # (Batch, segment base) pairs not yet in `parts`
        self.parts: list[pa.RecordBatch] = []
        self.rows = self.bytes = 0

    def add_batch(self, batch, selected: bool) -> Iterator[pa.RecordBatch]:
        if selected:
            self.batches.append((batch, self.rng.segment_base))
            yield from self._grown(len(batch), batch.records.nbytes)

    def add_run(self, records: pa.RecordBatch, rows, counts=None, base_offsets=None
                ) -> Iterator[pa.RecordBatch]:
        self._batches_done()
        self.parts.append(self._made(lambda: export_frames(records, rows, self.rng.segment_base,
                                                           self.rng.topic, self.rng.partition,
                                                           counts, base_offsets)))
        yield from self._grown(records.num_rows, records.nbytes)

    def flush(self) -> Iterator[pa.RecordBatch]:
        self._batches_done()
        if self.parts:
            parts, self.parts, self.rows, self.bytes = self.parts, [], 0, 0
            if self.gathered and len(parts) > 1:
                parts = pa.Table.from_batches(parts).combine_chunks().to_batches()
            yield from parts

    def _grown(self, rows: int, size: int) -> Iterator[pa.RecordBatch]:
        self.rows += rows
        self.bytes += size
        if self.rows >= self.max_rows or self.bytes >= self.max_bytes:
            yield from self.flush()

    def _batches_done(self) -> None:
        if self.batches:
            batches, self.batches = self.batches, []
            records = concat_records([b.records for b, _ in batches])
            data = [b.records for b, _ in batches if not b.header.is_control]
            self.tally.digest.update(records if len(data) == len(batches) else concat_records(data))
            self.parts.append(self._made(lambda: export_batch(batches, self.rng.topic,
                                                              self.rng.partition, records)))

    def _made(self, make) -> pa.RecordBatch:
        try:
            return make()
        except DataError as err:
            raise err.located(file=self.rng.file) from None
