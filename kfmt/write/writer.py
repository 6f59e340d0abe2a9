"""Writing a partition directory: batches in, segments a broker loads out (docs/format.md §12.2, §17).

Every transform (upgrade, resegment, recompress, compaction, restore, salvage) writes through here:

* `SegmentPlanner` / `plan_segments()` decide where segments start, from batch headers alone, with
  the broker's roll conditions (docs/format.md §12.2, checked before each batch): (1) the segment would grow past
  `segment.bytes` (a larger batch gets a segment of its own; batches are never split); (2) the batch's
  max timestamp lies more than `segment.ms` after the segment's first batch's (record time, KIP-33);
  (3) its offset or time index is full (docs/format.md §6.4); (4) the batch's last offset would not fit the index's
  int32 relative offset. A new segment's base is the batch's base offset, so base <= first offset
  and `lastOffset - base` fits in int32 (docs/format.md §12.1, §17 item 1); files are named by 20-digit bases.
* `PartitionWriter` streams batches into the planned segments (memory stays bounded by one batch plus
  the store's write buffer; `roll()` adds boundaries a transform must keep) and gives each segment its companion files from kfmt.partition.companions'
  CompanionBuilder, the one place that computes indexes, snapshots and leader epochs. It copies
  already-encoded batches byte for byte (`append`) or encodes decoded ones through their format
  plugin (`append_batch`), and carries `partition.metadata` over unchanged.
* For parallel writers (the Spark jobs), the same steps are separable and picklable: plan on the
  driver, `write_segment()` one planned segment per task through a `StagingTarget` (or
  `SegmentRunWriter` for a task that transforms batches and lets them roll), then
  `write_companions()` on the driver over the returned `WrittenSegment`s, in order. A task writes its
  segment's `.index` and `.timeindex` itself and returns only what crosses segments
  (kfmt.partition.companions.SegmentFacts: producer batches reduced, leader-epoch changes), so what reaches
  the driver stays small however many batches a segment holds.

Modification times: a segment gets the newest `mtime_ms` of the batches written into it (the source
segments' `.log` mtimes, which Kafka's time retention uses for timestamp-less data, §13, §17 item 10);
the store keeps it where it can and the manifest always does (kfmt.storage.staging).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Iterator

import numpy as np

from kfmt.plugin import registry
from kfmt.partition.companions import CompanionBuilder, SegmentFacts, SegmentFactsBuilder, control_facts
from kfmt.format.control import ControlType
from kfmt.errors import DataError, UsageError
from kfmt.partition.indexes import OFFSET_ENTRY, TIME_ENTRY
from kfmt.partition.layout import PARTITION_METADATA, PartitionDir, Segment, segment_file_name
from kfmt.storage.manifest import FileRecord
from kfmt.format.frames import ATTR_CONTROL, header_of
from kfmt.format.model import INT32_MAX, LOG_OVERHEAD, NO_TIMESTAMP, Batch, BatchHeader
from kfmt.format.kernels import native
from kfmt.storage.staging import StagedFiles, StagedOutput
from kfmt.partition.txnindex import write_txn_index
from kfmt.format.wire import OFFSET_AND_SIZE

# Kafka's topic-config defaults and lower bounds (LogConfig, §6.4, §12.2)
DEFAULT_SEGMENT_BYTES = 1 << 30  # segment.bytes, at least 14 (LegacyRecord.RECORD_OVERHEAD_V0)
DEFAULT_SEGMENT_MS = 7 * 24 * 60 * 60 * 1000  # segment.ms, at least 1
DEFAULT_MAX_INDEX_BYTES = 10 * 1024 * 1024  # segment.index.bytes
DEFAULT_INDEX_INTERVAL_BYTES = 4096  # index.interval.bytes

_INT64_MAX = 2**63 - 1

# Why a segment starts (SegmentPlan.reason)
FIRST = "first"
SEGMENT_BYTES = "segment.bytes"
SEGMENT_MS = "segment.ms"
INDEX_FULL = "index full"
OFFSET_OVERFLOW = "offset overflow"
REQUESTED = "requested"  # by the caller: a transform keeping given boundaries (the cleaner's groups)


@dataclass(frozen=True)
class RollPolicy:
    """The topic configs that decide where segments roll."""

    segment_bytes: int = DEFAULT_SEGMENT_BYTES
    segment_ms: int = DEFAULT_SEGMENT_MS
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES
    max_index_bytes: int = DEFAULT_MAX_INDEX_BYTES

    def __post_init__(self):
        if not 14 <= self.segment_bytes <= INT32_MAX:
            raise UsageError(f"segment.bytes must be between 14 and {INT32_MAX}, got {self.segment_bytes}")
        if self.segment_ms < 1:
            raise UsageError(f"segment.ms must be at least 1, got {self.segment_ms}")
        if self.index_interval_bytes < 0:
            raise UsageError(f"index.interval.bytes must be >= 0, got {self.index_interval_bytes}")
        if self.max_index_bytes < TIME_ENTRY.size:
            # below one time-index entry a segment could not hold the entry every closed segment gets
            raise UsageError(f"segment.index.bytes must be at least {TIME_ENTRY.size}, got "
                             f"{self.max_index_bytes}")

    @property
    def max_offset_entries(self) -> int:
        return self.max_index_bytes // OFFSET_ENTRY.size

    @property
    def max_time_entries(self) -> int:
        return self.max_index_bytes // TIME_ENTRY.size


class SegmentPlanner:
    """The roll decision, batch by batch, from headers alone (picklable, no I/O).

    To know when an index is full it counts the entries recovery will give the segment (docs/format.md §6.3: an
    offset entry when more than index.interval.bytes lie between a batch's position and the last
    indexed one, a time entry there when the running maximum timestamp is new). It only counts: the
    entries themselves come from CompanionBuilder, and the tests check that both counts agree.
    """

    def __init__(self, policy: RollPolicy = RollPolicy(), start_offset: int | None = None):
        self.policy = policy
        self.start_offset = start_offset
        self.base_offset: int | None = None  # of the current segment
        self.size = 0
        self.last_offset: int | None = None  # of the last batch placed
        self._first_max_timestamp = NO_TIMESTAMP
        self._offset_entries = self._time_entries = 0
        self._last_indexed_position = 0
        self._max_timestamp = self._last_time_entry = NO_TIMESTAMP
        self._roll_requested = False

    def request_roll(self, base_offset: int | None = None) -> None:
        """Start a new segment: now, at `base_offset` (it may stay empty, as the log cleaner's
        segments may), or else before the next batch, at that batch's base offset."""
        if base_offset is None:
            self._roll_requested = True
            return
        if self.last_offset is not None and base_offset <= self.last_offset:
            raise UsageError(f"a segment base offset {base_offset} must lie above the last offset "
                             f"written, {self.last_offset}")
        if self.base_offset is not None and base_offset <= self.base_offset:
            raise UsageError(f"a segment base offset {base_offset} must lie above the current "
                             f"segment's, {self.base_offset}")
        self._start(base_offset)

    def roll_reason(self, header: BatchHeader) -> str | None:
        """Why `header`'s batch must start a new segment (None: it joins the current one)."""
        if self.base_offset is None:
            return FIRST
        if self._roll_requested:
            return REQUESTED
        if self.size == 0:  # a segment started at a requested base takes the next batch
            first = header.base_offset if header.base_offset is not None else header.last_offset
            if first < self.base_offset or header.last_offset - self.base_offset > INT32_MAX:
                raise UsageError(f"batch {first}..{header.last_offset} cannot open the segment "
                                 f"requested at base offset {self.base_offset}")
            return None
        p = self.policy
        if self.size > p.segment_bytes - header.size:
            return SEGMENT_BYTES
        if (self._first_max_timestamp >= 0
                and header.max_timestamp - self._first_max_timestamp > p.segment_ms):
            return SEGMENT_MS
        if (self._offset_entries >= p.max_offset_entries
                or self._time_entries >= p.max_time_entries - 1):  # last slot: the closing entry
            return INDEX_FULL
        if header.last_offset - self.base_offset > INT32_MAX:
            return OFFSET_OVERFLOW
        return None

    def place(self, header: BatchHeader) -> str | None:
        """Place the next batch: returns the roll reason if it starts a new segment (whose base is
        then `base_offset`), else None. Offsets must increase from batch to batch."""
        if header.size is None:
            raise UsageError("a batch header needs its size to be placed in a segment")
        first = header.base_offset if header.base_offset is not None else header.last_offset
        if self.last_offset is not None and first <= self.last_offset:
            raise DataError(f"batch {first}..{header.last_offset} does not follow the previous batch's "
                            f"last offset {self.last_offset}: offsets must increase", offset=first)
        reason = self.roll_reason(header)
        if reason is not None:
            self._start(self._new_base(header, reason))
        if header.last_offset < self.base_offset:  # a legacy wrapper's first offset is not known yet
            raise DataError(f"batch ending at offset {header.last_offset} lies below its segment's base "
                            f"offset {self.base_offset} (docs/format.md §12.1)", offset=header.last_offset)
        self._count(header)
        return reason

    def place_frames(self, rows: np.ndarray) -> int:
        """place() for the leading rows of frames (kfmt.format.frames) that join the current segment, many
        at a time: how many it placed, each as place() would have; 0 when the next row must go
        through place() (it starts a segment, or is refused). The rows' positions must be the ones
        they get in the segment (from `size` on)."""
        if not len(rows) or self.base_offset is None or self._roll_requested or self.size == 0:
            return 0
        p = self.policy
        last = rows["last_offset"].astype(np.int64)
        ends = self.size + np.cumsum(rows["size"], dtype=np.int64)
        previous = np.concatenate(([self.last_offset], last[:-1]))
        joins = (rows["base_offset"] > previous) & (last >= self.base_offset) & (ends <= p.segment_bytes)
        if self.base_offset + INT32_MAX <= _INT64_MAX:
            joins &= last <= self.base_offset + INT32_MAX
        if self._first_max_timestamp >= 0 and self._first_max_timestamp + p.segment_ms <= _INT64_MAX:
            joins &= rows["max_timestamp"] <= self._first_max_timestamp + p.segment_ms
        # a full index: each row adds at most one entry of each kind
        room = min(p.max_offset_entries - self._offset_entries,
                   p.max_time_entries - 1 - self._time_entries)
        refused = np.flatnonzero(~joins)
        placed = max(0, min(int(refused[0]) if len(refused) else len(rows), room))
        self._count_rows(rows[:placed])
        return placed

    def _count_rows(self, rows: np.ndarray) -> None:
        """_count() over rows: the index walk in one compiled call where it is built."""
        if native is not None and len(rows):
            stop, state, offsets, times = native.index_frames(np.ascontiguousarray(rows), 0, len(rows), (
                self.base_offset, self.policy.index_interval_bytes, self.size,
                self._last_indexed_position, self._max_timestamp, self.base_offset, self.last_offset,
                self._last_time_entry))
            self._offset_entries += len(offsets) // 16
            self._time_entries += len(times) // 16
            (_, _, self.size, self._last_indexed_position, self._max_timestamp, _, self.last_offset,
             self._last_time_entry) = state
            rows = rows[stop:]  # rows it left (positions other than the segment's) are counted below
        for row in rows.tolist():
            self._count(header_of(row))

    def _new_base(self, header: BatchHeader, reason: str) -> int:
        if header.base_offset is not None:
            base = header.base_offset
        else:
            # A legacy compressed wrapper's first offset is unknown without decompressing it (docs/format.md §3.4):
            # like LocalLog.roll, take the log end offset, at least lastOffset - Integer.MAX_VALUE.
            leo = self.last_offset + 1 if self.last_offset is not None else self.start_offset or 0
            base = max(leo, header.last_offset - INT32_MAX)
        if reason == FIRST and self.start_offset is not None:
            if self.start_offset > base:
                # Transforms take the start offset from the source's first segment: its data breaks
                # base offset <= first offset (docs/format.md §12.1).
                raise DataError(f"the first batch's offset {base} lies below the start offset "
                                f"{self.start_offset} (the first segment's base offset)",
                                offset=header.last_offset)
            if header.last_offset - self.start_offset <= INT32_MAX:
                base = self.start_offset
        return base

    def _start(self, base_offset: int) -> None:
        self.base_offset = base_offset
        self._roll_requested = False
        self.size = 0
        self._first_max_timestamp = NO_TIMESTAMP
        self._offset_entries = self._time_entries = 0
        self._last_indexed_position = 0
        self._max_timestamp = self._last_time_entry = NO_TIMESTAMP

    def _count(self, header: BatchHeader) -> None:
        if self.size == 0:
            self._first_max_timestamp = header.max_timestamp
        self._max_timestamp = max(self._max_timestamp, header.max_timestamp)
        if self.size - self._last_indexed_position > self.policy.index_interval_bytes:
            self._offset_entries += 1
            if self._max_timestamp > self._last_time_entry:
                self._time_entries += 1
                self._last_time_entry = self._max_timestamp
            self._last_indexed_position = self.size
        self.size += header.size
        self.last_offset = header.last_offset


