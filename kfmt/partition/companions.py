"""A partition's companion files, computed from its batches exactly as Kafka 3.6's log recovery does.

Every kfmt-written partition directory gets its `.index`, `.timeindex`, `.txnindex`, producer
`.snapshot` files and `leader-epoch-checkpoint` from `CompanionBuilder`, fed the batches of the
partition in log order, segment by segment. What it models (Kafka's classes and methods named):

* Per segment, `LogSegment.recover` (docs/format.md §6.3): per batch, first the running maximum timestamp
  (and the last offset of the first batch that reached it), then, when more than
  `index.interval.bytes` lie between this batch's position and the last indexed one, an offset entry
  (batch last offset, batch position) and a time entry (running maximum) if its timestamp is new;
  finally the running maximum once more. Uncompressed v0/v1 messages are batches of their own.
  v2 batches also feed the leader-epoch cache (docs/format.md §9) and the producer state, which yields the
  `.txnindex` entries of aborted transactions (docs/format.md §7).
* Across segments, the order in which recovery runs (`LogLoader.loadSegmentFiles` / `recoverLog`,
  `recoverSegment`, `UnifiedLog.rebuildProducerState`, §8): each segment is recovered by a fresh
  ProducerStateManager that reloads the latest snapshot at or below the segment's base (dropping
  producers idle for `producer.id.expiration.ms` against the wall clock: the reason a snapshot
  depends on `now_ms`), writes one at the base if none is there, replays the segment and writes one
  at the offset after its last v2 batch. After the last segment, stray snapshots are removed, the
  log's own ProducerStateManager reloads the latest one and writes one at the log end offset if
  missing (a clean shutdown writes nothing more), and snapshots at or below the log start offset go.
  So the files are: one snapshot at every segment base but the first, and one at the log end offset.

Assumed, as in a broker that loads a directory with no index or snapshot files and no clean-shutdown
marker: the whole log is recovered (recovery point 0), the topic's message format is 0.11 or later
(always so with inter.broker.protocol.version >= 3.0; for logs holding only v0/v1 data the files are
the same either way: empty snapshots), and the log start offset is `log_start_offset` (0, as for a
partition missing from `log-start-offset-checkpoint`).

Array-at-a-time: `add_frames` (SegmentIndexer, RecoveredSegmentBuilder, CompanionBuilder) takes rows of
frames (kfmt.format.frames) of data batches; the index walk runs in one compiled call (kfmt.format.kernels) and
only v2 rows with a producer id or a new leader epoch are looked at one by one. Same results as
`add` per row, which remains the definition (and handles every row the kernel refuses).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import numpy as np

from kfmt.defaults import DEFAULT_INDEX_INTERVAL_BYTES, DEFAULT_PRODUCER_EXPIRATION_MS
from kfmt.errors import DataError, UsageError
from kfmt.format.control import ControlType, control_type, end_txn_marker
from kfmt.format.frames import header_of
from kfmt.format.layout import MAGIC_V2
from kfmt.format.model import Batch, BatchHeader
from kfmt.partition.checkpoints import EpochEntry, read_leader_epochs, write_leader_epochs
from kfmt.partition.leader_epochs import LeaderEpochCache
from kfmt.partition.layout import LEADER_EPOCH_CHECKPOINT, PartitionDir, segment_file_name
from kfmt.partition.producer_state import ProducerStateManager, SnapshotFiles
from kfmt.partition.segment_recovery import (
    RecoveredSegment,
    SegmentCompanions,
    SegmentIndexer,
    check_no_control,
    producer_rows,
    rising_epochs,
    v2_rows,
)
from kfmt.partition.snapshots import write_snapshot
from kfmt.partition.txnindex import AbortedTxn


@dataclass(frozen=True)
class CompanionOptions:
    """How companion files are built (CompanionBuilder): the broker settings and the wall clock Kafka's
    log recovery would use. Every command that regenerates companions takes these."""

    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES
    now_ms: int | None = None  # the wall clock producer expiry is judged against (None: now)
    producer_expiration_ms: int = DEFAULT_PRODUCER_EXPIRATION_MS

    def __post_init__(self):
        if self.index_interval_bytes < 0:
            raise UsageError(f"--index-interval-bytes must be >= 0, got {self.index_interval_bytes}")
        if self.producer_expiration_ms < 1:
            raise UsageError(f"--producer-expiration-ms must be >= 1, got {self.producer_expiration_ms}")

    def with_clock(self):
        """These options with `now_ms` fixed: one clock for a whole run, recorded in its report."""
        return self if self.now_ms is not None else replace(self, now_ms=int(time.time() * 1000))

    def builder_options(self) -> dict:
        """CompanionBuilder's keyword arguments (also how reports record the options)."""
        return {"index_interval_bytes": self.index_interval_bytes, "now_ms": self.now_ms,
                "producer_expiration_ms": self.producer_expiration_ms}

    to_json = builder_options


