"""What the cleaner knows about a partition before it cleans (one pass over batch headers).

A broker has these in memory; offline they come from one scan of the frames (control batches are
decoded, they are one small record each):
* per segment: size, modification time, index sizes (the cleaner's grouping reads them) and the
  largest timestamp (for min.compaction.lag.ms);
* the log end offset;
* the producer state at the log end, replayed as Kafka's `ProducerStateManager` does
  (kfmt.partition.producer_state): the aborted transactions (what the `.txnindex` files list), the first
  offset of the earliest transaction still open (the last stable offset: nothing at or beyond it is
  cleaned), and each active producer's last record, whose batch the cleaner keeps even when emptied
  (`UnifiedLog.lastRecordsOfActiveProducers`). Producers idle for `producer.id.expiration.ms` at
  `now_ms` without an open transaction have expired: a broker would have dropped them.
"""
from __future__ import annotations

from dataclasses import dataclass

from kfmt.errors import DataError
from kfmt.format.frames import headers_of
from kfmt.format.layout import MAGIC_V2
from kfmt.format.model import NO_PRODUCER_ID, NO_TIMESTAMP
from kfmt.partition.companions import control_facts
from kfmt.partition.producer_state import ProducerStateManager
from kfmt.partition.reader import PartitionReader, frames_largest_timestamp
from kfmt.partition.transactions import AbortedTransaction
from kfmt.transforms.cleanup.retention import segment_largest_timestamp


@dataclass(frozen=True)
class SegmentInfo:
    base_offset: int
    size: int
    mtime_ms: int  # LogSegment.lastModified (the .log file's)
    index_bytes: int
    timeindex_bytes: int
    largest_timestamp: int  # LogSegment.largestTimestamp: the records' maximum, else the mtime


@dataclass(frozen=True)
class LastRecord:
    """An active producer's last data offset (None when it has none) and epoch (Kafka's LastRecord)."""

    last_data_offset: int | None
    producer_epoch: int


@dataclass
class PartitionFacts:
    segments: list[SegmentInfo]
    log_end_offset: int
    aborted: list[AbortedTransaction]
    first_unstable_offset: int | None  # first offset of the earliest open transaction
    active_producers: dict[int, LastRecord]

    @property
    def active_segment(self) -> SegmentInfo:
        return self.segments[-1]


def gather_facts(reader: PartitionReader, now_ms: int, producer_expiration_ms: int) -> PartitionFacts:
    part = reader.part
    producers = ProducerStateManager(producer_expiration_ms)
    aborted: list[AbortedTransaction] = []
    segments: list[SegmentInfo] = []
    log_end_offset = part.segments[0].base_offset if part.segments else 0
    for seg in part.segments:
        next_offset, largest = seg.base_offset, []  # each chunk's largest timestamp: no second scan below
        for rows in reader.frame_chunks(seg):
            if len(rows):
                next_offset = int(rows["last_offset"][-1]) + 1
                largest.append(frames_largest_timestamp([rows]))
            # only v2 batches with a producer id change the producer state: a header for those alone
            # (a GB of producer-shaped log is over a million entries, most of them without one)
            for header in headers_of(rows[(rows["magic"] >= MAGIC_V2) & (rows["producer_id"] > NO_PRODUCER_ID)]):
                _replay(reader, seg, header, producers, aborted)
        log_end_offset = next_offset
        segments.append(SegmentInfo(
            seg.base_offset, seg.log.size, seg.log.mtime_ms or 0,
            seg.index.size if seg.index is not None else 0,
            seg.timeindex.size if seg.timeindex is not None else 0,
            segment_largest_timestamp(reader, seg, scanned=max(largest, default=NO_TIMESTAMP))))
    active = {pid: LastRecord(state.last_offset if state.last_offset >= 0 else None, state.epoch)
              for pid, state in producers.producers.items() if not producers.is_expired(state, now_ms)}
    first_unstable = min(producers.ongoing, default=None)
    return PartitionFacts(segments, log_end_offset, aborted, first_unstable, active)


def _replay(reader: PartitionReader, seg, header, producers: ProducerStateManager,
            aborted: list[AbortedTransaction]) -> None:
    """One v2 batch with a producer id replayed into `producers` (a control batch's marker decoded);
    a transaction it completes, if aborted, added to `aborted`."""
    control, coordinator_epoch, timestamp = None, -1, header.max_timestamp
    if header.is_control:
        control, coordinator_epoch, marker_ts = control_facts(reader.decode(seg, header))
        timestamp = header.max_timestamp if marker_ts is None else marker_ts
    try:
        completed = producers.append(header, control, coordinator_epoch, timestamp)
        if completed is not None:
            if completed.is_aborted:
                aborted.append(AbortedTransaction(completed.producer_id, completed.first_offset,
                                                  completed.last_offset))
            producers.complete_txn(completed)
    except DataError as err:
        raise err.located(file=reader.part.display(seg.log), base_position=header.position,
                          offset=header.base_offset)