@dataclass(frozen=True)
class SegmentPlan:
    """One planned segment: batches [first, first + count) of the planned sequence, and the spacing
    of its index entries."""

    base_offset: int
    first: int
    count: int
    size: int
    last_offset: int
    reason: str
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES

    @property
    def stop(self) -> int:
        return self.first + self.count


def plan_segments(headers: Iterable[BatchHeader], policy: RollPolicy = RollPolicy(),
                  start_offset: int | None = None) -> list[SegmentPlan]:
    """Where the segments of a partition start, from the headers of its batches in order."""
    planner = SegmentPlanner(policy, start_offset)
    starts: list[tuple[int, int, str]] = []  # (first batch, base offset, reason) per segment
    ends: list[tuple[int, int, int]] = []  # (stop, size, last offset) per segment
    count, last_offset = 0, None
    for header in headers:
        size_before = planner.size
        reason = planner.place(header)
        if reason is not None:
            if starts:
                ends.append((count, size_before, last_offset))
            starts.append((count, planner.base_offset, reason))
        count, last_offset = count + 1, header.last_offset
    if starts:
        ends.append((count, planner.size, last_offset))
    return [SegmentPlan(base, first, stop - first, size, last, reason, policy.index_interval_bytes)
            for (first, base, reason), (stop, size, last) in zip(starts, ends)]


