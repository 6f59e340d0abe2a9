"""Producer state as Kafka's log recovery rebuilds it, 3.x and 4.x alike (docs/format.md §7, §8).

A model of `ProducerStateManager`, `ProducerAppendInfo` and `ProducerStateEntry` (storage/.../log/)
for batches replayed from the log (origin REPLICATION: no sequence checks, an older producer epoch is
only logged), plus the snapshot-file bookkeeping recovery does with them (`truncateAndReload`,
`loadFromSnapshot`, `takeSnapshot`, `removeStraySnapshots`). The rules that shape the files:

* A data batch sets its producer's epoch (a new epoch forgets the previous batch metadata), last
  sequence, last offset, offset delta (last - base offset) and timestamp (the batch's max timestamp);
  a transactional batch opens a transaction at its base offset unless one is open; a non-transactional
  batch while a transaction is open is the `InvalidTxnStateException` that stops a broker from
  loading the partition (docs/format.md §8).
* A transaction marker (ABORT/COMMIT) closes the producer's open transaction whatever the marker's
  epoch (transaction version 2 writes it one above the data's; replay knows no version and only logs
  an epoch that went down: docs/format.md §7.1), sets the producer's epoch to the marker's, the
  coordinator epoch and the timestamp (the marker's: the coordinator's clock); a new epoch forgets
  the batch metadata.
  Only markers of transactions with data complete one: an aborted one becomes a `.txnindex` entry whose
  last stable offset is the first offset of the earliest other producer's open transaction (docs/format.md §7).
* Loading a snapshot drops every producer without an open transaction whose timestamp is at least
  `producer.id.expiration.ms` older than the wall clock: that is how "now" enters recovery.
* Snapshots list producers in the iteration order of the Java HashMap that holds them
  (`JavaHashMapOrder`), so the order is part of the bytes.
"""
from __future__ import annotations

from dataclasses import dataclass

from kfmt.defaults import DEFAULT_PRODUCER_EXPIRATION_MS
from kfmt.errors import DataError
from kfmt.format.control import ControlType
from kfmt.format.model import BatchHeader
from kfmt.partition.snapshots import ProducerEntry

NO_SEQUENCE = -1


class JavaHashMapOrder:
    """The iteration order of a `java.util.HashMap<Long, V>` that only grows (puts, no removals).

    Java iterates bucket by bucket; within a bucket, in insertion order (a resize splits each bucket
    into two, keeping the relative order). A key's bucket is `spread(Long.hashCode(key)) & (capacity
    - 1)`; the table starts at 16 buckets and doubles when the size exceeds 3/4 of the capacity, or
    when a bucket reaches 9 entries while the table is smaller than 64 (treeifyBin resizes instead).
    Not modelled: the order inside a bucket that holds 9 or more keys of a table of 64 or more buckets
    (Java turns it into a red-black tree); producer ids that collide that much are not seen in practice.
    """

    DEFAULT_CAPACITY = 16
    MIN_TREEIFY_CAPACITY = 64
    TREEIFY_THRESHOLD = 8

    def __init__(self):
        self.capacity = 0  # the table is allocated on the first put
        self._sequence: dict[int, int] = {}  # key -> insertion number
        self._bucket_sizes: dict[int, int] = {}
        self.exact = True  # False once Java would iterate a bucket in an order not modelled here

    @staticmethod
    def spread_hash(key: int) -> int:
        key &= 0xFFFFFFFFFFFFFFFF
        h = (key ^ (key >> 32)) & 0xFFFFFFFF  # Long.hashCode
        return h ^ (h >> 16)  # HashMap.hash

    def _bucket(self, key: int) -> int:
        return self.spread_hash(key) & (self.capacity - 1)

    def _resize(self) -> None:
        self.capacity *= 2
        self._bucket_sizes = {}
        for k in self._sequence:
            b = self._bucket(k)
            self._bucket_sizes[b] = self._bucket_sizes.get(b, 0) + 1

    def put(self, key: int) -> None:
        if key in self._sequence:
            return  # an update keeps the key where it is
        if self.capacity == 0:
            self.capacity = self.DEFAULT_CAPACITY
        bucket = self._bucket(key)
        already_in_bucket = self._bucket_sizes.get(bucket, 0)
        self._sequence[key] = len(self._sequence)
        self._bucket_sizes[bucket] = already_in_bucket + 1
        if already_in_bucket >= self.TREEIFY_THRESHOLD:
            if self.capacity < self.MIN_TREEIFY_CAPACITY:
                self._resize()
            else:
                self.exact = False  # Java made the bucket a tree: its order is not modelled
        if len(self._sequence) > self.capacity * 3 // 4:
            self._resize()

    def clear(self) -> None:
        """HashMap.clear empties the table but keeps its size."""
        self._sequence.clear()
        self._bucket_sizes.clear()
        self.exact = True

    def __contains__(self, key: int) -> bool:
        return key in self._sequence

    def __len__(self) -> int:
        return len(self._sequence)

    def ordered(self) -> list[int]:
        return sorted(self._sequence, key=lambda k: (self._bucket(k), self._sequence[k]))


