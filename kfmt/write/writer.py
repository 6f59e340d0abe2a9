"""Writing a partition directory: batches in, segments a broker loads out (docs/format.md §12.2, §17).

Every transform (upgrade, resegment, recompress, compaction, restore, salvage) writes through here:

* `kfmt.write.planner` decides where segments start, from batch headers alone, with the broker's
  roll conditions.
* `PartitionWriter` streams batches into the planned segments (memory stays bounded by one batch plus
  the store's write buffer; `roll()` adds boundaries a transform must keep) and gives each segment its companion files from kfmt.partition.companions'
  CompanionBuilder, the one place that computes indexes, snapshots and leader epochs. It copies
  already-encoded batches byte for byte (`append`) or encodes decoded ones through their format
  plugin (`append_batch`), and carries `partition.metadata` over unchanged (or writes the one the
  transform's target gives, kfmt.partition.topic_identity).
* For parallel writers the same steps are separable and picklable: kfmt.write.segment_writer.

Modification times: a segment gets the newest `mtime_ms` of the batches written into it (the source
segments' `.log` mtimes, which Kafka's time retention uses for timestamp-less data, §13, §17 item 10);
the store keeps it where it can and the manifest always does (kfmt.storage.staging).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kfmt.errors import UsageError
from kfmt.format.control import ControlType
from kfmt.format.frames import first_undescribed, header_of
from kfmt.format.layout import ATTR_CONTROL, HEADER_SIZE_UP_TO_MAGIC, LOG_OVERHEAD, MAGIC_AT, MAGIC_V2
from kfmt.format.model import Batch, BatchHeader
from kfmt.format.wire import OFFSET_AND_SIZE
from kfmt.partition.companions import CompanionBuilder, control_facts
from kfmt.partition.layout import PARTITION_METADATA, PartitionDir, segment_file_name
from kfmt.partition.segment_recovery import RecoveredSegment
from kfmt.partition.topic_identity import TopicIdentity
from kfmt.plugin import registry
from kfmt.storage.manifest import FileRecord
from kfmt.storage.staging import StagedFiles, StagedOutput
from kfmt.write.planner import FIRST, REQUESTED, RollPolicy, SegmentPlanner

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
    facts: RecoveredSegment
    log: FileRecord
    mtime_ms: int | None = None
    reason: str = ""


def rel_path(rel_dir: str, name: str) -> str:
    return f"{rel_dir.strip('/')}/{name}" if rel_dir.strip("/") else name


def checked_header(header: BatchHeader, entry) -> BatchHeader:
    """The header must describe the bytes: an index built from wrong facts would point nowhere."""
    if len(entry) < HEADER_SIZE_UP_TO_MAGIC:
        raise UsageError(f"an entry of {len(entry)} bytes is too short to be a batch")
    offset, size = OFFSET_AND_SIZE.unpack_from(entry)
    stored_offset = header.base_offset if header.magic >= MAGIC_V2 else header.last_offset
    if (size + LOG_OVERHEAD != len(entry) or entry[MAGIC_AT] != header.magic or offset != stored_offset
            or header.size not in (None, len(entry))):
        raise UsageError(f"the header (magic {header.magic}, offset {stored_offset}, size "
                         f"{header.size}) does not describe the entry (magic {entry[MAGIC_AT]}, offset "
                         f"{offset}, {len(entry)} bytes)")
    return header if header.size is not None else header.replace(size=len(entry))


def checked_rows(rows: np.ndarray, entries) -> tuple[np.ndarray, int]:
    """checked_header for rows of frames of data batches and their concatenated bytes: (the rows,
    the position the first of them is given), positions made consecutive if they were not."""
    sizes = rows["size"].astype(np.int64)
    if not len(rows) or sizes.min() < HEADER_SIZE_UP_TO_MAGIC or int(sizes.sum()) != len(entries):
        raise UsageError(f"{len(rows)} rows of frames do not describe {len(entries)} bytes of entries")
    if ((rows["magic"] >= MAGIC_V2) & (rows["attributes"] & ATTR_CONTROL != 0)).any():
        raise UsageError("control batches are appended one by one, with their marker's facts")
    base = int(rows["position"][0])
    starts = base + np.concatenate(([0], np.cumsum(sizes)[:-1]))
    if not np.array_equal(rows["position"], starts):
        rows = rows.copy()
        rows["position"] = starts
    rows = np.ascontiguousarray(rows)
    bad = first_undescribed(entries, rows, base)
    if bad < len(rows):
        at = int(starts[bad]) - base
        checked_header(header_of(rows[bad].item()), memoryview(entries)[at:at + int(sizes[bad])])
    return rows, base


def _control_of(header: BatchHeader, entry) -> tuple[ControlType | None, int, int | None]:
    """A control batch's record type, coordinator epoch and timestamp (it is one small record)."""
    if not header.is_control:
        return None, -1, None
    fmt = registry.get().format_for(header.magic)
    view = memoryview(entry)
    return control_facts(fmt.decode(view, fmt.read_header(view, 0)))