# --- writing ---

@dataclass(frozen=True)
class WrittenBatch:
    """A batch as written: its header at its position in the output segment, and the control facts
    the companion files need."""

    header: BatchHeader
    control: ControlType | None = None
    coordinator_epoch: int = -1
    marker_timestamp: int | None = None


@dataclass(frozen=True)
class WrittenSegment:
    """A segment a parallel task wrote (its `.log`, `.index` and `.timeindex`), and what the driver
    needs of it for the partition-level files."""

    base_offset: int
    facts: SegmentFacts
    log: FileRecord
    mtime_ms: int | None = None
    reason: str = ""


def _rel(rel_dir: str, name: str) -> str:
    return f"{rel_dir.strip('/')}/{name}" if rel_dir.strip("/") else name


def _checked_header(header: BatchHeader, entry) -> BatchHeader:
    """The header must describe the bytes: an index built from wrong facts would point nowhere."""
    if len(entry) < LOG_OVERHEAD + 5:
        raise UsageError(f"an entry of {len(entry)} bytes is too short to be a batch")
    offset, size = OFFSET_AND_SIZE.unpack_from(entry)
    stored_offset = header.base_offset if header.magic >= 2 else header.last_offset
    if (size + LOG_OVERHEAD != len(entry) or entry[16] != header.magic or offset != stored_offset
            or header.size not in (None, len(entry))):
        raise UsageError(f"the header (magic {header.magic}, offset {stored_offset}, size "
                         f"{header.size}) does not describe the entry (magic {entry[16]}, offset "
                         f"{offset}, {len(entry)} bytes)")
    return header if header.size is not None else header.replace(size=len(entry))


