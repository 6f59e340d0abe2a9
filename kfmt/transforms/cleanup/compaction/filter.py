"""Which batches and records a cleaning keeps (docs/format.md §4.7, §14; Kafka's `Cleaner.cleanInto` filter,
`Cleaner.shouldRetainRecord` and `MemoryRecords.filterTo`).

Per batch, before its records are looked at (`check_batch`):
* the transaction state (kfmt.transforms.cleanup.compaction.transactions) says whether the batch may be discarded:
  data of an aborted transaction, or a marker whose transaction has no data left; a marker is only
  discarded once its delete horizon has passed;
* the batch is kept even when emptied if it is the last batch of a producer that is still active
  (its sequence and epoch must survive), or the last batch of the cleaning round (the log end offset
  must survive); otherwise a discarded batch goes without being decoded, and any batch goes when it
  ends up with no record.
Per record (`decide`): records beyond the mapped range stay; a record with a key stays if it is the
latest for its key (its offset is at least the map's) and it has a value or is a tombstone whose
retention has not passed: a v2 batch's delete horizon (none yet, or still in the future), a v0/v1
segment's modification time (kfmt.transforms.cleanup.compaction.plan.legacy_delete_horizon); a record without a key goes.
Control records stay unless their batch is discarded.

What then happens to a batch that keeps records: it is copied byte for byte when it keeps all of them
and needs no new delete horizon; otherwise it is rebuilt (kfmt.transforms.cleanup.compaction.rewrite). A new horizon
(clean time + delete.retention.ms, Kafka 2.8+/3.1+ KIP-534) is stamped on a batch that keeps a
tombstone, or a marker whose transaction is gone, and has none yet. Kafka 4.0 rewrites every v0/v1
batch it reads as v2 (and stamps horizons on them like on v2 batches); with `keep_format` (Kafka 3.x)
legacy batches keep their magic, are only rebuilt when they lose records or mix magics (KAFKA-4298),
and never get a horizon.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from kfmt.format.control import ControlType
from kfmt.format.layout import MAGIC_V2
from kfmt.format.model import Batch, BatchHeader, int64_values
from kfmt.transforms.cleanup.compaction.facts import LastRecord
from kfmt.format.offset_map import OffsetMap, record_key_hashes
from kfmt.transforms.cleanup.compaction.transactions import CleanedTransactions


class BatchRetention(enum.Enum):
    DELETE = "delete"  # discard without looking at the records
    RETAIN_EMPTY = "retain empty"  # keep the batch header even if no record stays
    DELETE_EMPTY = "delete empty"  # keep the batch only if a record stays


@dataclass(frozen=True)
class BatchCheck:
    retention: BatchRetention
    discard_records: bool
    marker_for_empty_txn: bool


class Action(enum.Enum):
    DROP = "drop"
    COPY = "copy"  # the original bytes
    REWRITE = "rewrite"  # rebuilt with the retained records (and a delete horizon)
    EMPTY = "empty"  # a header without records


@dataclass(frozen=True)
class Decision:
    action: Action
    retained: np.ndarray | None = None  # the records that stay (REWRITE)
    delete_horizon: int | None = None  # to stamp on a REWRITE (None: none)
    note: str | None = None


@dataclass
class Removed:
    """Records removed, by reason."""

    superseded: int = 0  # a later record has the same key
    expired_tombstones: int = 0  # tombstones past their retention
    keyless: int = 0
    aborted: int = 0  # data of aborted transactions
    markers: int = 0  # transaction markers whose transaction is gone
    tombstones: int = 0  # of all the data records removed, those with a null value

    @property
    def records(self) -> int:
        return self.superseded + self.expired_tombstones + self.keyless + self.aborted + self.markers

    def to_json(self) -> dict:
        return {"records": self.records, "superseded": self.superseded,
                "expired_tombstones": self.expired_tombstones, "keyless": self.keyless,
                "aborted_transaction_records": self.aborted, "transaction_markers": self.markers,
                "tombstones": self.tombstones}


@dataclass
class CleanerFilter:
    offset_map: OffsetMap
    transactions: CleanedTransactions
    active_producers: dict[int, LastRecord]
    upper_bound_offset: int  # the first uncleanable offset: the round's last batch ends there
    now_ms: int
    delete_retention_ms: int
    convert_legacy: bool  # Kafka 4.0 (True) or 3.x (False)
    retain_legacy_deletes: bool = True  # per source segment: its mtime > the legacy delete horizon
    removed: Removed = field(default_factory=Removed)
    notes: list[str] = field(default_factory=list)

    def check_batch(self, header: BatchHeader, control: ControlType | None) -> BatchCheck:
        if header.is_control:
            may_discard = self.transactions.on_control_batch(header, control)
            discard = (may_discard and header.has_delete_horizon
                       and header.delete_horizon_ms <= self.now_ms)
        else:
            may_discard = discard = self.transactions.on_batch(header)
        if header.has_producer_id and self._is_last_of_active_producer(header):
            retention = BatchRetention.RETAIN_EMPTY
        elif header.next_offset == self.upper_bound_offset:
            retention = BatchRetention.RETAIN_EMPTY
        elif discard:
            retention = BatchRetention.DELETE
        else:
            retention = BatchRetention.DELETE_EMPTY
        return BatchCheck(retention, discard, may_discard and header.is_control)

    def _is_last_of_active_producer(self, header: BatchHeader) -> bool:
        last = self.active_producers.get(header.producer_id)
        if last is None:
            return False
        if last.last_data_offset is not None:
            return header.last_offset == last.last_data_offset
        return header.is_control and header.producer_epoch == last.producer_epoch

    def count_deleted(self, header: BatchHeader) -> None:
        """A batch dropped on its header alone (BatchRetention.DELETE)."""
        count = header.records_count or 0
        if header.is_control:
            self.removed.markers += count
        else:
            self.removed.aborted += count

    def decide(self, batch: Batch, check: BatchCheck) -> Decision:
        header, records = batch.header, batch.records
        n = len(records)
        legacy = header.magic < MAGIC_V2
        has_value = is_present(records.column(3))
        if check.discard_records:
            retained = np.zeros(n, dtype=bool)
            if header.is_control:
                self.removed.markers += n
            else:
                self.removed.aborted += n
                self.removed.tombstones += int((~has_value).sum())
        elif header.is_control:
            retained = np.ones(n, dtype=bool)
        else:
            retained = self._retained_records(header, records, has_value)
        kept = int(retained.sum())
        if kept:
            tombstones = bool((retained & ~has_value).any()) and not header.is_control
            need_horizon = ((tombstones or check.marker_for_empty_txn) and not header.has_delete_horizon
                            and (self.convert_legacy or not legacy))
            unchanged = kept == n and (not legacy or not self.convert_legacy and
                                       not _mixed_magic(batch, retained))
            if unchanged and not need_horizon:
                return Decision(Action.COPY)
            horizon = (self.now_ms + self.delete_retention_ms if need_horizon
                       else header.delete_horizon_ms)
            return Decision(Action.REWRITE, retained, horizon)
        if check.retention == BatchRetention.RETAIN_EMPTY:
            if legacy:
                note = (f"batch {header.base_offset}..{header.last_offset}: every record was removed from "
                        f"the last v{header.magic} batch of the cleaning; Kafka's cleaner cannot keep an "
                        f"empty v0/v1 batch and fails this cleaning (IllegalStateException); kfmt drops "
                        f"the batch")
                self.notes.append(note)
                return Decision(Action.DROP, note=note)
            return Decision(Action.EMPTY)
        return Decision(Action.DROP)

    def _retained_records(self, header: BatchHeader, records: pa.RecordBatch,
                          has_value: np.ndarray) -> np.ndarray:
        offsets = int64_values(records.column(0))
        keys = records.column(2)
        has_key = is_present(keys)
        retained = offsets > self.offset_map.latest_offset
        candidates = np.flatnonzero(has_key & ~retained)
        keyless = int((~has_key & ~retained).sum())
        self.removed.keyless += keyless
        self.removed.tombstones += int((~has_key & ~retained & ~has_value).sum())
        if not candidates.size:
            return retained
        found = self.offset_map.get(record_key_hashes(records, candidates))
        latest = offsets[candidates] >= found
        if header.magic >= MAGIC_V2:
            retain_deletes = not header.has_delete_horizon or self.now_ms < header.delete_horizon_ms
        else:
            retain_deletes = self.retain_legacy_deletes
        valued = has_value[candidates]
        keep = latest & (valued | retain_deletes)
        retained[candidates] = keep
        self.removed.superseded += int((~latest).sum())
        self.removed.expired_tombstones += int((latest & ~valued & ~keep).sum())
        self.removed.tombstones += int((~keep & ~valued).sum())
        return retained


def is_present(column: pa.Array) -> np.ndarray:
    if column.null_count == 0:  # most batches: no null key or value, no compute call
        return np.ones(len(column), dtype=bool)
    # the validity bitmap as numpy (LSB first, from the array's offset): pyarrow's to_numpy of
    # is_valid() would import pandas, 0.3 CPU s of the run
    bits = np.frombuffer(column.buffers()[0], dtype=np.uint8)
    return np.unpackbits(bits, bitorder="little", count=column.offset + len(column))[column.offset:].astype(bool)


def _mixed_magic(batch: Batch, retained: np.ndarray) -> bool:
    """KAFKA-4298: a retained inner message whose magic differs from its wrapper's makes Kafka 3.x
    rewrite the wrapper."""
    if not batch.legacy:
        return False
    return any(info.magic != batch.header.magic for info, keep in zip(batch.legacy, retained) if keep)