class SegmentLog:
    """The `.log` of one segment being streamed."""

    def __init__(self, files: StagedFiles, rel_dir: str, base_offset: int):
        self.base_offset = base_offset
        self.rel = rel_path(rel_dir, segment_file_name(base_offset, "log"))
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

    def append_frames(self, rows: np.ndarray, entries, mtime_ms: int | None = None) -> np.ndarray:
        """append() for consecutive data batches (rows of frames, checked by checked_rows, and their
        concatenated bytes); returns the rows positioned where they landed in this segment."""
        if int(rows["position"][0]) != self.position:
            rows = rows.copy()
            rows["position"] += self.position - int(rows["position"][0])
        self.stream.write(entries)
        self.position += len(entries)
        if mtime_ms is not None:
            self.mtime_ms = mtime_ms if self.mtime_ms is None else max(self.mtime_ms, mtime_ms)
        return rows

    def close(self) -> FileRecord:
        return self.stream.close()

    def abort(self) -> None:
        self.stream.abort()


class CompanionWriter:
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
            self.files.write(rel_path(self.rel_dir, name), data, mtime_ms)
        if mtime_ms is not None:
            self.files.set_mtime(log.rel, mtime_ms)
        return result

    def finish(self, source: PartitionDir | None, identity: TopicIdentity | None = None):
        """The partition-level files; partition.metadata is `identity`'s (kfmt.partition.topic_identity)
        or, without one, the source's as it is."""
        result = self.builder.finish()
        for name, data in result.files().items():
            self.files.write(rel_path(self.rel_dir, name), data)
        if identity is not None or source is not None:
            TopicIdentity.of(identity, source).write_into(self.files,
                                                          rel_path(self.rel_dir, PARTITION_METADATA))
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
    `source` is the partition being transformed: its partition.metadata is carried over unchanged,
    unless `identity` says which to write (kfmt.partition.topic_identity).
    `companion_options` go to CompanionBuilder (now_ms, producer_expiration_ms, ...).
    """

    def __init__(self, out: StagedOutput | StagedFiles, rel_dir: str = "",
                 policy: RollPolicy = RollPolicy(), *, start_offset: int | None = None,
                 source: PartitionDir | None = None, identity: TopicIdentity | None = None,
                 **companion_options):
        self.files = _files_of(out)
        self.rel_dir = rel_dir
        self.policy = policy
        self.source, self.identity = source, identity
        if start_offset is None and source is not None and source.segments:
            start_offset = source.segments[0].base_offset
        self.start_offset = start_offset
        self.planner = SegmentPlanner(policy, start_offset)
        self.companions = CompanionWriter(self.files, rel_dir, policy, companion_options)
        self.summary = WriteSummary()
        self._segment: SegmentLog | None = None
        self._closed = False

    def append(self, header: BatchHeader, entry, *, mtime_ms: int | None = None) -> WrittenBatch:
        """Append an already-encoded batch (its bytes are copied as they are)."""
        return self._append(checked_header(header, entry), entry, None, mtime_ms)

    def append_batch(self, batch: Batch, *, level: int | None = None,
                     mtime_ms: int | None = None) -> WrittenBatch:
        """Encode a decoded batch through its format plugin (codec and level as given) and append it."""
        fmt = registry.get().format_for(batch.header.magic)
        entry = fmt.encode(batch.header, batch.records, level=level)
        header = fmt.read_header(memoryview(entry), 0)
        if header.base_offset is None:  # a legacy wrapper: its first offset is in the records
            header = header.replace(base_offset=batch.header.base_offset, records_count=len(batch))
        return self._append(header, entry, control_facts(batch), mtime_ms)

    def append_frames(self, rows: np.ndarray, entries, *, mtime_ms: int | None = None) -> None:
        """append() for consecutive data batches (no control batch) given as rows of frames
        (kfmt.format.frames) and their concatenated bytes, many at a time: the same segments, rolled
        at the same batches (SegmentPlanner.place_frames), and the same companion files, as appending
        them one by one; a batch that starts a segment goes the one-by-one way."""
        if self._closed:
            raise UsageError("append after close")
        entries = memoryview(entries)
        rows, base = checked_rows(rows, entries)
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
                end = at + int(rest["position"][placed - 1] + rest["size"][placed - 1] - rest["position"][0])
                landed = self._segment.append_frames(rest[:placed], entries[at:end], mtime_ms)
                self.companions.builder.add_frames(landed)
                seg = self.summary.segments[-1]
                seg.size, seg.batches = self._segment.position, seg.batches + placed
                seg.last_offset = int(landed["last_offset"][-1])
                start += placed
            else:  # a roll, or an error: the one-by-one way decides
                header = header_of(rows[start].item())
                self._append(header.replace(position=None), entries[at:at + header.size],
                             (None, -1, None), mtime_ms)
                start += 1

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
        self._segment = SegmentLog(self.files, self.rel_dir, base_offset)
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
        result = self.companions.finish(self.source, self.identity)
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