def _checked_rows(rows: np.ndarray, entries) -> tuple[np.ndarray, int]:
    """_checked_header for rows of frames of data batches and their concatenated bytes: (the rows,
    the position the first of them is given), positions made consecutive if they were not."""
    sizes = rows["size"].astype(np.int64)
    if not len(rows) or sizes.min() < LOG_OVERHEAD + 5 or int(sizes.sum()) != len(entries):
        raise UsageError(f"{len(rows)} rows of frames do not describe {len(entries)} bytes of entries")
    if ((rows["magic"] >= 2) & (rows["attributes"] & ATTR_CONTROL != 0)).any():
        raise UsageError("control batches are appended one by one, with their marker's facts")
    base = int(rows["position"][0])
    starts = base + np.concatenate(([0], np.cumsum(sizes)[:-1]))
    if not np.array_equal(rows["position"], starts):
        rows = rows.copy()
        rows["position"] = starts
    rows = np.ascontiguousarray(rows)
    if native is not None:
        bad = native.frames_describe(entries, rows, 0, len(rows), base)
    else:
        head = np.frombuffer(entries, np.uint8)[(starts - base)[:, None] + np.arange(LOG_OVERHEAD + 5)]
        offset = head[:, :8].copy().view(">i8").ravel()
        size = head[:, 8:12].copy().view(">i4").ravel().astype(np.int64)
        magic = head[:, 16].view(np.int8)
        stored = np.where(rows["magic"] >= 2, rows["base_offset"], rows["last_offset"])
        wrong = np.flatnonzero((size + LOG_OVERHEAD != sizes) | (magic != rows["magic"]) | (offset != stored))
        bad = int(wrong[0]) if len(wrong) else len(rows)
    if bad < len(rows):
        at = int(starts[bad]) - base
        _checked_header(header_of(rows[bad].item()), memoryview(entries)[at:at + int(sizes[bad])])
    return rows, base