@dataclass
class ProducerState:
    """ProducerStateEntry, reduced to what a snapshot records: the last batch's metadata (None when
    the producer has none: no data yet, or a new epoch forgot it)."""

    producer_id: int
    epoch: int = -1
    last_sequence: int = NO_SEQUENCE
    last_offset: int = -1  # -1: no batch metadata
    offset_delta: int = 0
    timestamp: int = -1
    coordinator_epoch: int = -1
    txn_first_offset: int | None = None

    def set_epoch(self, epoch: int) -> None:
        """maybeUpdateProducerEpoch: a new epoch forgets the batch metadata of the old one."""
        if epoch != self.epoch:
            self.epoch = epoch
            self.last_sequence, self.last_offset, self.offset_delta = NO_SEQUENCE, -1, 0

    def to_entry(self) -> ProducerEntry:
        return ProducerEntry(self.producer_id, self.epoch, self.last_sequence, self.last_offset,
                             self.offset_delta, self.timestamp, self.coordinator_epoch,
                             -1 if self.txn_first_offset is None else self.txn_first_offset)

    @classmethod
    def from_entry(cls, e: ProducerEntry) -> "ProducerState":
        # readSnapshot keeps the batch metadata only when lastOffset >= 0
        has_batch = e.last_offset >= 0
        return cls(e.producer_id, e.producer_epoch,
                   e.last_sequence if has_batch else NO_SEQUENCE,
                   e.last_offset if has_batch else -1, e.offset_delta if has_batch else 0,
                   e.timestamp, e.coordinator_epoch,
                   e.current_txn_first_offset if e.current_txn_first_offset >= 0 else None)


@dataclass(frozen=True)
class CompletedTxn:
    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset
    is_aborted: bool


