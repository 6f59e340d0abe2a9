"""retain: Kafka's delete cleanup policy applied offline (docs/format.md §13).

A broker's retention check (`UnifiedLog.deleteOldSegments`, Kafka 3.6) runs three rules in this order,
each deleting a *prefix* of the segments (the oldest first, stopping at the first segment that must
stay), each seeing what the previous one left:
1. log start offset: a segment goes when the *next* segment's base offset is <= the log start offset
   (DeleteRecords raised it; the segment holding it stays and the log start offset lies inside it);
2. retention.bytes: with `diff = log size - retention.bytes`, a segment goes while
   `diff - segment size >= 0` (then `diff -= segment size`): the log stays at least retention.bytes;
3. retention.ms: a segment goes when `now - largest timestamp > retention.ms`. The largest timestamp is
   the segment's largest record timestamp (its last `.timeindex` entry), or the `.log` file's
   modification time when the segment has no timestamps (v0 data).
A segment qualifies only if the high watermark has reached the next segment's base offset (the log
end offset for the last one), and an empty last segment never goes. After deletions the log start
offset is at least the first remaining segment's base offset. Segments go whole; nothing is cut.

Where kfmt differs on purpose: the last (active) segment stays unless `include_active` (a broker
deletes it too when it qualifies, rolling a new empty segment at the log end offset first, which
`include_active` reproduces). retention.ms and retention.bytes apply only when given (a broker's
defaults are 7 days and unlimited): an offline run should do only what it was asked.

The output is DST: the remaining segments' `.log` files byte for byte with their modification times,
and every companion file regenerated (kfmt.transforms.reindex, through kfmt.partition.companions) with the new log start
offset, so the leader-epoch-checkpoint starts there as the broker's does. The log start offset is
recorded for the broker in DST's `log-start-offset-checkpoint` when DST is a log directory, and only
when it lies above the first segment's base offset (as Kafka writes it); always in the report.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

import numpy as np

from kfmt.defaults import DEFAULT_INDEX_INTERVAL_BYTES, DEFAULT_PRODUCER_EXPIRATION_MS
from kfmt.errors import UsageError
from kfmt.format import inflated_runs
from kfmt.format.copied_runs import header_counts
from kfmt.format.frames import header_of
from kfmt.format.layout import ATTR_CONTROL, MAGIC_V2
from kfmt.format.kernels import native
from kfmt.format.model import NO_TIMESTAMP
from kfmt.partition.companions import CompanionBuilder, CompanionOptions, existing_leader_epochs
from kfmt.partition.layout import Segment, segment_file_name
from kfmt.partition.log_start import BelowLogStart, below_log_start, segment_start
from kfmt.partition.reader import PartitionReader, log_end_offset
from kfmt.partition.summary import ENTRIES_CHECK, PartitionSummary
from kfmt.storage.manifest import FileRecord
from kfmt.transforms.cleanup.plan import DELETE, LOG_START_OFFSET_CHECKPOINT, PartitionJob, cleanup_policy
from kfmt.transforms.reindex import PartitionPlan, reindex_partition

LOG_START_OFFSET = "log start offset"
RETENTION_BYTES = "retention.bytes"
RETENTION_MS = "retention.ms"


@dataclass(frozen=True)
class RetentionOptions:
    retention_ms: int = -1  # -1: off
    retention_bytes: int = -1  # -1: off
    log_start_offset: int | None = None  # a DeleteRecords offset
    now_ms: int = 0  # the wall clock of the retention check
    include_active: bool = False
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES
    producer_expiration_ms: int = DEFAULT_PRODUCER_EXPIRATION_MS
    cleanup_policy: str = DELETE  # the topic's: without `delete`, only the log start offset rule applies
    # every record of what is kept checked, not only every entry (kfmt.transforms.reindex), and the
    # records of what is removed counted by inflating wrappers
    deep: bool = False
    # a partition-directory DST keeps its first segment whole (else it starts at the log start offset)
    include_deleted: bool = False

    def __post_init__(self):
        cleanup_policy(self.cleanup_policy)  # checks it
        if self.retention_ms < -1:
            raise UsageError(f"retention.ms must be -1 (off) or >= 0, got {self.retention_ms}")
        if self.retention_bytes < -1:
            raise UsageError(f"retention.bytes must be -1 (off) or >= 0, got {self.retention_bytes}")
        if self.log_start_offset is not None and self.log_start_offset < 0:
            raise UsageError(f"the log start offset must be >= 0, got {self.log_start_offset}")

    @property
    def companions(self) -> CompanionOptions:
        return CompanionOptions(self.index_interval_bytes, self.now_ms, self.producer_expiration_ms)


@dataclass(frozen=True)
class SegmentAge:
    base_offset: int
    size: int
    largest_timestamp: int  # LogSegment.largestTimestamp (records, else the .log mtime)
    from_mtime: bool  # whether the largest timestamp is the .log file's modification time


def segment_largest_timestamp(reader: PartitionReader, seg: Segment, scanned: int | None = None) -> int:
    """Kafka's `LogSegment.largestTimestamp`: the largest record timestamp (the last time-index
    entry; kfmt.partition.reader scans the frames where the index cannot say, or takes `scanned`,
    the caller's own scan of them), else the `.log` file's modification time, as for v0 data, which
    has no timestamps."""
    return _largest_timestamp(reader, seg, scanned)[0]


def _largest_timestamp(reader: PartitionReader, seg: Segment, scanned: int | None = None) -> tuple[int, bool]:
    largest = reader.largest_timestamp(seg, scanned)
    if largest >= 0 or seg.log.mtime_ms is None:
        return largest, False
    return seg.log.mtime_ms, True


def segment_ages(reader: PartitionReader) -> list[SegmentAge]:
    return [SegmentAge(seg.base_offset, seg.size, *_largest_timestamp(reader, seg))
            for seg in reader.part.segments]


@dataclass(frozen=True)
class Deletion:
    base_offset: int
    next_offset: int  # the next segment's base offset (the log end offset for the last one)
    size: int
    largest_timestamp: int
    rule: str
    reason: str

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class RetentionDecision:
    deleted: list[Deletion] = field(default_factory=list)
    kept: list[int] = field(default_factory=list)  # base offsets of the segments that stay
    log_start_offset: int = 0
    log_end_offset: int = 0
    rolled: int | None = None  # an empty segment at this base replaces a log deleted whole
    notes: list[str] = field(default_factory=list)  # why each active rule stopped where it did

    def to_json(self) -> dict:
        return {"deleted": [d.to_json() for d in self.deleted], "kept_base_offsets": self.kept,
                "log_start_offset": self.log_start_offset, "log_end_offset": self.log_end_offset,
                "rolled_empty_segment": self.rolled, "notes": self.notes}


def decide_retention(segments: list[SegmentAge], *, log_end_offset: int, log_start_offset: int,
                     high_watermark: int | None, options: RetentionOptions) -> RetentionDecision:
    """Which segments Kafka's retention check deletes (see the module docstring). `log_start_offset`:
    the partition's current one (its checkpoint entry, or 0); `high_watermark`: None for the log end
    offset."""
    hw = log_end_offset if high_watermark is None else min(high_watermark, log_end_offset)
    segs = list(segments)
    decision = RetentionDecision(log_end_offset=log_end_offset)
    start = max(log_start_offset, segs[0].base_offset) if segs else log_start_offset
    if options.log_start_offset is not None and options.log_start_offset > start:
        if options.log_start_offset > hw:  # DeleteRecords answers OffsetOutOfRange
            raise UsageError(f"the log start offset {options.log_start_offset} lies beyond the high "
                             f"watermark {hw}")
        start = options.log_start_offset

    def delete_prefix(rule: str, predicate) -> None:
        nonlocal segs, start
        deletable = []
        for i, seg in enumerate(segs):
            following = segs[i + 1] if i + 1 < len(segs) else None
            upper = following.base_offset if following else log_end_offset
            if hw < upper:
                decision.notes.append(f"{rule}: segment {seg.base_offset} ends beyond the high "
                                      f"watermark {hw}")
                break
            reason = predicate(seg, following)
            if reason is None:
                break
            if following is None and not options.include_active:
                decision.notes.append(f"{rule}: segment {seg.base_offset} qualifies ({reason}) but "
                                      f"is the active segment: it stays unless --include-active")
                break
            if following is None and seg.size == 0:
                break  # an empty last segment would only be rolled again
            deletable.append(Deletion(seg.base_offset, upper, seg.size, seg.largest_timestamp, rule,
                                      reason))
        if not deletable:
            return
        if len(deletable) == len(segs):  # UnifiedLog.deleteSegments: roll first, a log keeps one segment
            decision.rolled = log_end_offset
            segs = [SegmentAge(log_end_offset, 0, NO_TIMESTAMP, False)]
        else:
            segs = segs[len(deletable):]
        decision.deleted += deletable
        start = max(start, segs[0].base_offset)

    def below_log_start(seg, following):
        if following is not None and following.base_offset <= start:
            return f"the next segment starts at {following.base_offset} <= log start offset {start}"
        if start > seg.base_offset:
            decision.notes.append(f"{LOG_START_OFFSET}: segment {seg.base_offset} holds the log start "
                                  f"offset {start}")
        return None

    delete_prefix(LOG_START_OFFSET, below_log_start)
    if DELETE not in cleanup_policy(options.cleanup_policy):
        if options.retention_bytes >= 0 or options.retention_ms >= 0:
            decision.notes.append(f"cleanup.policy {options.cleanup_policy!r} has no 'delete': retention.ms "
                                  f"and retention.bytes do not apply, only the log start offset does "
                                  f"(UnifiedLog.deleteOldSegments; an empty policy is infinite "
                                  f"retention, KIP-1161)")
        options = replace(options, retention_bytes=-1, retention_ms=-1)
    if options.retention_bytes >= 0:
        size = sum(s.size for s in segs)
        diff = size - options.retention_bytes

        def over_size(seg, following):
            nonlocal diff
            if diff - seg.size >= 0:
                diff -= seg.size
                return (f"the log is {diff + seg.size} bytes over retention.bytes "
                        f"{options.retention_bytes}; this segment has {seg.size}")
            decision.notes.append(f"{RETENTION_BYTES}: deleting segment {seg.base_offset} "
                                  f"({seg.size} bytes) would leave less than "
                                  f"{options.retention_bytes} bytes (the log is {diff} over)")
            return None

        if size >= options.retention_bytes:
            delete_prefix(RETENTION_BYTES, over_size)
    if options.retention_ms >= 0:
        now = options.now_ms

        def expired(seg, following):
            age = now - seg.largest_timestamp
            source = "its .log modification time" if seg.from_mtime else "its largest timestamp"
            if age > options.retention_ms:
                return (f"{source} {seg.largest_timestamp} is {age} ms before now {now}, more than "
                        f"retention.ms {options.retention_ms}")
            decision.notes.append(f"{RETENTION_MS}: segment {seg.base_offset}: {source} "
                                  f"{seg.largest_timestamp} is {age} ms before now {now}, within "
                                  f"retention.ms {options.retention_ms}")
            return None

        delete_prefix(RETENTION_MS, expired)
    decision.kept = [s.base_offset for s in segs if s.base_offset != decision.rolled]
    decision.log_start_offset = start
    return decision


# --- one partition ---

@dataclass
class RetainResult:
    """What one partition's run returns to the driver (small and picklable)."""

    label: str
    rel: str
    topic: str | None
    partition: int | None
    decision: RetentionDecision
    removed: PartitionSummary | None  # counted from batch headers; no content digest
    output: PartitionSummary | None
    files: list[FileRecord]
    log_start_offset_entry: int | None  # what DST's log-start-offset-checkpoint holds for it
    segment_start: int | None = None  # a partition-directory DST: its first segment's new base offset
    below: BelowLogStart | None = None  # what that first segment's new start leaves out

    def report_entry(self) -> dict:
        return {"partition": self.label, "destination": self.rel or ".",
                **self.decision.to_json(),
                "log_start_offset_checkpoint": self.log_start_offset_entry,
                "first_segment_renamed_to": self.segment_start,
                "removed": None if self.removed is None else {
                    "segments": self.removed.segments, "batches": self.removed.batches,
                    "records": self.removed.records, "control_records": self.removed.control_records,
                    "log_bytes": self.removed.log_bytes,
                    **({"uncounted_wrappers": self.removed.uncounted_wrappers}
                       if self.removed.check == ENTRIES_CHECK else {})}}