def _control_of(header: BatchHeader, entry) -> tuple[ControlType | None, int, int | None]:
    """A control batch's record type, coordinator epoch and timestamp (it is one small record)."""
    if not header.is_control:
        return None, -1, None
    fmt = registry.get().format_for(header.magic)
    view = memoryview(entry)
    return control_facts(fmt.decode(view, fmt.read_header(view, 0)))


class _SegmentLog:
    """The `.log` of one segment being streamed."""

    def __init__(self, files: StagedFiles, rel_dir: str, base_offset: int):
        self.base_offset = base_offset
        self.rel = _rel(rel_dir, segment_file_name(base_offset, "log"))
        self.stream = files.open(self.rel)
        self.position = 0
        self.mtime_ms: int | None = None

    def append(self, header: BatchHeader, entry, facts=None, mtime_ms: int | None = None) -> WrittenBatch:
        """`facts`: the control facts (kfmt.partition.companions.control_facts) if known, else read here."""
        facts = _control_of(header, entry) if facts is None else facts
        written = WrittenBatch(header.replace(position=self.position, size=len(entry)), *facts)
        self.stream.write(entry)
        self.position += len(entry)
        if mtime_ms is not None:
            self.mtime_ms = mtime_ms if self.mtime_ms is None else max(self.mtime_ms, mtime_ms)
        return written

    def close(self) -> FileRecord:
        return self.stream.close()

    def abort(self) -> None:
        self.stream.abort()


class _CompanionWriter:
    """Feeds CompanionBuilder and writes what it returns next to the segments."""

    def __init__(self, files: StagedFiles, rel_dir: str, policy: RollPolicy, companion_options: dict):
        self.files, self.rel_dir = files, rel_dir
        self.builder = CompanionBuilder(index_interval_bytes=policy.index_interval_bytes,
                                        **companion_options)

    def add(self, batch: WrittenBatch) -> None:
        self.builder.add_batch(batch.header, batch.control, batch.coordinator_epoch,
                               marker_timestamp=batch.marker_timestamp)

    def end_segment(self, log: FileRecord, mtime_ms: int | None):
        result = self.builder.end_segment()
        # LogSegment.setLastModified sets the .log and both indexes alike.
        for name, data in result.files().items():
            self.files.write(_rel(self.rel_dir, name), data, mtime_ms)
        if mtime_ms is not None:
            self.files.set_mtime(log.rel, mtime_ms)
        return result

    def finish(self, source: PartitionDir | None):
        result = self.builder.finish()
        for name, data in result.files().items():
            self.files.write(_rel(self.rel_dir, name), data)
        if source is not None and source.file(PARTITION_METADATA) is not None:
            info = source.file(PARTITION_METADATA)
            self.files.write(_rel(self.rel_dir, PARTITION_METADATA), source.storage.read(info.path),
                             info.mtime_ms)
        return result


def _files_of(out: StagedOutput | StagedFiles) -> StagedFiles:
    return out.staged if isinstance(out, StagedOutput) else out


@dataclass
class SegmentSummary:
    base_offset: int
    size: int
    batches: int
    last_offset: int | None
    reason: str


@dataclass
class WriteSummary:
    """What a PartitionWriter wrote."""

    segments: list[SegmentSummary] = field(default_factory=list)
    log_end_offset: int | None = None


