"""One segment's part of log recovery (Kafka's `LogSegment.recover`, docs/format.md §6.3): its `.index`
and `.timeindex` entries (SegmentIndexer), and what it hands on to the partition-level files
(RecoveredSegment, built where the segment is written: RecoveredSegmentBuilder). The partition-level
part -- producer state, `.txnindex`, snapshots, leader epochs across segments -- is
kfmt.partition.companions.

Array-at-a-time: `add_frames` takes rows of frames (kfmt.format.frames) of data batches; the index
walk (kfmt.format.index_walk) runs over many rows at once and only v2 rows with a producer id or a new
leader epoch are looked at one by one. Same results as `add` per row, which remains the definition
(and handles every row the kernel refuses)."""
from __future__ import annotations

import gc
from dataclasses import dataclass

import numpy as np

from kfmt.defaults import DEFAULT_INDEX_INTERVAL_BYTES
from kfmt.errors import DataError, UsageError
from kfmt.format.control import ControlType
from kfmt.format.frames import header_of
from kfmt.format.index_walk import IndexWalk, walk_frames
from kfmt.format.layout import ATTR_CONTROL, ATTR_TRANSACTIONAL, MAGIC_V2
from kfmt.format.model import INT32_MAX, NO_PRODUCER_ID, NO_TIMESTAMP, BatchHeader
from kfmt.format.wire import NATIVE_INT64_PAIR
from kfmt.partition import indexes, txnindex
from kfmt.partition.indexes import OffsetEntry, TimeEntry
from kfmt.partition.layout import segment_file_name
from kfmt.partition.txnindex import AbortedTxn


@dataclass
class SegmentCompanions:
    """The index files of one segment. The entries are kept as pairs of native int64 (offset and
    position; timestamp and offset), as the index walk makes them: a segment of small batches has
    hundreds of thousands, too many to hold one object each."""

    base_offset: int
    offset_pairs: bytes
    time_pairs: bytes
    aborted: list[AbortedTxn]
    next_offset: int  # the offset after the segment's last batch; its base offset if it has none
    batches: int

    @property
    def offset_entries(self) -> list[OffsetEntry]:
        return _entries(OffsetEntry, self.offset_pairs)

    @property
    def time_entries(self) -> list[TimeEntry]:
        return _entries(TimeEntry, self.time_pairs)

    @property
    def index(self) -> bytes:
        pairs = _pairs(self.offset_pairs)
        relative = pairs[:, 0] - self.base_offset
        if not _fit_int32(relative, pairs[:, 1]):
            return indexes.write_offset_index(self.offset_entries, self.base_offset)  # (refuses them)
        out = np.empty(len(pairs), dtype=indexes.OFFSET_ROW)
        out["relative_offset"], out["position"] = relative, pairs[:, 1]
        return out.tobytes()

    @property
    def timeindex(self) -> bytes:
        pairs = _pairs(self.time_pairs)
        relative = pairs[:, 1] - self.base_offset
        if not _fit_int32(relative):
            return indexes.write_time_index(self.time_entries, self.base_offset)  # (refuses them)
        out = np.empty(len(pairs), dtype=indexes.TIME_ROW)
        out["timestamp"], out["relative_offset"] = pairs[:, 0], relative
        return out.tobytes()

    @property
    def txnindex(self) -> bytes | None:
        """None when the segment has no aborted transaction: Kafka creates the file lazily (docs/format.md §7)."""
        return txnindex.write_txn_index(self.aborted) if self.aborted else None

    def files(self) -> dict[str, bytes]:
        out = {segment_file_name(self.base_offset, "index"): self.index,
               segment_file_name(self.base_offset, "timeindex"): self.timeindex}
        if self.aborted:
            out[segment_file_name(self.base_offset, "txnindex")] = self.txnindex
        return out