def retain_partition(job: PartitionJob, files, options: RetentionOptions, dry_run: bool = False,
                     on_progress=None) -> RetainResult:
    """Apply retention to one partition, writing what remains through `files` (the StagedFiles of
    DST, or a StagingTarget's on an executor) unless `dry_run`."""
    part = job.open()
    reader = PartitionReader(part, recover_tail=True)
    facts = segment_ages(reader)
    decision = decide_retention(facts, log_end_offset=log_end_offset(reader),
                                log_start_offset=job.log_start_offset or 0,
                                high_watermark=job.high_watermark, options=options)
    kept_bases = set(decision.kept)
    kept = [seg for seg in part.segments if seg.base_offset in kept_bases]
    # a partition-directory DST carries the log start offset in its first segment's name
    remaining = replace(part, segments=kept)
    start = None if options.include_deleted else segment_start(remaining, decision.log_start_offset,
                                                               bool(job.rel))
    first_base = start if start is not None else kept[0].base_offset if kept else decision.rolled
    # Kafka checkpoints a log start offset only above the first segment's base offset
    above_first = first_base is not None and decision.log_start_offset > first_base
    entry = decision.log_start_offset if above_first else None
    result = RetainResult(job.label, job.rel, part.topic, part.partition, decision, None, None, [], entry,
                          start, None if start is None else below_log_start(remaining, start))
    if dry_run:
        return result
    result.removed = _count_removed(reader, [s for s in part.segments if s not in kept], options.deep)
    plan = PartitionPlan(remaining, job.rel, decision.log_start_offset, segment_start=start,
                         identity=job.identity)
    before = set(files.records)
    if decision.rolled is None:  # (a partition without segments stays one, as reindex keeps it)
        result.output = reindex_partition(plan, files, options.companions, on_progress, deep=options.deep)
    else:
        result.output = _write_rolled(plan, files, decision, options.companions)
    result.files = [r for rel, r in files.records.items() if rel not in before]
    return result