class PartitionWriter:
    """Write one partition directory `rel_dir` ('' for DST itself) of a staged output.

    `start_offset` is the first segment's base offset (default: the source's first segment base, so a
    compacted log keeps a base below its first record; else the first batch's base offset).
    `source` is the partition being transformed: its partition.metadata is carried over unchanged.
    `companion_options` go to CompanionBuilder (now_ms, producer_expiration_ms, ...).
    """

    def __init__(self, out: StagedOutput | StagedFiles, rel_dir: str = "",
                 policy: RollPolicy = RollPolicy(), *, start_offset: int | None = None,
                 source: PartitionDir | None = None, **companion_options):
        self.files = _files_of(out)
        self.rel_dir = rel_dir
        self.policy = policy
        self.source = source
        if start_offset is None and source is not None and source.segments:
            start_offset = source.segments[0].base_offset
        self.start_offset = start_offset
        self.planner = SegmentPlanner(policy, start_offset)
        self.companions = _CompanionWriter(self.files, rel_dir, policy, companion_options)
        self.summary = WriteSummary()
        self._segment: _SegmentLog | None = None
        self._closed = False

    def append(self, header: BatchHeader, entry, *, mtime_ms: int | None = None) -> WrittenBatch:
        """Append an already-encoded batch (its bytes are copied as they are)."""
        return self._append(_checked_header(header, entry), entry, None, mtime_ms)

    def append_batch(self, batch: Batch, *, level: int | None = None,
                     mtime_ms: int | None = None) -> WrittenBatch:
        """Encode a decoded batch through its format plugin (codec and level as given) and append it."""
        fmt = registry.get().format_for(batch.header.magic)
        entry = fmt.encode(batch.header, batch.records, level=level)
        header = fmt.read_header(memoryview(entry), 0)
        if header.base_offset is None:  # a legacy wrapper: its first offset is in the records
            header = header.replace(base_offset=batch.header.base_offset, records_count=len(batch))
        return self._append(header, entry, control_facts(batch), mtime_ms)

    def _append(self, header: BatchHeader, entry, facts, mtime_ms: int | None) -> WrittenBatch:
        if self._closed:
            raise UsageError("append after close")
        reason = self.planner.place(header)
        if reason is not None:
            self._end_segment()
            self._begin_segment(self.planner.base_offset, reason)
        written = self._segment.append(header, entry, facts, mtime_ms)
        self.companions.add(written)
        seg = self.summary.segments[-1]
        seg.size, seg.batches, seg.last_offset = self._segment.position, seg.batches + 1, header.last_offset
        return written

    def roll(self, base_offset: int | None = None) -> None:
        """End the current segment: a transform keeping given boundaries (a resegmented source's,
        the log cleaner's groups) asks for them here; the roll rules still apply on top. With a
        `base_offset` the new segment starts now (a segment nothing is appended to stays empty);
        without, before the next batch, at its base offset."""
        if self._closed:
            raise UsageError("roll after close")
        self.planner.request_roll(base_offset)
        if base_offset is not None:
            self._end_segment()
            self._begin_segment(base_offset, REQUESTED)

    def _begin_segment(self, base_offset: int, reason: str) -> None:
        self._segment = _SegmentLog(self.files, self.rel_dir, base_offset)
        self.companions.builder.begin_segment(base_offset)
        self.summary.segments.append(SegmentSummary(base_offset, 0, 0, None, reason))

    def _end_segment(self) -> None:
        if self._segment is None:
            return
        segment, self._segment = self._segment, None
        log = segment.close()
        self.companions.end_segment(log, segment.mtime_ms)

    def close(self) -> WriteSummary:
        """Finish the last segment and write the partition-level files. A partition without batches
        gets one empty segment at the start offset, as a broker would create (docs/format.md §12.5)."""
        if self._closed:
            return self.summary
        if not self.summary.segments:
            self._begin_segment(self.start_offset or 0, FIRST)
        self._end_segment()
        result = self.companions.finish(self.source)
        self.summary.log_end_offset = result.log_end_offset
        self._closed = True
        return self.summary

    def abort(self) -> None:
        """Stop writing: the open segment is discarded (the staged output removes the rest)."""
        self._closed = True
        if self._segment is not None:
            self._segment.abort()
            self._segment = None

    def __enter__(self) -> "PartitionWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


