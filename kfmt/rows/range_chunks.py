"""What reading a segment range (kfmt.rows.ranges.read_range) keeps: the tally of what it read
(RangeTally: counts, offsets, the content digest, what it left out), and the export rows it gathers
into chunks of about ROWS_PER_CHUNK rows (Chunk), decoded batches digested a chunk at a time."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

import pyarrow as pa

from kfmt.errors import DataError
from kfmt.format.digest import ContentDigest
from kfmt.rows.columns import concat_records, export_batch, export_frames
from kfmt.rows.range_plan import SegmentRange


class NoDigest:
    """A tally's digest where nobody reads it (the data source's tasks): no hashing of records."""

    def update(self, records) -> None:
        pass

    def merge(self, other) -> None:
        pass

    def hexdigest(self) -> str:
        raise TypeError("this tally keeps no digest")


@dataclass
class RangeTally:
    """What reading a range found (small and picklable: it travels back to the driver)."""

    batches: int = 0
    records: int = 0  # data records read (not control, not left out)
    control_records: int = 0  # control records read (not left out)
    control_seen: int = 0  # control records in the batches read, left out or not
    left_out: dict = field(default_factory=dict)  # reason -> records left out
    first_offset: int | None = None  # of the first data record read
    next_offset: int | None = None  # after the last batch of the range
    digest: ContentDigest = field(default_factory=ContentDigest)  # of the data records read
    tails: list = field(default_factory=list)  # warnings about a last segment's tail left out
    gone: str | None = None  # a segment deleted or replaced while read: where the read ended, why

    @property
    def rows(self) -> int:
        return self.records + self.control_records

    def merge(self, other: "RangeTally") -> "RangeTally":
        """Add a later range of the same partition."""
        self.batches += other.batches
        self.records += other.records
        self.control_records += other.control_records
        self.control_seen += other.control_seen
        for reason, n in other.left_out.items():
            self.left_out[reason] = self.left_out.get(reason, 0) + n
        if self.first_offset is None:
            self.first_offset = other.first_offset
        if other.next_offset is not None:
            self.next_offset = other.next_offset
        self.digest.merge(other.digest)
        self.tails += other.tails
        self.gone = self.gone or other.gone
        return self


def block_read(records: pa.RecordBatch, rows, tally: RangeTally, chunk: "Chunk", counts=None,
                base_offsets=None) -> Iterator[pa.RecordBatch]:
    """Count and digest the records of entries read as one block, all selected, and add their rows."""
    tally.batches += len(rows)
    tally.next_offset = int(rows["last_offset"][-1]) + 1
    if records.num_rows:
        if tally.first_offset is None:
            tally.first_offset = records.column(0)[0].as_py()
        tally.records += records.num_rows
        tally.digest.update(records)
        yield from chunk.add_run(records, rows, counts, base_offsets)


class Chunk:
    """Export rows being gathered: decoded batches, and runs of batches or messages decoded as one
    column block (their records and rows of frames), turned into one RecordBatch when a chunk's worth
    is there. The records of decoded data batches are digested into the tally a chunk at a time
    (one kernel call, not one per batch)."""

    def __init__(self, rng: SegmentRange, rows: int, size: int, tally: RangeTally,
                 gathered: bool = True):
        self.rng, self.max_rows, self.max_bytes, self.tally = rng, rows, size, tally
        self.gathered = gathered  # a chunk as one RecordBatch (else as its parts)
        self.batches: list = []  # (Batch, segment base) pairs not yet in `parts`
        self.parts: list[pa.RecordBatch] = []
        self.rows = self.bytes = 0

    def add_batch(self, batch, selected: bool) -> Iterator[pa.RecordBatch]:
        if selected:
            self.batches.append((batch, self.rng.segment_base))
            yield from self._grown(len(batch), batch.records.nbytes)

    def add_run(self, records: pa.RecordBatch, rows, counts=None, base_offsets=None
                ) -> Iterator[pa.RecordBatch]:
        self._batches_done()
        self.parts.append(self._made(lambda: export_frames(records, rows, self.rng.segment_base,
                                                           self.rng.topic, self.rng.partition,
                                                           counts, base_offsets)))
        yield from self._grown(records.num_rows, records.nbytes)

    def flush(self) -> Iterator[pa.RecordBatch]:
        self._batches_done()
        if self.parts:
            parts, self.parts, self.rows, self.bytes = self.parts, [], 0, 0
            if self.gathered and len(parts) > 1:
                parts = pa.Table.from_batches(parts).combine_chunks().to_batches()
            yield from parts

    def _grown(self, rows: int, size: int) -> Iterator[pa.RecordBatch]:
        self.rows += rows
        self.bytes += size
        if self.rows >= self.max_rows or self.bytes >= self.max_bytes:
            yield from self.flush()

    def _batches_done(self) -> None:
        if self.batches:
            batches, self.batches = self.batches, []
            records = concat_records([b.records for b, _ in batches])
            data = [b.records for b, _ in batches if not b.header.is_control]
            self.tally.digest.update(records if len(data) == len(batches) else concat_records(data))
            self.parts.append(self._made(lambda: export_batch(batches, self.rng.topic,
                                                              self.rng.partition, records)))

    def _made(self, make) -> pa.RecordBatch:
        try:
            return make()
        except DataError as err:
            raise err.located(file=self.rng.file) from None
