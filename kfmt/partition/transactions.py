"""read_committed: which batches a committed reader may see.

The rule, defined here once: a transactional data batch is settled by the next end-transaction marker
(control record ABORT or COMMIT, docs/format.md §4.6) its producer id writes after it, whatever the
marker's epoch (transaction version 2 bumps it at every transaction end, docs/format.md §7.1). The
batches of a producer from its first transactional batch after a marker up to the next marker form one
transaction; an ABORT marker makes it an *aborted transaction* (producer, first offset, marker
offset), the entry Kafka's `.txnindex` holds. A transaction with no marker yet is *open*: the *last
stable offset* is the first offset of the earliest open transaction, and a committed reader sees
nothing at or beyond it, whoever wrote it.

Kafka's consumer learns the aborted transactions from the broker's `.txnindex`; kfmt derives them from
the log itself (headers, plus the one record of each control batch), so stale or missing transaction
indexes cannot mislead it. `TransactionWalk` folds batches, in offset order, into
`TransactionOutcomes` (the aborted transactions and the last stable offset), which judges any batch.
Two ways to use it:
* `partition_outcomes(reader)`: walk the whole partition first (what export does, once per
  partition, before its segment tasks, which each get the picklable outcomes);
* `TransactionStatus`: walk lazily while reading, looking ahead only as far as each producer's next
  marker (what `kfmt cat` does).
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Iterator

from kfmt.errors import DataError
from kfmt.format.control import ControlType, control_type
from kfmt.format.model import BatchHeader

# Kafka's consumer setting isolation.level: what `--isolation`, kfmt.read and the data source take
ISOLATION_LEVELS = ("read_uncommitted", "read_committed")

ABORTED, COMMITTED, OPEN = "aborted", "committed", "open"


@dataclass(frozen=True, order=True)
class AbortedTransaction:
    producer_id: int
    first_offset: int
    last_offset: int  # the ABORT marker's offset


class TransactionOutcomes:
    """The aborted transactions and the last stable offset of a partition (or of the part of it read
    from some point on). Picklable."""

    def __init__(self, aborted=(), last_stable_offset: int | None = None):
        self._by_producer: dict[int, list[AbortedTransaction]] = {}
        self._firsts: dict[int, list[int]] = {}  # their first offsets, for bisection
        for txn in sorted(aborted):
            self.add_aborted(txn)
        self.last_stable_offset = last_stable_offset  # None: no open transaction

    @property
    def aborted(self) -> list[AbortedTransaction]:
        return sorted(t for txns in self._by_producer.values() for t in txns)

    def add_aborted(self, txn: AbortedTransaction) -> None:
        """Record an aborted transaction; a producer's come in offset order."""
        self._by_producer.setdefault(txn.producer_id, []).append(txn)
        self._firsts.setdefault(txn.producer_id, []).append(txn.first_offset)

    def status(self, header: BatchHeader) -> str:
        """OPEN for a batch at or beyond the last stable offset (a committed reader stops before
        it), ABORTED for a transactional data batch of an aborted transaction, else COMMITTED
        (non-transactional and control batches before the last stable offset included)."""
        lso = self.last_stable_offset
        if lso is not None and header.last_offset >= lso:
            return OPEN  # batches never straddle it: it is the base offset of a batch
        if not header.is_transactional or header.is_control:
            return COMMITTED
        pid = header.producer_id
        if pid in self._by_producer:
            # a producer's batches never overlap: the one transaction that can hold this batch is
            # the last one starting at or before it
            i = bisect.bisect_right(self._firsts[pid], header.last_offset) - 1
            if i >= 0 and self._by_producer[pid][i].last_offset > header.last_offset:
                return ABORTED
        return COMMITTED

    def __eq__(self, other) -> bool:
        return (isinstance(other, TransactionOutcomes) and self.aborted == other.aborted
                and self.last_stable_offset == other.last_stable_offset)

    def __repr__(self) -> str:
        return f"TransactionOutcomes(aborted={self.aborted}, last_stable_offset={self.last_stable_offset})"


class TransactionWalk:
    """Folds the transactional data batches and the control batches of a partition, given in offset
    order, into TransactionOutcomes (`outcomes`; its last stable offset is set by `finish()`)."""

    def __init__(self):
        self.outcomes = TransactionOutcomes()
        self._open: dict[int, int] = {}  # producer id -> first offset of its open transaction
        self._last_marker: dict[int, int] = {}  # producer id -> offset of its latest marker

    def add(self, header: BatchHeader, control: ControlType | None = None) -> None:
        """A batch; for a control batch, the type of its record (None for an empty one)."""
        pid = header.producer_id
        if header.is_control:
            if control in (ControlType.ABORT, ControlType.COMMIT):
                first = self._open.pop(pid, None)
                if control == ControlType.ABORT and first is not None:
                    self.outcomes.add_aborted(AbortedTransaction(pid, first, header.base_offset))
                self._last_marker[pid] = header.base_offset
        elif header.is_transactional:
            self._open.setdefault(pid, header.base_offset)

    def settles(self, header: BatchHeader) -> bool:
        """Whether the walk has passed the marker that settles this transactional batch."""
        return self._last_marker.get(header.producer_id, -1) > header.last_offset

    def finish(self) -> TransactionOutcomes:
        """After the last batch: what is still open decides the last stable offset."""
        self.outcomes.last_stable_offset = min(self._open.values(), default=None)
        return self.outcomes


class TransactionStatus:
    """Judges transactional data batches while they are read in offset order, walking ahead in
    `batches` (transaction_batches() from the same starting point) only as far as the marker that
    settles each. The first batch judged OPEN is where a committed reader stops. Other batches are
    judged on what the walk has seen so far (it never looks ahead for them)."""

    def __init__(self, batches: Iterator[tuple[BatchHeader, ControlType | None]]):
        self._ahead = iter(batches)
        self._walk = TransactionWalk()
        self._done = False

    def status(self, header: BatchHeader) -> str:
        judged = header.is_transactional and not header.is_control
        while judged and not self._done and not self._walk.settles(header):
            for batch in self._ahead:
                self._walk.add(*batch)
                break
            else:
                self._walk.finish()
                self._done = True
        return self._walk.outcomes.status(header)


def transaction_batches(reader, seg_index: int = 0, position: int = 0
                        ) -> Iterator[tuple[BatchHeader, ControlType | None]]:
    """(header, control type) of the transactional data batches (type None) and the control batches
    (the type of their record; None for one emptied by compaction, which marks nothing) of a
    partition, from a point on. Read from the frames alone; only control batches are decoded."""
    segs = reader.part.segments
    for i in range(seg_index, len(segs)):
        for header in reader.frames(segs[i], position if i == seg_index else 0):
            if not header.is_control:
                if header.is_transactional:
                    yield header, None
                continue
            batch = reader.decode(segs[i], header)
            if not len(batch):
                yield header, None
                continue
            try:
                kind = control_type(batch.records.column(2)[0].as_py())
            except DataError as err:
                raise err.located(file=reader.part.display(segs[i].log), base_position=header.position,
                                  offset=header.base_offset) from None
            yield header, kind


def partition_outcomes(reader) -> TransactionOutcomes:
    """The aborted transactions and the last stable offset of a whole partition."""
    walk = TransactionWalk()
    for header, control in transaction_batches(reader):
        walk.add(header, control)
    return walk.finish()