def _count_removed(reader: PartitionReader, segments: list[Segment], deep: bool = True) -> PartitionSummary:
    """Batches and records of the deleted segments, from their headers; with `deep` legacy compressed
    wrappers, whose headers do not say how many messages they hold, are inflated (a run at a time and
    walked without columns where the kernels are, kfmt.format.inflated_runs.walk; else decoded),
    without it they are counted apart (kfmt.format.copied_runs.header_counts)."""
    part = reader.part
    summary = PartitionSummary(part.storage.url_of(part.path), part.topic, part.partition)
    if not deep:
        summary.check = ENTRIES_CHECK
    for seg in segments:
        summary.segments += 1
        summary.log_bytes += seg.size
        if not deep:
            for rows in reader.frame_chunks(seg):
                _count_headers(rows, summary)
            continue
        if native is None or not reader.options.check_crc:
            for header in reader.frames(seg):
                _count_header(reader, seg, header, summary)
            continue
        d = reader.data(seg)
        for rows in reader.frame_chunks(seg):
            _count_rows(reader, seg, d, np.ascontiguousarray(rows), summary)
    return summary


def _count_headers(rows: np.ndarray, summary: PartitionSummary) -> None:
    """A chunk of frame rows counted from the headers alone (kfmt.format.copied_runs.header_counts)."""
    if not len(rows):
        return
    control = (rows["magic"] >= 2) & (rows["attributes"] & ATTR_CONTROL != 0)
    counts = header_counts(rows[~control])
    if counts.first_known and not summary.records + summary.uncounted_wrappers:  # the first data entry
        summary.first_offset = counts.first_offset
    summary.batches += len(rows)
    summary.control_records += int(rows["records_count"][control].sum())
    summary.records += counts.records
    summary.uncounted_wrappers += counts.uncounted
    summary.next_offset = int(rows["last_offset"][-1]) + 1


