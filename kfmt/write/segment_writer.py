"""Writing segments in parallel tasks (the Spark jobs): `write_segment()` writes one planned segment
per task through a StagingTarget, `SegmentRunWriter` lets a task transform batches and roll its own
segments, and `write_companions()` gives the driver the partition-level companion files over the
returned WrittenSegments, in order. A task writes its segment's `.index` and `.timeindex` itself and
returns only what crosses segments (producer batches reduced, leader-epoch changes), so what reaches
the driver stays small however many batches a segment holds."""
from __future__ import annotations

from typing import Iterable, Iterator

import numpy as np

from kfmt.errors import UsageError
from kfmt.format.frames import header_of
from kfmt.format.model import BatchHeader
from kfmt.partition.layout import PartitionDir, Segment, segment_file_name
from kfmt.partition.segment_recovery import RecoveredSegmentBuilder
from kfmt.partition.topic_identity import TopicIdentity
from kfmt.partition.txnindex import write_txn_index
from kfmt.storage.staging import StagedFiles
from kfmt.write.planner import FIRST, RollPolicy, SegmentPlan, SegmentPlanner
from kfmt.write.writer import (
    CompanionWriter,
    SegmentLog,
    SegmentSummary,
    WriteSummary,
    WrittenBatch,
    WrittenSegment,
    checked_header,
    checked_rows,
    rel_path,
)


def write_segment(files: StagedFiles, rel_dir: str, plan: SegmentPlan,
                  entries: Iterable[tuple[BatchHeader, bytes]],
                  mtime_ms: int | None = None) -> WrittenSegment:
    """Write one planned segment from its batches' (header, bytes): its `.log`, `.index` and
    `.timeindex`; the other companion files come afterwards from write_companions(), which needs
    every segment in order. An item may also be (rows, bytes): consecutive data batches as rows of
    frames (kfmt.format.frames) and their concatenated bytes, written many at a time."""
    log = TaskSegment(files, rel_dir, plan.base_offset, plan.index_interval_bytes, plan.reason)
    try:
        for header, entry in entries:
            if isinstance(header, np.ndarray):
                log.append_frames(checked_rows(header, entry)[0], entry)
                continue
            log.append(checked_header(header, entry), entry)
        if log.facts.indexer.batches != plan.count or log.position != plan.size:
            raise UsageError(f"segment {plan.base_offset} was planned with {plan.count} batches of "
                             f"{plan.size} bytes but given {log.facts.indexer.batches} of {log.position}")
    except BaseException:
        log.abort()
        raise
    return log.close(mtime_ms)


class TaskSegment(SegmentLog):
    """A segment written in a parallel task: its `.log`, and its `.index`/`.timeindex` and
    RecoveredSegment from a RecoveredSegmentBuilder fed as the batches go by (nothing kept per batch)."""

    def __init__(self, files: StagedFiles, rel_dir: str, base_offset: int, index_interval_bytes: int,
                 reason: str):
        super().__init__(files, rel_dir, base_offset)
        self.files, self.rel_dir, self.reason = files, rel_dir, reason
        self.facts = RecoveredSegmentBuilder(base_offset, index_interval_bytes)

    def append(self, header: BatchHeader, entry, facts=None, mtime_ms: int | None = None) -> WrittenBatch:
        written = super().append(header, entry, facts, mtime_ms)
        self.facts.add(written.header, written.control, written.coordinator_epoch,
                       written.marker_timestamp)
        return written

    def append_frames(self, rows: np.ndarray, entries, mtime_ms: int | None = None) -> None:
        """append() for consecutive data batches given as rows of frames (checked by checked_rows:
        consecutive positions) and their concatenated bytes."""
        self.facts.add_frames(super().append_frames(rows, entries, mtime_ms))

    def close(self, mtime_ms: int | None = None) -> WrittenSegment:
        """`mtime_ms`: the segment's modification time (default: the newest of its batches')."""
        mtime_ms = self.mtime_ms if mtime_ms is None else mtime_ms
        record = super().close()
        indexes, facts = self.facts.finish()
        # LogSegment.setLastModified sets the .log and both indexes alike.
        for name, data in indexes.files().items():
            self.files.write(rel_path(self.rel_dir, name), data, mtime_ms)
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
        self._segment: TaskSegment | None = None

    def append(self, header: BatchHeader, entry, *, facts=None, mtime_ms: int | None = None) -> WrittenBatch:
        """Append an encoded batch. `facts`: its control facts (kfmt.partition.companions.control_facts) when
        the caller has them, else a control batch is decoded here."""
        header = checked_header(header, entry)
        reason = self.planner.place(header)
        if reason is not None:
            self._end_segment()
            self._segment = TaskSegment(self.files, self.rel_dir, self.planner.base_offset,
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
            self._segment = TaskSegment(self.files, self.rel_dir, self.start_offset,
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
                     identity: TopicIdentity | None = None, **companion_options) -> WriteSummary:
    """The partition-level companion files (`.txnindex`, producer snapshots, leader-epoch-checkpoint,
    partition.metadata: `identity`'s, else the source's) of segments written by parallel tasks, given
    in offset order."""
    companions = CompanionWriter(files, rel_dir, policy, companion_options)
    summary = WriteSummary()
    for segment in segments:
        aborted = companions.builder.add_segment(segment.facts)
        if aborted:
            name = segment_file_name(segment.base_offset, "txnindex")
            files.write(rel_path(rel_dir, name), write_txn_index(aborted), segment.mtime_ms)
        summary.segments.append(SegmentSummary(segment.base_offset, segment.log.size,
                                               segment.facts.batches, segment.facts.last_offset,
                                               segment.reason))
    summary.log_end_offset = companions.finish(source, identity).log_end_offset
    return summary


def source_entries(reader) -> Iterator[tuple[Segment, BatchHeader, memoryview]]:
    """Every entry of a partition (a PartitionReader) as stored: (its segment, header, bytes)."""
    for seg in reader.part.segments:
        data = reader.data(seg)
        for header in reader.frames(seg):
            start = header.position - data.base
            yield seg, header, memoryview(data.buf)[start:start + header.size]
