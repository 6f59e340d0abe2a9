"""kfmt resegment: the same batches, byte for byte, cut into segments by other topic configs
(segment.bytes, segment.ms, index.interval.bytes, segment.index.bytes).

Three steps, all in parallel where the work allows:
1. one planning task per partition walks its batch headers in order (no decompression) through
   kfmt.writer.SegmentPlanner, which applies the broker's roll conditions before each batch (reference
   §12.2): the segment would grow past segment.bytes (a larger batch gets a segment of its own);
   the batch's max timestamp lies more than segment.ms after the segment's first batch's -- record
   time, as Kafka measures it (KIP-33), so a segment whose first batch has no timestamp (v0, or -1)
   never rolls on time: the broker would use its wall clock there, which a copy does not have; a
   full offset or time index; an offset that does not fit the index's int32. It returns each output
   segment as byte ranges of source segments. Alongside, one task per source segment decodes every
   batch (CRCs, record structure) for the "before" content digest;
2. one task per output segment copies its ranges byte for byte, decoding what it writes for the
   "after" digest, and writes its `.log`, `.index` and `.timeindex`;
3. the driver writes the partition-level files and checks the digests (kfmt.pipelines.transform).

The first output segment keeps the source's first base offset (a compacted log's may lie below its
first record); later ones start at their first batch's offset. Empty source segments disappear; a
partition without batches keeps one empty segment at its first base offset. An output segment gets
the newest `.log` modification time of the source segments it takes batches from.
"""
from __future__ import annotations

from dataclasses import dataclass

from kfmt import segment
from kfmt.errors import DataError
from kfmt.pipelines.transform import (CompanionOptions, PartitionWork, RunPlan, SourceSegment,
                                      TaskResult, Transform, new_tally, run_transform, task_groups)
from kfmt.staging import StagingTarget
from kfmt.writer import (DEFAULT_MAX_INDEX_BYTES, DEFAULT_SEGMENT_MS, FIRST, RollPolicy,
                         SegmentPlan, SegmentPlanner, write_segment)


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

    def run(self) -> TaskResult:
        return TaskResult(self.partition, detail=plan_partition(self.sources, self.policy))


def plan_partition(sources, policy: RollPolicy) -> list[OutputSegment]:
    """The output segments of a partition whose source segments are `sources`, in order."""
    if not sources:
        return []
    planner = SegmentPlanner(policy, start_offset=sources[0].base_offset)
    out: list[OutputSegment] = []
    current = None  # [base, first batch, reason, ranges, mtime]
    count = 0

    def close(size: int, last_offset: int) -> None:
        base, first, reason, ranges, mtime = current
        plan = SegmentPlan(base, first, count - first, size, last_offset, reason,
                           policy.index_interval_bytes)
        out.append(OutputSegment(plan, tuple(tuple(r) for r in ranges), mtime))

    last_offset = None
    for index, src in enumerate(sources):
        for header in segment.scan(src.read(), src.file):
            size_before = planner.size
            try:
                reason = planner.place(header)
            except DataError as err:
                raise err.located(file=src.file, base_position=header.position, offset=header.last_offset)
            if reason is not None:
                if current is not None:
                    close(size_before, last_offset)
                current = [planner.base_offset, count, reason, [], None]
            ranges = current[3]
            if ranges and ranges[-1][0] == index and ranges[-1][2] == header.position:
                ranges[-1][2] += header.size
            else:
                ranges.append([index, header.position, header.position + header.size])
            if src.mtime_ms is not None:
                current[4] = src.mtime_ms if current[4] is None else max(current[4], src.mtime_ms)
            count += 1
            last_offset = header.last_offset
    if current is not None:
        close(planner.size, last_offset)
    else:  # no batches at all: the log keeps one empty segment, as a broker keeps its active one
        first = sources[0]
        out.append(OutputSegment(SegmentPlan(first.base_offset, 0, 0, 0, first.base_offset - 1, FIRST,
                                             policy.index_interval_bytes), (), first.mtime_ms))
    return out


@dataclass(frozen=True)
class ReadSegmentsTask:
    """Decode consecutive source segments (strictly) for the "before" tally."""

    partition: int
    sources: tuple[SourceSegment, ...]

    def run(self) -> TaskResult:
        tally = new_tally()
        for src in self.sources:
            data = src.read()
            tally.add_segment(len(data))
            for header in segment.scan(data, src.file):
                tally.add_batch(segment.decode(data, header, src.file))
        return TaskResult(self.partition, before=tally)


@dataclass(frozen=True)
class WriteSegmentsTask:
    """Consecutive output segments of a partition, copied from their source ranges."""

    partition: int
    outputs: tuple[OutputSegment, ...]
    sources: tuple[SourceSegment, ...]
    target: StagingTarget
    rel: str

    def run(self) -> TaskResult:
        files = self.target.files()
        result = TaskResult(self.partition, after=new_tally())
        for output in self.outputs:
            result.segments.append(write_segment(files, self.rel, output.plan,
                                                 self._entries(output, result.after), output.mtime_ms))
        result.files = list(files.records.values())
        return result

    def _entries(self, output: OutputSegment, after):
        for index, start, end in output.ranges:
            src = self.sources[index]
            data = src.read(start, end)
            for header in segment.scan(data, src.file, start, end, base=start):
                after.add_batch(segment.decode(data, header, src.file, base=start))
                yield header, segment.entry_bytes(data, header, base=start)


class ResegmentTransform(Transform):
    command = "resegment"
    description = "resegment: segments"

    def __init__(self, policy: RollPolicy, companions: CompanionOptions = CompanionOptions()):
        super().__init__(companions)
        self._policy = policy

    def policy(self) -> RollPolicy:
        return self._policy

    def options(self) -> dict:
        p = self._policy
        return {**super().options(), "segment_bytes": p.segment_bytes, "segment_ms": p.segment_ms,
                "segment_index_bytes": p.max_index_bytes}

    def preparation_tasks(self, work: list[PartitionWork], dry_run: bool) -> list:
        tasks = [PlanPartitionTask(w.index, tuple(w.sources), self._policy) for w in work]
        if not dry_run:
            tasks += [ReadSegmentsTask(w.index, g) for w in work for g in task_groups(w.sources)]
        return tasks

    def prepared(self, work: list[PartitionWork], results: list[TaskResult]) -> None:
        for r in results:
            w = work[r.partition]
            if r.before is not None:
                w.befores.append(r.before)  # in source segment order: tasks are listed so
            else:
                w.detail = r.detail

    def write_tasks(self, work: list[PartitionWork], target: StagingTarget) -> list:
        return [WriteSegmentsTask(w.index, g, tuple(w.sources), target, w.plan.rel)
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
                "(reference §12.2) with the given configs; segment.ms measured in record time"]


def resegment(src: str, dst: str, *, segment_bytes: int, segment_ms: int = DEFAULT_SEGMENT_MS,
              segment_index_bytes: int = DEFAULT_MAX_INDEX_BYTES,
              companions: CompanionOptions = CompanionOptions(), **run) -> tuple[RunPlan, dict | None]:
    """Resegment SRC (a partition or log directory) into DST. `run`: run_transform's arguments."""
    policy = RollPolicy(segment_bytes, segment_ms, companions.index_interval_bytes, segment_index_bytes)
    return run_transform(ResegmentTransform(policy, companions), src, dst, **run)