@dataclass
class PartitionCompanions:
    """The partition-level files: producer snapshots (offset -> bytes) and the leader epochs."""

    snapshots: dict[int, bytes]
    leader_epochs: list[EpochEntry]
    log_end_offset: int

    @property
    def leader_epoch_checkpoint(self) -> str | None:
        """None when there is no leader epoch (no batch carries one: v0/v1 data, for which Kafka
        keeps no file)."""
        return write_leader_epochs(self.leader_epochs) if self.leader_epochs else None

    def files(self) -> dict[str, bytes]:
        out = {segment_file_name(offset, "snapshot"): data for offset, data in sorted(self.snapshots.items())}
        if self.leader_epochs:
            out[LEADER_EPOCH_CHECKPOINT] = self.leader_epoch_checkpoint.encode("ascii")
        return out


class _SegmentRecovery:
    """LogSegment.recover over one segment's batches: its indexes (SegmentIndexer) and, for v2
    batches, the leader-epoch cache and the producer state, which carry over between segments."""

    def __init__(self, base_offset: int, index_interval_bytes: int, producers: ProducerStateManager,
                 epochs: LeaderEpochCache):
        self.indexer = SegmentIndexer(base_offset, index_interval_bytes)
        self.producers = producers
        self.epochs = epochs
        self.aborted: list[AbortedTxn] = []

    @property
    def last_offset(self) -> int | None:
        return self.indexer.last_offset

    def add(self, header: BatchHeader, control: ControlType | None, coordinator_epoch: int,
            marker_timestamp: int) -> None:
        self.indexer.add(header)
        if header.magic >= MAGIC_V2:
            self.epochs.observe(header)
            self.update_producer_state(header, control, coordinator_epoch, marker_timestamp)
            self.producers.map_end_offset = header.last_offset + 1

    def add_frames(self, rows: np.ndarray) -> None:
        """add() for rows of data batches (no control batch): the epoch cache and the producer state
        are independent of the indexes, so each is brought up to date over all the rows at once."""
        self.indexer.add_frames(rows)
        v2 = v2_rows(rows)
        if len(v2):
            latest = self.epochs.entries[-1].epoch if self.epochs.entries else -1
            for epoch, base_offset in rising_epochs(v2, latest):
                self.epochs.observe_epoch(epoch, base_offset)
            for row in producer_rows(v2).tolist():
                header = header_of(row)
                self.update_producer_state(header, None, -1, header.max_timestamp)
            self.producers.map_end_offset = int(v2["last_offset"][-1]) + 1

    def update_producer_state(self, header: BatchHeader, control: ControlType | None,
                              coordinator_epoch: int, marker_timestamp: int) -> None:
        if header.has_producer_id:
            completed = self.producers.append(header, control, coordinator_epoch, marker_timestamp)
            if completed is not None:
                if completed.is_aborted:
                    self.aborted.append(AbortedTxn(completed.producer_id, completed.first_offset,
                                                   completed.last_offset,
                                                   self.producers.last_stable_offset(completed)))
                self.producers.complete_txn(completed)

    def replay(self, facts: "RecoveredSegment") -> None:
        """What `add` does to the partition-level state, from the facts of a segment whose indexes
        were built elsewhere (RecoveredSegmentBuilder says why the reduced batches give the same state)."""
        for epoch, base_offset in facts.leader_epochs:
            self.epochs.observe_epoch(epoch, base_offset)
        for b in facts.producer_batches:
            self.update_producer_state(b.header, b.control, b.coordinator_epoch, b.marker_timestamp)
        if facts.v2_next_offset is not None:
            self.producers.map_end_offset = facts.v2_next_offset

    def finish(self) -> SegmentCompanions:
        return self.indexer.finish(self.aborted)


