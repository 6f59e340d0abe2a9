"""The rules of Kafka's retention check (`UnifiedLog.deleteOldSegments`, Kafka 3.6; docs/format.md
§13) as kfmt.transforms.cleanup.retention applies them: which segments go, and why the others stay.

Three rules run in this order, each deleting a *prefix* of the segments (the oldest first, stopping
at the first segment that must stay), each seeing what the previous one left: the log start offset,
retention.bytes, retention.ms (kfmt.transforms.cleanup.retention says each rule's arithmetic)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

from kfmt.defaults import DEFAULT_INDEX_INTERVAL_BYTES, DEFAULT_PRODUCER_EXPIRATION_MS
from kfmt.errors import UsageError
from kfmt.format.model import NO_TIMESTAMP
from kfmt.partition.companions import CompanionOptions
from kfmt.transforms.cleanup.plan import DELETE, cleanup_policy

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


class _RetentionCheck:
    """One retention check over a partition's segments (UnifiedLog.deleteOldSegments): each rule
    deletes a prefix of what the rules before it left, and says in a note why it stopped."""

    def __init__(self, segments: list[SegmentAge], log_end_offset: int, log_start_offset: int,
                 high_watermark: int | None, options: RetentionOptions):
        self.options, self.log_end_offset = options, log_end_offset
        self.hw = log_end_offset if high_watermark is None else min(high_watermark, log_end_offset)
        self.segs = list(segments)
        self.decision = RetentionDecision(log_end_offset=log_end_offset)
        self.start = max(log_start_offset, self.segs[0].base_offset) if self.segs else log_start_offset
        self.diff = 0  # retention.bytes: how far the log is over it
        wanted = options.log_start_offset
        if wanted is not None and wanted > self.start:
            if wanted > self.hw:  # DeleteRecords answers OffsetOutOfRange
                raise UsageError(f"the log start offset {wanted} lies beyond the high watermark {self.hw}")
            self.start = wanted

    def note(self, text: str) -> None:
        self.decision.notes.append(text)

    def delete_prefix(self, rule: str, predicate) -> None:
        """Delete the segments from the first on while `predicate(segment, the next or None)` gives
        a reason; a log deleted whole is rolled first (UnifiedLog.deleteSegments: a log keeps one
        segment)."""
        deletable = self._deletable(rule, predicate)
        if not deletable:
            return
        if len(deletable) == len(self.segs):
            self.decision.rolled = self.log_end_offset
            self.segs = [SegmentAge(self.log_end_offset, 0, NO_TIMESTAMP, False)]
        else:
            self.segs = self.segs[len(deletable):]
        self.decision.deleted += deletable
        self.start = max(self.start, self.segs[0].base_offset)

    def _deletable(self, rule: str, predicate) -> list[Deletion]:
        out = []
        for i, seg in enumerate(self.segs):
            following = self.segs[i + 1] if i + 1 < len(self.segs) else None
            upper = following.base_offset if following else self.log_end_offset
            if self.hw < upper:
                self.note(f"{rule}: segment {seg.base_offset} ends beyond the high watermark {self.hw}")
                break
            reason = predicate(seg, following)
            if reason is None:
                break
            if following is None and not self.options.include_active:
                self.note(f"{rule}: segment {seg.base_offset} qualifies ({reason}) but is the active "
                          f"segment: it stays unless --include-active")
                break
            if following is None and seg.size == 0:
                break  # an empty last segment would only be rolled again
            out.append(Deletion(seg.base_offset, upper, seg.size, seg.largest_timestamp, rule, reason))
        return out

    def below_log_start(self, seg: SegmentAge, following: SegmentAge | None) -> str | None:
        if following is not None and following.base_offset <= self.start:
            return f"the next segment starts at {following.base_offset} <= log start offset {self.start}"
        if self.start > seg.base_offset:
            self.note(f"{LOG_START_OFFSET}: segment {seg.base_offset} holds the log start offset "
                      f"{self.start}")
        return None

    def over_size(self, seg: SegmentAge, following: SegmentAge | None) -> str | None:
        limit = self.options.retention_bytes
        if self.diff - seg.size >= 0:
            self.diff -= seg.size
            return (f"the log is {self.diff + seg.size} bytes over retention.bytes {limit}; this segment "
                    f"has {seg.size}")
        self.note(f"{RETENTION_BYTES}: deleting segment {seg.base_offset} ({seg.size} bytes) would leave "
                  f"less than {limit} bytes (the log is {self.diff} over)")
        return None

    def expired(self, seg: SegmentAge, following: SegmentAge | None) -> str | None:
        now, limit = self.options.now_ms, self.options.retention_ms
        age = now - seg.largest_timestamp
        source = "its .log modification time" if seg.from_mtime else "its largest timestamp"
        if age > limit:
            return (f"{source} {seg.largest_timestamp} is {age} ms before now {now}, more than "
                    f"retention.ms {limit}")
        self.note(f"{RETENTION_MS}: segment {seg.base_offset}: {source} {seg.largest_timestamp} is {age} ms "
                  f"before now {now}, within retention.ms {limit}")
        return None

    def without_delete_policy(self) -> None:
        """cleanup.policy without `delete`: only the log start offset rule applies."""
        options = self.options
        if options.retention_bytes >= 0 or options.retention_ms >= 0:
            self.note(f"cleanup.policy {options.cleanup_policy!r} has no 'delete': retention.ms and "
                      f"retention.bytes do not apply, only the log start offset does "
                      f"(UnifiedLog.deleteOldSegments; an empty policy is infinite retention, KIP-1161)")
        self.options = replace(options, retention_bytes=-1, retention_ms=-1)


def decide_retention(segments: list[SegmentAge], *, log_end_offset: int, log_start_offset: int,
                     high_watermark: int | None, options: RetentionOptions) -> RetentionDecision:
    """Which segments Kafka's retention check deletes (see the module docstring). `log_start_offset`:
    the partition's current one (its checkpoint entry, or 0); `high_watermark`: None for the log end
    offset."""
    check = _RetentionCheck(segments, log_end_offset, log_start_offset, high_watermark, options)
    check.delete_prefix(LOG_START_OFFSET, check.below_log_start)
    if DELETE not in cleanup_policy(options.cleanup_policy):
        check.without_delete_policy()
    if check.options.retention_bytes >= 0:
        size = sum(s.size for s in check.segs)
        check.diff = size - check.options.retention_bytes
        if size >= check.options.retention_bytes:
            check.delete_prefix(RETENTION_BYTES, check.over_size)
    if check.options.retention_ms >= 0:
        check.delete_prefix(RETENTION_MS, check.expired)
    decision = check.decision
    decision.kept = [s.base_offset for s in check.segs if s.base_offset != decision.rolled]
    decision.log_start_offset = check.start
    return decision