# --- the separable steps, for parallel writers ---

def write_segment(files: StagedFiles, rel_dir: str, plan: SegmentPlan,
                  entries: Iterable[tuple[BatchHeader, bytes]],
                  mtime_ms: int | None = None) -> WrittenSegment:
    """Write one planned segment from its batches' (header, bytes): its `.log`, `.index` and
    `.timeindex`; the other companion files come afterwards from write_companions(), which needs
    every segment in order. An item may also be (rows, bytes): consecutive data batches as rows of
    frames (kfmt.format.frames) and their concatenated bytes, written many at a time."""
    log = _TaskSegment(files, rel_dir, plan.base_offset, plan.index_interval_bytes, plan.reason)
    try:
        for header, entry in entries:
            if isinstance(header, np.ndarray):
                log.append_frames(_checked_rows(header, entry)[0], entry)
                continue
            log.append(_checked_header(header, entry), entry)
        if log.facts.indexer.batches != plan.count or log.position != plan.size:
            raise UsageError(f"segment {plan.base_offset} was planned with {plan.count} batches of "
                             f"{plan.size} bytes but given {log.facts.indexer.batches} of {log.position}")
    except BaseException:
        log.abort()
        raise
    return log.close(mtime_ms)


class _TaskSegment(_SegmentLog):
    """A segment written in a parallel task: its `.log`, and its `.index`/`.timeindex` and
    SegmentFacts from a SegmentFactsBuilder fed as the batches go by (nothing kept per batch)."""

    def __init__(self, files: StagedFiles, rel_dir: str, base_offset: int, index_interval_bytes: int,
                 reason: str):
        super().__init__(files, rel_dir, base_offset)
        self.files, self.rel_dir, self.reason = files, rel_dir, reason
        self.facts = SegmentFactsBuilder(base_offset, index_interval_bytes)

    def append(self, header: BatchHeader, entry, facts=None, mtime_ms: int | None = None) -> WrittenBatch:
        written = super().append(header, entry, facts, mtime_ms)
        self.facts.add(written.header, written.control, written.coordinator_epoch,
                       written.marker_timestamp)
        return written

    def append_frames(self, rows: np.ndarray, entries, mtime_ms: int | None = None) -> None:
        """append() for consecutive data batches given as rows of frames (checked by _checked_rows:
        consecutive positions) and their concatenated bytes."""
        if int(rows["position"][0]) != self.position:  # where they land in this segment
            rows = rows.copy()
            rows["position"] += self.position - int(rows["position"][0])
        self.stream.write(entries)
        self.facts.add_frames(rows)
        self.position += len(entries)
        if mtime_ms is not None:
            self.mtime_ms = mtime_ms if self.mtime_ms is None else max(self.mtime_ms, mtime_ms)

    def close(self, mtime_ms: int | None = None) -> WrittenSegment:
        """`mtime_ms`: the segment's modification time (default: the newest of its batches')."""
        mtime_ms = self.mtime_ms if mtime_ms is None else mtime_ms
        record = super().close()
        indexes, facts = self.facts.finish()
        # LogSegment.setLastModified sets the .log and both indexes alike.
        for name, data in indexes.files().items():
            self.files.write(_rel(self.rel_dir, name), data, mtime_ms)
        if mtime_ms is not None:
            record = self.files.set_mtime(record.rel, mtime_ms)
        return WrittenSegment(self.base_offset, facts, record, mtime_ms, self.reason)