class SegmentIndexer:
    """The segment-local half of LogSegment.recover (docs/format.md §6.3): the `.index` and `.timeindex` entries of
    one segment from its batches' headers, in file order, by the index walk of kfmt.format.index_walk.
    It needs nothing from other segments, so a parallel writer runs it in the task that writes the
    segment (RecoveredSegmentBuilder)."""

    def __init__(self, base_offset: int, index_interval_bytes: int):
        self.walk = IndexWalk(base_offset, index_interval_bytes)
        self.offset_pairs = bytearray()  # (offset, position) as native int64 pairs
        self.time_pairs = bytearray()  # (timestamp, offset)
        self.batches = 0

    @property
    def base_offset(self) -> int:
        return self.walk.base_offset

    @property
    def last_offset(self) -> int | None:
        return self.walk.last_offset

    @property
    def offset_entries(self) -> list[OffsetEntry]:
        return _entries(OffsetEntry, self.offset_pairs)

    @property
    def time_entries(self) -> list[TimeEntry]:
        return _entries(TimeEntry, self.time_pairs)

    def add(self, header: BatchHeader) -> None:
        self._check(header)
        offset_entry, time_entry = self.walk.add(header.last_offset, header.max_timestamp, header.size)
        if offset_entry is not None:
            self.offset_pairs += _PAIR.pack(*offset_entry)
        if time_entry is not None:
            self.time_pairs += _PAIR.pack(*time_entry)
        self.batches += 1

    def add_frames(self, rows: np.ndarray) -> None:
        """add() for rows of frames, in file order: the walk over many rows at once
        (kfmt.format.index_walk.walk_frames); a row it refuses goes through add(), which raises."""
        start = 0
        while start < len(rows):
            stop, offsets, times = walk_frames(self.walk, rows, start)
            self.offset_pairs += offsets
            self.time_pairs += times
            self.batches += stop - start
            if stop < len(rows):
                self.add(header_of(rows[stop].item()))
                stop += 1
            start = stop

    def _check(self, header: BatchHeader) -> None:
        if header.position is None or header.size is None:
            raise UsageError("CompanionBuilder.add_batch needs the batch's position and size")
        if header.position != self.walk.position:
            raise UsageError(f"batch at position {header.position} given where the segment's next "
                             f"batch starts ({self.walk.position}): batches must come in file order")
        relative = header.last_offset - self.base_offset
        if not 0 <= relative <= INT32_MAX:
            raise DataError(f"last offset {header.last_offset} does not fit the index of the segment "
                            f"with base offset {self.base_offset} (relative offset {relative})",
                            offset=header.last_offset)
        if self.last_offset is not None and header.last_offset <= self.last_offset:
            raise DataError(f"last offset {header.last_offset} does not follow the previous batch's "
                            f"{self.last_offset}: offsets must increase", offset=header.last_offset)

    @property
    def next_offset(self) -> int:
        """The offset after the segment's last batch; its base offset if it has none."""
        return self.base_offset if self.last_offset is None else self.last_offset + 1

    def finish(self, aborted: list[AbortedTxn] | None = None) -> SegmentCompanions:
        # "A normally closed segment always appends the biggest timestamp ever seen"
        time_entry = self.walk.close()
        if time_entry is not None:
            self.time_pairs += _PAIR.pack(*time_entry)
        return SegmentCompanions(self.base_offset, bytes(self.offset_pairs), bytes(self.time_pairs),
                                 aborted or [], self.next_offset, self.batches)


@dataclass(frozen=True)
class ProducerBatch:
    """A v2 batch as producer-state replay sees it (a control batch with its marker's facts)."""

    header: BatchHeader
    control: ControlType | None = None
    coordinator_epoch: int = -1
    marker_timestamp: int = NO_TIMESTAMP