def _count_header(reader: PartitionReader, seg: Segment, header, summary: PartitionSummary) -> None:
    """One entry counted (the definition: a wrapper decoded for its count and first offset)."""
    summary.batches += 1
    count = header.records_count
    if count is None:
        count = len(reader.decode(seg, header))
    if header.is_control:
        summary.control_records += count
    else:
        summary.records += count
        if summary.first_offset is None and count:
            summary.first_offset = header.base_offset if header.base_offset is not None \
                else reader.decode(seg, header).header.base_offset
    summary.next_offset = header.next_offset


def _count_rows(reader: PartitionReader, seg: Segment, d, rows: np.ndarray, summary: PartitionSummary) -> None:
    """_count_header for a chunk of frame rows: counts and first offsets from the rows, but for the
    wrappers', which come from their inflated records."""
    if not len(rows):
        return
    counts = rows["records_count"].astype(np.int64)
    firsts = rows["base_offset"].copy()
    edges = np.flatnonzero(np.diff(np.concatenate(([0], (counts < 0).view(np.int8), [0])))).tolist()
    for i, stop in zip(edges[::2], edges[1::2]):  # each run of consecutive wrappers
        while i < stop:
            walked = inflated_runs.walk(d.buf, rows, i, stop, d.base, reader.options, digest=False)
            counts[i:walked.stop] = walked.facts["records"]
            firsts[i:walked.stop] = walked.facts["first"]
            i = walked.stop
            if i < stop:  # the decode decides (and reports a damaged wrapper)
                batch = reader.decode(seg, header_of(rows[i].item()))
                counts[i], firsts[i] = len(batch), batch.header.base_offset
                i += 1
    control = (rows["magic"] >= MAGIC_V2) & (rows["attributes"] & ATTR_CONTROL != 0)
    summary.batches += len(rows)
    summary.control_records += int(counts[control].sum())
    summary.records += int(counts[~control].sum())
    if summary.first_offset is None:
        held = np.flatnonzero(~control & (counts > 0))
        if len(held):
            summary.first_offset = int(firsts[held[0]])
    summary.next_offset = int(rows["last_offset"][-1]) + 1