class CompanionBuilder:
    """Builds a partition's companion files the way Kafka's log recovery does (docs/format.md §6.3, §7, §8,
    §9), fed the batches of the partition in log order, segment by segment."""

    def __init__(self, *, index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
                 now_ms: int | None = None,
                 producer_expiration_ms: int = DEFAULT_PRODUCER_EXPIRATION_MS,
                 log_start_offset: int = 0, leader_epochs: list[EpochEntry] | None = None):
        """`log_start_offset`: the partition's entry in log-start-offset-checkpoint (0 when it has
        none). `leader_epochs`: the entries of the partition's existing leader-epoch-checkpoint, which
        Kafka's recovery starts from (batches only add epochs above its latest one)."""
        if index_interval_bytes < 0:
            raise UsageError(f"index.interval.bytes must be >= 0, got {index_interval_bytes}")
        if producer_expiration_ms < 1:
            raise UsageError(f"producer.id.expiration.ms must be >= 1, got {producer_expiration_ms}")
        self.index_interval_bytes = index_interval_bytes
        self.now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        self.producer_expiration_ms = producer_expiration_ms
        self.log_start_offset = log_start_offset  # Kafka's logStartOffsetCheckpoint
        self._snapshots = SnapshotFiles()
        self._epochs = LeaderEpochCache(leader_epochs)
        self._bases: list[int] = []
        self._next_offset: int | None = None  # after the last batch seen
        self._last_segment_next_offset: int | None = None
        self._segment: _SegmentRecovery | None = None
        self._finished = False

    def begin_segment(self, base_offset: int) -> None:
        if self._segment is not None or self._finished:
            raise UsageError("begin_segment: the previous segment was not ended, or finish() was called")
        if self._bases and base_offset <= self._bases[-1]:
            raise DataError(f"segment base offset {base_offset} does not follow the previous "
                            f"segment's {self._bases[-1]}", offset=base_offset)
        if self._next_offset is not None and base_offset < self._next_offset:
            raise DataError(f"segment base offset {base_offset} lies below the previous segment's "
                            f"last offset {self._next_offset - 1}", offset=base_offset)
        # LogLoader.recoverSegment: a fresh ProducerStateManager rebuilt up to the segment's base.
        producers = self._new_producer_state()
        self._rebuild(producers, base_offset, self.log_start_offset)
        self._segment = _SegmentRecovery(base_offset, self.index_interval_bytes, producers,
                                         self._epochs)

    def add_batch(self, header: BatchHeader, control: ControlType | None = None,
                  coordinator_epoch: int = -1, *, marker_timestamp: int | None = None) -> None:
        """One batch of the current segment, in order. header.position (its position in the segment
        file) and header.size must be set; for a control batch pass the type of its record (ABORT,
        COMMIT, ...; None for an empty control batch) and the marker's coordinator epoch.
        `marker_timestamp` is the marker record's timestamp (a marker batch holds one record, so
        it defaults to the batch's max timestamp)."""
        if self._segment is None:
            raise UsageError("add_batch before begin_segment")
        self._segment.add(header, control, coordinator_epoch,
                          header.max_timestamp if marker_timestamp is None else marker_timestamp)

    def add_frames(self, rows: np.ndarray) -> None:
        """add_batch() for rows of frames (kfmt.format.frames) of the current segment's data batches, in
        order, many at a time; control batches come through add_decoded_batch (their marker's facts
        are in their records)."""
        if self._segment is None:
            raise UsageError("add_frames before begin_segment")
        check_no_control(rows)
        self._segment.add_frames(rows)

    def add_decoded_batch(self, batch: Batch) -> None:
        """add_batch for a decoded batch: the control facts are read from its records."""
        kind, coordinator_epoch, timestamp = control_facts(batch)
        self.add_batch(batch.header, kind, coordinator_epoch, marker_timestamp=timestamp)

    def end_segment(self) -> SegmentCompanions:
        """Finish the current segment: .index, .timeindex bytes and .txnindex bytes (None when the
        segment has no aborted transaction, as Kafka creates the file lazily)."""
        if self._segment is None:
            raise UsageError("end_segment before begin_segment")
        segment, self._segment = self._segment, None
        result = segment.finish()
        self._segment_done(segment, result.base_offset, segment.last_offset)
        return result

    def add_segment(self, facts: RecoveredSegment) -> list[AbortedTxn]:
        """A whole segment whose `.index` and `.timeindex` were built where it was written
        (RecoveredSegmentBuilder): replays its facts like begin_segment/add_batch/end_segment and
        returns the aborted transactions of its `.txnindex` (none: Kafka writes no file)."""
        self.begin_segment(facts.base_offset)
        segment, self._segment = self._segment, None
        segment.replay(facts)
        self._segment_done(segment, facts.base_offset, facts.last_offset)
        return segment.aborted

    def _segment_done(self, segment: _SegmentRecovery, base_offset: int, last_offset: int | None) -> None:
        # "take a snapshot to ensure that we won't need to reload the same segment again"
        segment.producers.take_snapshot(self._snapshots)
        self._bases.append(base_offset)
        self._last_segment_next_offset = base_offset if last_offset is None else last_offset + 1
        if last_offset is not None:
            self._next_offset = last_offset + 1

    def finish(self) -> PartitionCompanions:
        """After the last segment: the producer snapshots Kafka would have (offset -> bytes) and the
        leader-epoch-checkpoint text (None when no batch carries a leader epoch)."""
        if self._segment is not None:
            raise UsageError("finish before end_segment")
        self._finished = True
        # LogLoader.load after recoverLog: the log end offset is the last segment's next offset (a
        # log without segments gets an empty one at the log start offset).
        log_end_offset = self._last_segment_next_offset if self._bases else self.log_start_offset
        self._epochs.truncate_from_end(log_end_offset)
        self._epochs.truncate_from_start(self.log_start_offset)
        if not self._bases:
            return PartitionCompanions({}, list(self._epochs.entries), log_end_offset)
        log_start_offset = max(self.log_start_offset, self._bases[0])
        self._snapshots.remove_strays(self._bases)
        self._rebuild(self._new_producer_state(), log_end_offset, log_start_offset)
        snapshots = {offset: write_snapshot(entries, keep_order=True)
                     for offset, entries in sorted(self._snapshots.items())}
        return PartitionCompanions(snapshots, list(self._epochs.entries), log_end_offset)

    def _new_producer_state(self) -> ProducerStateManager:
        return ProducerStateManager(self.producer_expiration_ms)

    def _rebuild(self, producers: ProducerStateManager, last_offset: int, log_start_offset: int) -> None:
        """UnifiedLog.rebuildProducerState up to `last_offset` (message format 0.11+).

        Kafka then replays the batches between the reloaded snapshot and `last_offset`. In this walk
        there are none that carry a producer id: a snapshot is taken after every segment at the
        offset following its last v2 batch, so what lies beyond is v0/v1 data at most.
        """
        producers.truncate_and_reload(self._snapshots, log_start_offset, last_offset, self.now_ms)
        producers.map_end_offset = last_offset
        producers.take_snapshot(self._snapshots)


