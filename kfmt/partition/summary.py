"""What a partition holds, counted as its batches go by: record and batch counts, offsets, bytes
and a digest. Transforms and the archive report these for every partition they read and write; parts
counted by parallel tasks add up with merge_tallies.

Which digest depends on the check the command made (`check`): "records" -- every batch decoded, the
content digest of its records (kfmt.format.digest.ContentDigest) -- or "entries", for a byte-for-byte
copy: every entry's CRC checked as Kafka's log recovery checks it and the entries digest of its bytes
(kfmt.format.digest.EntriesDigest, kfmt.format.copied_runs), the records counted from the headers;
a compressed v0/v1 wrapper's records are known only inflated, so such wrappers are counted apart
(`uncounted_wrappers`) and, where one comes first, `first_offset` is None."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Iterable

from kfmt.format.batch_runs import CheckedRun
from kfmt.format.copied_runs import CopiedRun, header_counts
from kfmt.format.digest import ContentDigest, EntriesDigest
from kfmt.format.model import Batch

RECORDS_CHECK, ENTRIES_CHECK = "records", "entries"


@dataclass
class PartitionCounts:
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
    content_digest: str | None = None  # "records" check
    check: str = RECORDS_CHECK
    entries_digest: str | None = None  # "entries" check
    uncounted_wrappers: int = 0  # "entries" check: compressed v0/v1 wrappers, not in `records`

    @property
    def digest(self) -> str | None:
        """The digest of the check made: what must be equal before and after a copy."""
        return self.entries_digest if self.check == ENTRIES_CHECK else self.content_digest

    def to_json(self) -> dict:
        out = asdict(self)
        if self.check == RECORDS_CHECK:  # the report as it was before the entries check existed
            for name in ("check", "entries_digest", "uncounted_wrappers"):
                del out[name]
        return out


@dataclass
class PartitionTally:
    """Accumulates a PartitionCounts from the batches of a partition, in offset order. `entries`:
    the entries digest, for the "entries" check (CopiedRuns)."""

    summary: PartitionCounts
    digest: ContentDigest = field(default_factory=ContentDigest)
    entries: EntriesDigest | None = None
    first_known: bool = False  # first_offset is final (a wrapper first leaves it None)

    @classmethod
    def of_entries(cls, summary: PartitionCounts) -> "PartitionTally":
        summary.check = ENTRIES_CHECK
        return cls(summary, entries=EntriesDigest())

    def _first(self, offset: int | None) -> None:
        if not self.first_known:
            self.summary.first_offset, self.first_known = offset, True

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
            self._first(batch.records.column(0)[0].as_py())
            s.records += len(batch)
            if self.entries is None:
                self.digest.update(batch.records)

    def add(self, item: CheckedRun | CopiedRun | Batch) -> None:
        """add_batch for a checked run of data batches too (kfmt.format.batch_runs), and for copied
        entries (kfmt.format.copied_runs)."""
        if isinstance(item, Batch):
            self.add_batch(item)
            return
        if isinstance(item, CopiedRun):
            self._add_copied(item)
            return
        s = self.summary
        s.batches += len(item.rows)
        s.next_offset = item.next_offset
        s.records += item.digest.records
        if item.first_offset is not None:
            self._first(item.first_offset)
        self.digest.merge(item.digest)

    def _add_copied(self, run: CopiedRun) -> None:
        self.entries.merge(run.digest)
        if run.batch is not None:  # decoded: counted from its records
            self.add_batch(run.batch)
            return
        s, counts = self.summary, header_counts(run.rows)
        s.batches += len(run.rows)
        s.next_offset = int(run.rows["last_offset"][-1]) + 1
        s.records += counts.records
        s.uncounted_wrappers += counts.uncounted
        if counts.first_known:
            self._first(counts.first_offset)

    def finish(self) -> PartitionCounts:
        if self.entries is not None:
            self.summary.entries_digest = self.entries.hexdigest()
        else:
            self.summary.content_digest = self.digest.hexdigest()
        return self.summary


def merge_tallies(tallies: Iterable[PartitionTally], path: str, topic, partition) -> PartitionCounts:
    """The summary of a partition from the tallies of its parts, given in offset order (all of one
    check)."""
    tallies = list(tallies)
    entries = bool(tallies) and tallies[0].entries is not None
    out = PartitionTally.of_entries(PartitionCounts(path, topic, partition)) if entries \
        else PartitionTally(PartitionCounts(path, topic, partition))
    for t in tallies:
        s, o = t.summary, out.summary
        o.segments += s.segments
        o.batches += s.batches
        o.records += s.records
        o.control_records += s.control_records
        o.log_bytes += s.log_bytes
        o.uncounted_wrappers += s.uncounted_wrappers
        if t.first_known or s.first_offset is not None:
            out._first(s.first_offset)
        if s.next_offset is not None:
            o.next_offset = s.next_offset
        if entries:
            out.entries.merge(t.entries)
        else:
            out.digest.merge(t.digest)
    return out.finish()