def _write_rolled(plan: PartitionPlan, files, decision: RetentionDecision,
                  options: CompanionOptions) -> PartitionSummary:
    """A log deleted whole: one empty segment at the log end offset, as the broker rolls it."""
    part, base = plan.part, decision.rolled
    builder = CompanionBuilder(**options.builder_options(), log_start_offset=decision.log_start_offset,
                               leader_epochs=existing_leader_epochs(part))
    builder.begin_segment(base)
    files.write(plan.rel_path(segment_file_name(base, "log")), b"", options.now_ms)
    for name, content in builder.end_segment().files().items():
        files.write(plan.rel_path(name), content, options.now_ms)
    for name, content in builder.finish().files().items():
        files.write(plan.rel_path(name), content)
    plan.write_identity(files)
    summary = PartitionSummary(part.storage.url_of(part.path), part.topic, part.partition, segments=1,
                               next_offset=base)
    return summary


def checkpoint_updates(results: list[RetainResult]) -> dict:
    """DST's log-start-offset-checkpoint entries for the partitions written."""
    return {LOG_START_OFFSET_CHECKPOINT: {(r.topic, r.partition): r.log_start_offset_entry
                                          for r in results}}


__all__ = ["RetentionOptions", "RetentionDecision", "Deletion", "SegmentAge", "decide_retention",
           "retain_partition", "segment_ages", "segment_largest_timestamp", "checkpoint_updates"]
