"""What one partition's cleaning is given and gives back: the options of `kfmt compact` (Kafka's
topic configs of the same names), the cleaning's statistics and result, and the sink of a dry run."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kfmt.defaults import (
    DEFAULT_DELETE_RETENTION_MS,
    DEFAULT_INDEX_INTERVAL_BYTES,
    DEFAULT_MAX_INDEX_BYTES,
    DEFAULT_OFFSET_MAP_LOAD_FACTOR,
    DEFAULT_OFFSET_MAP_MEMORY,
    DEFAULT_PRODUCER_EXPIRATION_MS,
    DEFAULT_SEGMENT_BYTES,
)
from kfmt.errors import KfmtError, UsageError
from kfmt.format.model import Batch, BatchHeader
from kfmt.partition.log_start import BelowLogStart
from kfmt.partition.summary import PartitionCounts
from kfmt.plugin import registry
from kfmt.storage.manifest import FileRecord
from kfmt.transforms.cleanup.compaction.filter import Action, Removed
from kfmt.transforms.cleanup.plan import COMPACT, cleanup_policy
from kfmt.write.planner import REQUESTED, RollPolicy
from kfmt.write.writer import SegmentSummary, WriteSummary

NEVER = 2**63 - 1  # a cleaned group is one segment: no time-based roll inside it


@dataclass(frozen=True)
class CompactOptions:
    now_ms: int = 0  # the cleaner's clock: delete horizons and producer expiry
    delete_retention_ms: int = DEFAULT_DELETE_RETENTION_MS
    min_compaction_lag_ms: int = 0
    clean_until: int | None = None  # an upper bound on the cleaned range (a segment base is used)
    segment_bytes: int = DEFAULT_SEGMENT_BYTES
    segment_index_bytes: int = DEFAULT_MAX_INDEX_BYTES
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES
    offset_map_bytes: int = DEFAULT_OFFSET_MAP_MEMORY
    offset_map_load_factor: float = DEFAULT_OFFSET_MAP_LOAD_FACTOR
    fail_when_map_full: bool = False
    keep_format: bool = False  # Kafka 3.x: v0/v1 batches stay v0/v1 (else 4.0: they become v2)
    producer_expiration_ms: int = DEFAULT_PRODUCER_EXPIRATION_MS
    cleanup_policy: str = COMPACT  # the topic's: without `compact` the cleaner leaves the log alone
    # codec id -> level of the batches compressed anew (kfmt.format.codecs.compression_levels);
    # a codec not named compresses at its own default
    compression_levels: dict = field(default_factory=dict)
    # a partition-directory DST keeps what lies below the log start offset (else its first segment
    # starts at the log start offset: kfmt.partition.log_start.segment_start)
    include_deleted: bool = False

    def __post_init__(self):
        cleanup_policy(self.cleanup_policy)  # checks it
        for name in ("delete_retention_ms", "min_compaction_lag_ms", "producer_expiration_ms"):
            if getattr(self, name) < 0:
                raise UsageError(f"{name.replace('_', '.')} must be >= 0, got {getattr(self, name)}")
        if self.clean_until is not None and self.clean_until < 0:
            raise UsageError(f"--clean-until must be >= 0, got {self.clean_until}")
        self.roll_policy()  # checks segment.bytes and segment.index.bytes

    def roll_policy(self) -> RollPolicy:
        return RollPolicy(self.segment_bytes, NEVER, self.index_interval_bytes, self.segment_index_bytes)


@dataclass
class CleanStats:
    records_read: int = 0
    records_written: int = 0
    batches_read: int = 0
    batches: dict = field(default_factory=lambda: {a.value: 0 for a in Action})
    converted_batches: int = 0  # v0/v1 batches written as v2
    bytes_read: int = 0  # .log bytes of the segments rewritten
    bytes_written: int = 0  # .log bytes of the segments they became

    def to_json(self, removed: Removed) -> dict:
        return {"records_read": self.records_read, "records_written": self.records_written,
                "removed": removed.to_json(), "batches_read": self.batches_read,
                "batches": dict(self.batches), "converted_batches": self.converted_batches,
                "bytes_read": self.bytes_read, "bytes_written": self.bytes_written,
                "bytes_removed": self.bytes_read - self.bytes_written}


@dataclass
class CompactResult:
    """What one partition's cleaning returns to the driver (small and picklable)."""

    label: str
    rel: str
    topic: str | None
    partition: int | None
    details: dict
    input: PartitionCounts
    output: PartitionCounts | None
    files: list[FileRecord]
    cleaner_offset: int | None  # DST's cleaner-offset-checkpoint entry
    segment_start: int | None = None  # a partition-directory DST: its first segment's new base offset
    below: BelowLogStart | None = None  # what that first segment's new start leaves out

    def report_entry(self) -> dict:
        return {"partition": self.label, "destination": self.rel or ".", **self.details,
                "cleaner_offset_checkpoint": self.cleaner_offset,
                "first_segment_renamed_to": self.segment_start}


class OffsetMapFull(KfmtError):
    pass


class DrySink:
    """Stands in for the partition writer in a dry run: encodes to count bytes, writes nothing."""

    def __init__(self):
        self.summary = WriteSummary()

    def roll(self, base_offset: int) -> None:
        self.summary.segments.append(SegmentSummary(base_offset, 0, 0, None, REQUESTED))

    def append(self, header: BatchHeader, entry, *, mtime_ms=None) -> None:
        seg = self.summary.segments[-1]
        seg.size, seg.batches, seg.last_offset = seg.size + len(entry), seg.batches + 1, header.last_offset

    def append_frames(self, rows: np.ndarray, entries, *, mtime_ms=None) -> None:
        seg = self.summary.segments[-1]
        seg.size, seg.batches = seg.size + len(entries), seg.batches + len(rows)
        seg.last_offset = int(rows["last_offset"][-1])

    def append_batch(self, batch: Batch, *, level=None, mtime_ms=None) -> None:
        fmt = registry.get().format_for(batch.header.magic)
        self.append(batch.header, fmt.encode(batch.header, batch.records, level=level))

    def close(self) -> WriteSummary:
        return self.summary

    def abort(self) -> None:
        pass