class SegmentRunWriter:
    """The task side of a parallel transform whose batches change size (upgrade, recompress): batches
    streamed into segments of `rel_dir` starting at `start_offset` and rolled by `policy` like
    PartitionWriter's, each written with its `.index` and `.timeindex`; `close()` returns the
    WrittenSegments for write_companions(). A run without batches still gets its segment at
    `start_offset` (a transform keeps the source's empty segments)."""

    def __init__(self, files: StagedFiles, rel_dir: str, policy: RollPolicy = RollPolicy(), *,
                 start_offset: int):
        self.files, self.rel_dir, self.policy = files, rel_dir, policy
        self.start_offset = start_offset
        self.planner = SegmentPlanner(policy, start_offset)
        self.segments: list[WrittenSegment] = []
        self._segment: _TaskSegment | None = None

    def append(self, header: BatchHeader, entry, *, facts=None, mtime_ms: int | None = None) -> WrittenBatch:
        """Append an encoded batch. `facts`: its control facts (kfmt.partition.companions.control_facts) when
        the caller has them, else a control batch is decoded here."""
        header = _checked_header(header, entry)
        reason = self.planner.place(header)
        if reason is not None:
            self._end_segment()
            self._segment = _TaskSegment(self.files, self.rel_dir, self.planner.base_offset,
                                         self.policy.index_interval_bytes, reason)
        return self._segment.append(header, entry, facts, mtime_ms)

    @property
    def position(self) -> int:
        """Where the next batch goes if it joins the open segment (0 before the first)."""
        return self.planner.size if self._segment is not None else 0

    def append_frames(self, rows: np.ndarray, entries, *, mtime_ms: int | None = None) -> None:
        """append() for consecutive data batches (no control batch) given as rows of frames
        (kfmt.format.frames) and their concatenated bytes, many at a time: the same segments, rolled at
        the same batches (SegmentPlanner.place_frames), as appending them one by one. Rows already
        positioned from `position` on are taken as they are."""
        entries = memoryview(entries)
        rows, base = _checked_rows(rows, entries)
        start = 0
        while start < len(rows):
            rest = rows[start:]
            at = int(rest["position"][0]) - base  # in entries
            placed = 0
            if self._segment is not None:
                if int(rest["position"][0]) != self.planner.size:
                    rest = rest.copy()
                    rest["position"] += self.planner.size - int(rest["position"][0])
                placed = self.planner.place_frames(rest)
            if placed:
                end = at + int(rest["position"][placed - 1] + rest["size"][placed - 1]
                               - rest["position"][0])
                self._segment.append_frames(rest[:placed], entries[at:end], mtime_ms)
                start += placed
            else:  # a roll, or an error: the one-by-one way decides
                header = header_of(rows[start].item())
                self.append(header.replace(position=None), entries[at:at + header.size],
                            facts=(None, -1, None), mtime_ms=mtime_ms)
                start += 1

    def _end_segment(self, mtime_ms: int | None = None) -> None:
        if self._segment is not None:
            segment, self._segment = self._segment, None
            self.segments.append(segment.close(mtime_ms))

    def close(self, empty_mtime_ms: int | None = None) -> list[WrittenSegment]:
        """Finish the last segment. `empty_mtime_ms`: the modification time of the empty segment
        a run without batches gets."""
        if not self.segments and self._segment is None:
            self._segment = _TaskSegment(self.files, self.rel_dir, self.start_offset,
                                         self.policy.index_interval_bytes, FIRST)
            self._end_segment(empty_mtime_ms)
        self._end_segment()
        return self.segments

    def abort(self) -> None:
        if self._segment is not None:
            self._segment.abort()
            self._segment = None


def write_companions(files: StagedFiles, rel_dir: str, segments: Iterable[WrittenSegment],
                     policy: RollPolicy = RollPolicy(), *, source: PartitionDir | None = None,
                     **companion_options) -> WriteSummary:
    """The partition-level companion files (`.txnindex`, producer snapshots, leader-epoch-checkpoint,
    partition.metadata) of segments written by parallel tasks, given in offset order."""
    companions = _CompanionWriter(files, rel_dir, policy, companion_options)
    summary = WriteSummary()
    for segment in segments:
        aborted = companions.builder.add_segment(segment.facts)
        if aborted:
            name = segment_file_name(segment.base_offset, "txnindex")
            files.write(_rel(rel_dir, name), write_txn_index(aborted), segment.mtime_ms)
        summary.segments.append(SegmentSummary(segment.base_offset, segment.log.size,
                                               segment.facts.batches, segment.facts.last_offset,
                                               segment.reason))
    summary.log_end_offset = companions.finish(source).log_end_offset
    return summary


def source_entries(reader) -> Iterator[tuple[Segment, BatchHeader, memoryview]]:
    """Every entry of a partition (a PartitionReader) as stored: (its segment, header, bytes)."""
    for seg in reader.part.segments:
        data = reader.data(seg)
        for header in reader.frames(seg):
            start = header.position - data.base
            yield seg, header, memoryview(data.buf)[start:start + header.size]