def control_facts(batch: Batch) -> tuple[ControlType | None, int, int | None]:
    """(record type, coordinator epoch, record timestamp) of a control batch's record; (None, -1,
    None) for a data batch or an empty control batch (the cleaner removed its transaction)."""
    if not batch.header.is_control or not len(batch):
        return None, -1, None
    key, value = batch.records.column(2)[0].as_py(), batch.records.column(3)[0].as_py()
    timestamp = batch.records.column(1)[0].as_py()
    try:
        kind = control_type(key)
        coordinator_epoch = (end_txn_marker(value)[1]
                             if kind in (ControlType.ABORT, ControlType.COMMIT) else -1)
    except DataError as err:
        raise err.located(offset=batch.header.base_offset)
    return kind, coordinator_epoch, timestamp


@dataclass
class Companions:
    segments: list[SegmentCompanions] = field(default_factory=list)
    partition: PartitionCompanions | None = None

    def files(self) -> dict[str, bytes]:
        out = {}
        for seg in self.segments:
            out.update(seg.files())
        if self.partition is not None:
            out.update(self.partition.files())
        return out


def existing_leader_epochs(part: PartitionDir) -> list[EpochEntry] | None:
    """The entries of a partition directory's leader-epoch-checkpoint, None if it has none."""
    info = part.file(LEADER_EPOCH_CHECKPOINT)
    if info is None:
        return None
    text = bytes(part.storage.read(info.path)).decode("utf-8", "replace")
    return read_leader_epochs(text, part.display(info))


def build_for_partition(reader, **options) -> Companions:
    """The companion files of an existing partition directory (a PartitionReader), decoding only its
    control batches. Options are CompanionBuilder's; `leader_epochs` defaults to the directory's own
    leader-epoch-checkpoint, as in a broker's recovery of the directory."""
    if "leader_epochs" not in options:
        options["leader_epochs"] = existing_leader_epochs(reader.part)
    builder = CompanionBuilder(**options)
    result = Companions()
    for seg in reader.part.segments:
        builder.begin_segment(seg.base_offset)
        for header in reader.frames(seg):
            try:
                if header.is_control:
                    builder.add_decoded_batch(reader.decode(seg, header))
                else:
                    builder.add_batch(header)
            except DataError as err:
                raise err.located(file=reader.part.display(seg.log), base_position=header.position,
                                  offset=header.last_offset)
        result.segments.append(builder.end_segment())
    result.partition = builder.finish()
    return result
