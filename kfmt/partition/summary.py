"""What a partition holds, counted as its batches go by: record and batch counts, offsets, bytes
and the content digest (kfmt.format.digest). Transforms and the archive report these for every
partition they read and write; parts counted by parallel tasks add up with merge_tallies."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Iterable

from kfmt.format.batch_runs import CheckedRun
from kfmt.format.digest import ContentDigest
from kfmt.format.model import Batch


@dataclass
class PartitionSummary:
    """What one partition holds: counts, offsets and the content digest."""

    path: str
    topic: str | None
    partition: int | None
    segments: int = 0
    batches: int = 0
    records: int = 0
    control_records: int = 0
    log_bytes: int = 0
    first_offset: int | None = None  # of the first data record
    next_offset: int | None = None  # after the last batch
    content_digest: str | None = None

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class PartitionTally:
    """Accumulates a PartitionSummary from the batches of a partition, in offset order."""

    summary: PartitionSummary
    digest: ContentDigest = field(default_factory=ContentDigest)

    def add_segment(self, log_bytes: int) -> None:
        self.summary.segments += 1
        self.summary.log_bytes += log_bytes

    def add_batch(self, batch: Batch) -> None:
        s = self.summary
        s.batches += 1
        s.next_offset = batch.header.next_offset
        if batch.header.is_control:
            s.control_records += len(batch)
            return
        if len(batch):
            if s.first_offset is None:
                s.first_offset = batch.records.column(0)[0].as_py()
            s.records += len(batch)
            self.digest.update(batch.records)

    def add(self, item: CheckedRun | Batch) -> None:
        """add_batch for a checked run of data batches too (kfmt.format.batch_runs)."""
        if isinstance(item, Batch):
            self.add_batch(item)
            return
        s = self.summary
        s.batches += len(item.rows)
        s.next_offset = item.next_offset
        s.records += item.digest.records
        if s.first_offset is None:
            s.first_offset = item.first_offset
        self.digest.merge(item.digest)

    def finish(self) -> PartitionSummary:
        self.summary.content_digest = self.digest.hexdigest()
        return self.summary


def merge_tallies(tallies: Iterable[PartitionTally], path: str, topic, partition) -> PartitionSummary:
    """The summary of a partition from the tallies of its parts, given in offset order."""
    out = PartitionSummary(path, topic, partition)
    digest = ContentDigest()
    for t in tallies:
        s = t.summary
        out.segments += s.segments
        out.batches += s.batches
        out.records += s.records
        out.control_records += s.control_records
        out.log_bytes += s.log_bytes
        if out.first_offset is None:
            out.first_offset = s.first_offset
        if s.next_offset is not None:
            out.next_offset = s.next_offset
        digest.merge(t.digest)
    out.content_digest = digest.hexdigest()
    return out
