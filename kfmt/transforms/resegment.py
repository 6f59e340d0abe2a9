"""kfmt resegment: the same batches, byte for byte, cut into segments by other topic configs
(segment.bytes, segment.ms, index.interval.bytes, segment.index.bytes).

Three steps, all in parallel where the work allows:
1. one planning task per partition walks its frames in order (headers only, no decompression, no
   record) through kfmt.write.planner.SegmentPlanner, which applies the broker's roll conditions before each
   batch (docs/format.md §12.2): the segment would grow past segment.bytes (a larger batch gets a segment
   of its own); the batch's max timestamp lies more than segment.ms after the segment's first
   batch's -- record time, as Kafka measures it (KIP-33), so a segment whose first batch has no
   timestamp (v0, or -1) never rolls on time: the broker would use its wall clock there, which a
   copy does not have; a full offset or time index; an offset that does not fit the index's int32.
   It returns each output segment as byte ranges of source segments;
2. one task per group of output segments copies their ranges byte for byte and writes their
   `.log`, `.index` and `.timeindex`. On the way every entry is checked as Kafka's log recovery
   checks it (whole, its CRC holding over the stored bytes; kfmt.format.copied_runs) and digested by
   its bytes once -- or, with `deep`, every batch checked (CRCs, record structure) and its records
   digested once (kfmt.format.batch_runs: uncompressed v2 batches in place, without decoding them into
   columns; others decoded): that one reading gives both the "before" tally of the
   partition (every source batch lies in exactly one range) and the "after" tally of the segments
   written, from the very bytes handed to the writer. The copy cannot change a byte, so the two
   digests agree by construction; what the run checks is that every planned batch was written
   (each output segment must receive exactly its planned batches and bytes, kfmt.write.writer) and the
   SHA-256 of each file written is taken from the same bytes (kfmt.storage.staging);
3. the driver writes the partition-level files and checks the tallies (kfmt.transforms.rewrite).

The first output segment keeps the source's first base offset (a compacted log's may lie below its
first record); later ones start at their first batch's offset. Empty source segments disappear; a
partition without batches keeps one empty segment at its first base offset. An output segment gets
the newest `.log` modification time of the source segments it takes batches from.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kfmt.errors import DataError
from kfmt.format import batch_runs, copied_runs, segment
from kfmt.format.batch_runs import CheckedRun
from kfmt.format.copied_runs import CopiedRun
from kfmt.format.frames import header_of
from kfmt.format.model import Batch
from kfmt.partition.companions import CompanionOptions
from kfmt.partition.summary import PartitionTally
from kfmt.storage.staging import StagingTarget
from kfmt.transforms.job_options import JobOptions
from kfmt.transforms.reindex import COPY_CHECK_NOTE, DEEP_CHECK_NOTE
from kfmt.transforms.run import (
    PartitionWork,
    RunPlan,
    SourceSegment,
    TaskResult,
    Transform,
    new_tally,
    run_transform,
    task_groups,
)
from kfmt.write.planner import (
    DEFAULT_MAX_INDEX_BYTES,
    DEFAULT_SEGMENT_MS,
    FIRST,
    RollPolicy,
    SegmentPlan,
    SegmentPlanner,
    check_segment_bytes_for,
    kafka_version as parse_kafka_version,
)
from kfmt.write.segment_writer import write_segment


@dataclass(frozen=True)
class OutputSegment:
    """A planned output segment: its plan and where its batches are: (source index, start, end)."""

    plan: SegmentPlan
    ranges: tuple[tuple[int, int, int], ...]
    mtime_ms: int | None


@dataclass(frozen=True)
class PlanPartitionTask:
    partition: int
    sources: tuple[SourceSegment, ...]
    policy: RollPolicy
    floor: int | None = None  # batches ending below it (below the log start offset) are left out
    start: int | None = None  # the first segment's base offset, when it carries the log start offset

    def run(self) -> TaskResult:
        result = TaskResult(self.partition)
        result.detail = plan_partition(self.sources, self.policy, self.floor, result.notes, self.start)
        return result


class _Plan:
    """The output segments of a partition, built as its frames are placed."""

    def __init__(self, policy: RollPolicy, start_offset: int):
        self.policy = policy
        self.planner = SegmentPlanner(policy, start_offset=start_offset)
        self.out: list[OutputSegment] = []
        self.current = None  # [base, first batch, reason, ranges, mtime]
        self.count = 0  # batches placed
        self.last_offset = None

    def place(self, index: int, src: SourceSegment, rows: np.ndarray) -> None:
        """Place rows of frames of source segment `index`, in order: many at a time where no
        segment starts among them (SegmentPlanner.place_frames), else one by one."""
        sizes = rows["size"].astype(np.int64)
        i = 0
        while i < len(rows):
            rest = rows[i:].copy()
            rest["position"] = self.planner.size + np.concatenate(([0], np.cumsum(sizes[i:])[:-1]))
            placed = self.planner.place_frames(rest)
            if not placed:
                header = header_of(rows[i].item())
                size_before = self.planner.size
                try:
                    reason = self.planner.place(header)
                except DataError as err:
                    raise err.located(file=src.file, base_position=header.position,
                                      offset=header.last_offset)
                if reason is not None:
                    if self.current is not None:
                        self._close(size_before)
                    self.current = [self.planner.base_offset, self.count, reason, [], None]
                placed = 1
            start = int(rows["position"][i])
            end = int(rows["position"][i + placed - 1] + rows["size"][i + placed - 1])
            ranges = self.current[3]
            if ranges and ranges[-1][0] == index and ranges[-1][2] == start:
                ranges[-1][2] = end
            else:
                ranges.append([index, start, end])
            if src.mtime_ms is not None:
                mtime = self.current[4]
                self.current[4] = src.mtime_ms if mtime is None else max(mtime, src.mtime_ms)
            self.count += placed
            self.last_offset = int(rows["last_offset"][i + placed - 1])
            i += placed

    def _close(self, size: int) -> None:
        base, first, reason, ranges, mtime = self.current
        plan = SegmentPlan(base, first, self.count - first, size, self.last_offset, reason,
                           self.policy.index_interval_bytes)
        self.out.append(OutputSegment(plan, tuple(tuple(r) for r in ranges), mtime))

    def finish(self, sources) -> list[OutputSegment]:
        if self.current is not None:
            self._close(self.planner.size)
        else:  # no batches at all: the log keeps one empty segment, as a broker keeps its active one
            first = sources[0]
            self.out.append(OutputSegment(SegmentPlan(first.base_offset, 0, 0, 0, first.base_offset - 1,
                                                      FIRST, self.policy.index_interval_bytes),
                                          (), first.mtime_ms))
        return self.out


def plan_partition(sources, policy: RollPolicy, floor: int | None = None,
                   notes: list[str] | None = None, start: int | None = None) -> list[OutputSegment]:
    """The output segments of a partition whose source segments are `sources`, in order, holding
    the batches that end at or after `floor` (the log start offset; None: all), the first at
    `start` (default: the first source segment's base offset). `notes` gets a line for a last
    segment's tail left out."""
    notes = [] if notes is None else notes
    if not sources:
        return []
    plan = _Plan(policy, sources[0].base_offset if start is None else start)
    for index, src in enumerate(sources):
        scanner = segment.FrameScanner(src.read(), src.file)
        for rows in scanner.chunks():
            if floor is not None:
                rows = rows[rows["last_offset"] >= floor]  # a prefix: offsets increase
            if len(rows):
                plan.place(index, src, rows)
        src.check_tail(scanner.tail, notes)  # the plan's ranges end before a tail left out
    return plan.finish(sources)


@dataclass(frozen=True)
class WriteSegmentsTask:
    """Consecutive output segments of a partition, copied from their source ranges; every batch
    checked and digested once, for both tallies (see the module docstring)."""

    partition: int
    outputs: tuple[OutputSegment, ...]
    sources: tuple[SourceSegment, ...]
    target: StagingTarget
    rel: str
    deep: bool = False

    def run(self) -> TaskResult:
        files = self.target.files()
        result = TaskResult(self.partition, before=new_tally(not self.deep), after=new_tally(not self.deep))
        views: dict[int, tuple] = {}  # source index -> (its bytes, their file position)
        for output in self.outputs:
            result.segments.append(write_segment(files, self.rel, output.plan,
                                                 self._entries(output, views, result),
                                                 output.mtime_ms))
        result.files = list(files.records.values())
        return result

    def _entries(self, output: OutputSegment, views: dict, result: TaskResult):
        for index, start, end in output.ranges:
            src = self.sources[index]
            if index not in views:
                views[index] = src.read_range(start, end)
            data, base = views[index]
            if not base <= start or end - base > len(data):
                data, base = views[index] = src.read_range(start, end)
            scanner = segment.FrameScanner(data, src.file, start, end, base)
            for rows in scanner.chunks():
                items = (batch_runs.checked(data, rows, src.file, base=base, messages=True) if self.deep
                         else copied_runs.copied(data, rows, src.file, base))
                for item in items:
                    result.before.add(item)
                    result.after.add(item)
                    batch = item.batch if isinstance(item, CopiedRun) else item
                    if isinstance(batch, Batch):
                        yield batch.header, segment.entry_bytes(data, batch.header, base)
                    else:
                        first, last = CheckedRun(item.rows, None, None).span(base)
                        yield item.rows, data[first:last]
            if scanner.tail.is_error:
                raise scanner.tail.error(src.file)


def source_tally(sources, entries: bool = False) -> PartitionTally:
    """The segments and bytes of a partition's source segments (their batches are counted by the
    write tasks); `entries`: a tally of the entries check (kfmt.partition.summary)."""
    tally = new_tally(entries)
    for src in sources:
        tally.add_segment(src.size)
    return tally


class ResegmentTransform(Transform):
    command = "resegment"
    description = "resegment: segments"

    def __init__(self, policy: RollPolicy, companions: CompanionOptions = CompanionOptions(),
                 deep: bool = False):
        super().__init__(companions)
        self._policy, self.deep = policy, deep

    def policy(self) -> RollPolicy:
        return self._policy

    def options(self) -> dict:
        p = self._policy
        return {**super().options(), "segment_bytes": p.segment_bytes, "segment_ms": p.segment_ms,
                "segment_index_bytes": p.max_index_bytes, "deep": self.deep}

    def preparation_tasks(self, work: list[PartitionWork], dry_run: bool) -> list:
        return [PlanPartitionTask(w.index, tuple(w.sources), self._policy, w.floor, w.start) for w in work]

    def prepared(self, work: list[PartitionWork], results: list[TaskResult]) -> None:
        for r in results:
            w = work[r.partition]
            w.detail = r.detail
            w.notes += r.notes
            w.befores = [source_tally(w.sources, not self.deep)]

    def threads_suffice(self, work: list[PartitionWork]) -> bool:
        return not self.deep and copied_runs.in_kernels()

    def write_tasks(self, work: list[PartitionWork], target: StagingTarget) -> list:
        return [WriteSegmentsTask(w.index, g, tuple(w.sources), target, w.plan.rel, self.deep)
                for w in work for g in task_groups(w.detail or [], lambda o: o.plan.size)]

    def describe(self, work: PartitionWork) -> list[str]:
        outputs = work.detail or []
        lines = [f"-> {len(outputs)} segment(s)"]
        for o in outputs:
            p = o.plan
            lines.append(f"{p.base_offset:020d}.log: {p.count} batch(es), {p.size} bytes"
                         + (f", offsets up to {p.last_offset}" if p.count else "")
                         + f" (starts: {p.reason})")
        return lines

    def notes(self) -> list[str]:
        return ["batches copied byte for byte into segments cut by the broker's roll rules "
                "(docs/format.md §12.2) with the given configs; segment.ms measured in record time",
                DEEP_CHECK_NOTE if self.deep else COPY_CHECK_NOTE]


def resegment(src: str, dst: str, *, segment_bytes: int, segment_ms: int = DEFAULT_SEGMENT_MS,
              segment_index_bytes: int = DEFAULT_MAX_INDEX_BYTES,
              companions: CompanionOptions = CompanionOptions(), kafka_version: str | None = None,
              deep: bool = False, job: JobOptions = JobOptions()) -> tuple[RunPlan, dict | None]:
    """Resegment SRC (a partition or log directory) into DST. `kafka_version`: the broker the output
    is for ('3.9', '4.1'; None: 4.x), which bounds segment.bytes; `deep`: every record checked (the
    module doc); `job`: kfmt.transforms.job_options."""
    policy = RollPolicy(segment_bytes, segment_ms, companions.index_interval_bytes, segment_index_bytes)
    check_segment_bytes_for(segment_bytes, parse_kafka_version(kafka_version or "4"))
    return run_transform(ResegmentTransform(policy, companions, deep), src, dst, job)