class ProducerStateManager:
    """One ProducerStateManager instance: producers, open transactions, and the two offsets that
    decide when a snapshot is written (`map_end_offset`, `snapshot_offset` = Kafka's lastMapOffset
    and lastSnapOffset)."""

    def __init__(self, expiration_ms: int = DEFAULT_PRODUCER_EXPIRATION_MS):
        self.expiration_ms = expiration_ms
        self.producers: dict[int, ProducerState] = {}
        self._order = JavaHashMapOrder()
        self.ongoing: dict[int, int] = {}  # open transactions: first offset -> producer id
        self.map_end_offset = 0
        self.snapshot_offset = 0

    # --- the producer map ---
    def _put(self, state: ProducerState) -> None:
        self.producers[state.producer_id] = state
        self._order.put(state.producer_id)

    def is_expired(self, state: ProducerState, now_ms: int) -> bool:
        return state.txn_first_offset is None and now_ms - state.timestamp >= self.expiration_ms

    def entries(self) -> list[ProducerEntry]:
        """The producers in the order Java's HashMap iterates them (the snapshot's order)."""
        return [self.producers[pid].to_entry() for pid in self._order.ordered()]

    @property
    def is_empty(self) -> bool:
        return not self.producers

    # --- replaying one batch (LogSegment.updateProducerState) ---
    def append(self, header: BatchHeader, control: ControlType | None, coordinator_epoch: int,
               marker_timestamp: int) -> CompletedTxn | None:
        """Apply a v2 batch that carries a producer id; a completed transaction is returned (the
        caller indexes it if aborted, then calls complete_txn)."""
        pid = header.producer_id
        state = self.producers.get(pid)
        if state is None:
            state = ProducerState(pid)  # ProducerStateEntry.empty
            self._put(state)
        if header.is_control:
            return self._append_marker(state, header, control, coordinator_epoch, marker_timestamp)
        self._append_data(state, header)
        return None

    def _append_data(self, state: ProducerState, header: BatchHeader) -> None:
        if state.txn_first_offset is not None and not header.is_transactional:
            raise DataError(
                f"a non-transactional batch of producer {state.producer_id} while its transaction "
                f"begun at offset {state.txn_first_offset} is open (Kafka refuses to load this "
                f"partition: InvalidTxnStateException)", offset=header.base_offset)
        state.set_epoch(header.producer_epoch)
        state.last_sequence = header.last_sequence
        state.last_offset = header.last_offset
        state.offset_delta = header.last_offset - header.base_offset
        state.timestamp = header.max_timestamp
        if state.txn_first_offset is None and header.is_transactional:
            state.txn_first_offset = header.base_offset
            self.ongoing[header.base_offset] = state.producer_id

    def _append_marker(self, state: ProducerState, header: BatchHeader, control: ControlType | None,
                       coordinator_epoch: int, marker_timestamp: int) -> CompletedTxn | None:
        if control is None:
            # An empty control batch: the cleaner removed the whole transaction; nothing changes
            # (but the producer is now known, as ProducerStateManager.update adds it).
            return None
        if control not in (ControlType.ABORT, ControlType.COMMIT):
            raise DataError(f"control batch of producer {state.producer_id} holds a {control.name} "
                            f"record, not a transaction marker", offset=header.base_offset)
        completed = None
        if state.txn_first_offset is not None:
            completed = CompletedTxn(state.producer_id, state.txn_first_offset, header.base_offset,
                                     control == ControlType.ABORT)
        state.set_epoch(header.producer_epoch)
        state.coordinator_epoch = coordinator_epoch
        state.txn_first_offset = None
        state.timestamp = marker_timestamp
        return completed

    def last_stable_offset(self, completed: CompletedTxn) -> int:
        """The first offset of the earliest open transaction of another producer, else the offset
        after the marker (ProducerStateManager.lastStableOffset)."""
        for first_offset in sorted(self.ongoing):
            if self.ongoing[first_offset] != completed.producer_id:
                return first_offset
        return completed.last_offset + 1

    def complete_txn(self, completed: CompletedTxn) -> None:
        if self.ongoing.pop(completed.first_offset, None) is None:
            raise DataError(f"transaction of producer {completed.producer_id} at offset "
                            f"{completed.first_offset} completed but was never started",
                            offset=completed.last_offset)

    # --- snapshot files ---
    def load(self, entries: list[ProducerEntry], offset: int, now_ms: int) -> None:
        """loadFromSnapshot: the unexpired producers of a snapshot, in the file's order."""
        for entry in entries:
            state = ProducerState.from_entry(entry)
            if self.is_expired(state, now_ms):
                continue
            self._put(state)
            if state.txn_first_offset is not None:
                self.ongoing[state.txn_first_offset] = state.producer_id
        self.snapshot_offset = self.map_end_offset = offset

    def truncate_and_reload(self, files: "SnapshotFiles", log_start_offset: int, log_end_offset: int,
                            now_ms: int) -> None:
        files.remove_outside(log_start_offset, log_end_offset)
        if log_end_offset != self.map_end_offset:
            self.producers.clear()
            self._order.clear()
            self.ongoing.clear()
            latest = files.latest()
            if latest is None:
                self.snapshot_offset = self.map_end_offset = log_start_offset
            else:
                self.load(files[latest], latest, now_ms)
        else:  # onLogStartOffsetIncremented
            self.map_end_offset = max(self.map_end_offset, log_start_offset)
            latest = files.latest()
            self.snapshot_offset = log_start_offset if latest is None else latest

    def take_snapshot(self, files: "SnapshotFiles") -> None:
        """A snapshot at the map end offset, unless one was already taken there."""
        if self.map_end_offset > self.snapshot_offset:
            files[self.map_end_offset] = self.entries()
            self.snapshot_offset = self.map_end_offset


class SnapshotFiles(dict):
    """The `<offset>.snapshot` files of a partition directory during recovery: offset -> entries."""

    def latest(self) -> int | None:
        return max(self, default=None)

    def remove_outside(self, log_start_offset: int, log_end_offset: int) -> None:
        for offset in [o for o in self if o > log_end_offset or o <= log_start_offset]:
            del self[offset]

    def remove_strays(self, segment_bases: list[int]) -> None:
        """removeStraySnapshots: snapshots not at a segment base go, except the largest one when it
        lies beyond the last segment base (the one a clean shutdown writes at the log end)."""
        bases = set(segment_bases)
        strays = sorted(o for o in self if o not in bases)
        keep = None
        if strays and (not bases or strays[-1] >= max(bases)):
            keep = strays[-1]
        for offset in strays:
            if offset != keep:
                del self[offset]