@dataclass
class RecoveredSegment:
    """What one segment hands on to the partition-level files (docs/format.md §7, §8, §9) and to the segments after
    it -- the part of recovery a parallel writer cannot do in the segment's own task. Small: a few
    numbers, the leader-epoch changes, and the producer batches reduced as RecoveredSegmentBuilder
    explains (never one entry per batch of the segment)."""

    base_offset: int
    batches: int
    last_offset: int | None  # of the last batch; None for an empty segment
    v2_next_offset: int | None  # after the last v2 batch: where recovery's snapshot of the segment goes
    leader_epochs: list[tuple[int, int]]  # (epoch, base offset) where the segment's running maximum rises
    producer_batches: list[ProducerBatch]

    @property
    def next_offset(self) -> int:
        return self.base_offset if self.last_offset is None else self.last_offset + 1


class RecoveredSegmentBuilder:
    """Built where a segment is written (a Spark task): its `.index` and `.timeindex` (SegmentIndexer)
    and its RecoveredSegment for CompanionBuilder.add_segment on the driver.

    The producer batches are reduced without changing what recovery makes of them. Per producer,
    between its control batches, consecutive data batches with the same transactional flag form a run;
    only a run's first batch and its last one are kept, in log order (the last one takes the place of
    the run's second). Why that is exact (ProducerStateManager, kfmt.partition.producer_state):
    * a data batch overwrites its producer's epoch, last sequence, last offset, offset delta and
      timestamp, so within a run only the last batch decides them;
    * a run's first batch is where the producer first appears (the snapshot's HashMap order), where a
      transactional run opens a transaction (the first offset the `.txnindex` and other producers'
      last stable offsets name), and where a non-transactional batch meets an open transaction (the
      error Kafka's loader raises) -- all in their original place;
    * other producers only see a producer through its open transaction, which only a run's first
      batch and a control batch change, so moving a run's later batches earlier, never past the
      producer's next kept batch, changes nothing they see.
    Leader epochs: only batches that raise the segment's running maximum epoch can raise the cache's
    latest one (which is at least every epoch seen before), so only they are kept.
    """

    def __init__(self, base_offset: int, index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES):
        self.indexer = SegmentIndexer(base_offset, index_interval_bytes)
        self._epochs: list[tuple[int, int]] = []
        self._producer_batches: list[ProducerBatch] = []
        self._runs: dict[int, list] = {}  # producer id -> [transactional, slot of the run's last batch]
        self._v2_next_offset: int | None = None

    def add(self, header: BatchHeader, control: ControlType | None = None, coordinator_epoch: int = -1,
            marker_timestamp: int | None = None) -> None:
        self.indexer.add(header)
        if header.magic < MAGIC_V2:
            return
        self._v2_next_offset = header.last_offset + 1
        epoch = header.partition_leader_epoch
        if epoch >= 0 and (not self._epochs or epoch > self._epochs[-1][0]):
            self._epochs.append((epoch, header.base_offset))
        if header.has_producer_id:
            self._add_producer_batch(header, control, coordinator_epoch, marker_timestamp)

    def _add_producer_batch(self, header: BatchHeader, control: ControlType | None,
                            coordinator_epoch: int, marker_timestamp: int | None) -> None:
        batch = ProducerBatch(header, control, coordinator_epoch,
                              header.max_timestamp if marker_timestamp is None else marker_timestamp)
        pid, kept = header.producer_id, self._producer_batches
        run = self._runs.get(pid)
        if header.is_control:
            self._runs.pop(pid, None)
            kept.append(batch)
        elif run is None or run[0] != header.is_transactional:
            self._runs[pid] = [header.is_transactional, None]
            kept.append(batch)
        elif run[1] is None:
            run[1] = len(kept)
            kept.append(batch)
        else:
            kept[run[1]] = batch

    def add_frames(self, rows: np.ndarray) -> None:
        """add() for rows of data batches (no control batch), many at a time."""
        check_no_control(rows)
        self.indexer.add_frames(rows)
        v2 = v2_rows(rows)
        if not len(v2):
            return
        self._v2_next_offset = int(v2["last_offset"][-1]) + 1
        self._epochs += rising_epochs(v2, self._epochs[-1][0] if self._epochs else -1)
        for row in producer_rows(v2).tolist():
            self._add_producer_batch(header_of(row), None, -1, None)

    def finish(self) -> tuple[SegmentCompanions, RecoveredSegment]:
        """The segment's index files (no `.txnindex`: which transactions abort is known only on the
        driver) and its facts."""
        indexer = self.indexer
        facts = RecoveredSegment(indexer.base_offset, indexer.batches, indexer.last_offset,
                             self._v2_next_offset, self._epochs, self._producer_batches)
        return indexer.finish(), facts


