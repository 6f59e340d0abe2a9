"""Transactions during a cleaning: which batches belong to aborted transactions, and when a marker may
go (docs/format.md §14; Kafka's `CleanedTransactionMetadata`).

The cleaner walks the log in offset order with the partition's aborted transactions (what its
`.txnindex` files list: producer id, first offset, marker offset) in a heap by first offset:
* a transaction becomes *ongoing aborted* when the walk reaches its first offset; the producer's
  transactional batches from then on are aborted data: never mapped, removed from the log;
* a producer's transactional batch outside an aborted transaction makes its transaction *ongoing
  committed*;
* an ABORT marker may go once none of its transaction's batches is left (the walk met none); a COMMIT
  marker once the walk met none of its batches; any other control record stays; an empty control
  batch (a marker already emptied by an earlier cleaning) may go.

"May go" is not "goes": the cleaner keeps such a marker until its delete horizon has passed
(kfmt.transforms.cleanup.compaction.filter), as it keeps tombstones.
"""
from __future__ import annotations

import heapq

from kfmt.format.control import ControlType
from kfmt.format.model import BatchHeader
from kfmt.partition.transactions import AbortedTransaction


class CleanedTransactions:
    def __init__(self, aborted: list[AbortedTransaction] = ()):
        # by first offset (then producer id), the order in which a cleaning meets them
        self._pending = [(t.first_offset, t.producer_id, t) for t in aborted]
        heapq.heapify(self._pending)
        self._ongoing_aborted: dict[int, bool] = {}  # producer id -> a batch of it was seen
        self._ongoing_committed: set[int] = set()

    def on_batch(self, header: BatchHeader) -> bool:
        """A data batch was read: True if it belongs to an aborted transaction (discard it)."""
        self._start_aborted_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        if header.producer_id in self._ongoing_aborted:
            self._ongoing_aborted[header.producer_id] = True
            return True
        self._ongoing_committed.add(header.producer_id)
        return False

    def on_control_batch(self, header: BatchHeader, control: ControlType | None) -> bool:
        """A control batch was read (`control`: its record's type, None if it has no record):
        True if the marker's transaction has no batch left, so the marker may go."""
        self._start_aborted_up_to(header.last_offset)
        if control is None:
            return True  # emptied by an earlier cleaning
        pid = header.producer_id
        if control == ControlType.ABORT:
            saw_data = self._ongoing_aborted.pop(pid, None)
            return not saw_data
        if control == ControlType.COMMIT:
            if pid in self._ongoing_committed:
                self._ongoing_committed.discard(pid)
                return False
            return True
        return False

    def _start_aborted_up_to(self, offset: int) -> None:
        while self._pending and self._pending[0][0] <= offset:
            txn = heapq.heappop(self._pending)[2]
            self._ongoing_aborted.setdefault(txn.producer_id, False)