_PAIR = NATIVE_INT64_PAIR  # an index entry as the index walk makes it


def _pairs(data) -> np.ndarray:
    return np.frombuffer(data, np.int64).reshape(-1, 2)


def _fit_int32(*columns: np.ndarray) -> bool:
    return all(not len(c) or (c.min() >= -(1 << 31) and c.max() <= INT32_MAX) for c in columns)


def _entries(kind, data: bytes) -> list:
    """Index entries, kind(a, b) for each int64 pair. Thousands of small objects at once: made with
    the cyclic GC paused (they hold no cycles; otherwise each burst of allocations has it rescan
    every live object, tripling the cost)."""
    pairs = _pairs(data)
    paused = gc.isenabled()
    gc.disable()
    try:
        return list(map(kind, pairs[:, 0].tolist(), pairs[:, 1].tolist()))
    finally:
        if paused:
            gc.enable()


def v2_rows(rows: np.ndarray) -> np.ndarray:
    v2 = rows["magic"] >= MAGIC_V2
    return rows if v2.all() else rows[v2]


def producer_rows(v2_rows: np.ndarray) -> np.ndarray:
    """The rows of data batches (no control batch) with a producer id that producer-state replay
    must see, in log order: per producer, the first, second and last batch of each run of
    consecutive batches with one transactional flag. A run's batches after its first only overwrite
    what the one before wrote (RecoveredSegmentBuilder says why), so the state after the last is the
    same without those in between; keeping the second keeps RecoveredSegmentBuilder's list of kept
    batches the same too (the second's slot, which the last then takes). Tiny batches from a few
    idempotent producers: thousands of rows, a handful kept."""
    rows = v2_rows[v2_rows["producer_id"] > NO_PRODUCER_ID]
    if len(rows) <= 3:
        return rows
    order = np.argsort(rows["producer_id"], kind="stable")  # each producer's rows, in log order
    pid, txn = rows["producer_id"][order], (rows["attributes"][order] & ATTR_TRANSACTIONAL) != 0
    first = np.ones(len(rows), bool)
    first[1:] = (pid[1:] != pid[:-1]) | (txn[1:] != txn[:-1])
    keep = first.copy()
    keep[1:] |= first[:-1]  # the second
    keep[:-1] |= first[1:]  # the last
    keep[-1] = True
    kept = np.zeros(len(rows), bool)
    kept[order[keep]] = True
    return rows[kept]


def rising_epochs(v2_rows: np.ndarray, latest: int) -> list[tuple[int, int]]:
    """(epoch, base offset) of the rows where the running maximum leader epoch, starting from
    `latest`, rises: the only rows that can add a leader-epoch entry (docs/format.md §9)."""
    epochs = v2_rows["partition_leader_epoch"].astype(np.int64)
    before = np.maximum.accumulate(np.concatenate(([latest], epochs)))[:-1]
    rising = np.flatnonzero((epochs >= 0) & (epochs > before))
    return [(int(epochs[i]), int(v2_rows["base_offset"][i])) for i in rising]


def check_no_control(rows: np.ndarray) -> None:
    if ((rows["magic"] >= MAGIC_V2) & (rows["attributes"] & ATTR_CONTROL != 0)).any():
        raise UsageError("control batches are added with their marker's facts (add_batch / "
                         "add_decoded_batch), not as frames")
