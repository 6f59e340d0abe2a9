"""Checks of the transaction indexes (`.txnindex`) and of the transactional state of the log
(docs/format.md §7, §8).

A `.txnindex` entry (producer, first offset, last offset, last stable offset) tells read_committed
fetches which records to drop: the records of that producer from the first offset up to its ABORT
marker at the last offset. From Kafka's sources (TransactionIndex.java, ProducerAppendInfo.java,
LogSegment.updateTxnIndex, LogCleaner's CleanedTransactionMetadata):
* entries are 34 bytes, version 0 (a higher version fails the read), and their last offsets strictly
  increase (`append` throws otherwise); an entry's last offset is not below the segment's base offset
  (`sanityCheck`, run at every startup: a failure makes the broker rebuild the segment);
* the last offset is the offset of that producer's ABORT marker, the first offset is at or before it,
  and the last stable offset is at most the marker's offset + 1 (the LSO when the abort completed:
  the first offset of another open transaction, or the marker's offset + 1). `collectAbortedTxns`
  stops at the first entry whose LSO reaches the fetch's upper bound, so a too-large LSO hides later
  aborted transactions;
* every ABORT that ends a transaction with data gets an entry, in the segment of the marker; the log
  cleaner also writes entries into cleaned segments where the transaction's data lies, and keeps them
  after it removed the marker (then no batch holds the named offset);
* replaying the log (producer-state rebuild on load) fails with InvalidTxnStateException when a
  producer with an open transaction writes a non-transactional batch (docs/format.md §8);
* a producer id's epoch never goes down along the log: a leader refuses a batch or marker below the
  epoch it holds (InvalidProducerEpochException, under transaction version 1 and 2 alike), while
  replay only logs it and takes the lower epoch. Markers one epoch above their data (version 2), a
  duplicate marker of the same epoch (a version 2 retry) and any epoch after a fencing are the rule,
  not problems (docs/format.md §7.1).
"""
from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass

from kfmt.format.control import ControlType
from kfmt.format.layout import ATTR_TRANSACTIONAL, MAGIC_V2
from kfmt.format.model import NO_PRODUCER_ID
from kfmt.partition.layout import PartitionDir
from kfmt.partition.txnindex import ENTRY, AbortedTxn, read_txn_index

from .segment_columns import BatchFacts
from .problems import VerifyReport

ENTRY_SIZE = ENTRY.size  # 34


@dataclass
class IndexedTxn:
    txn: AbortedTxn
    file: str
    position: int
    segment_base: int
    resolved: bool = False


@dataclass
class CompletedAbort:
    producer_id: int
    first_offset: int  # the first batch of the transaction the log still holds
    marker_offset: int
    file: str
    position: int


class TxnChecker:
    """Reads every `.txnindex` of the partition up front (they are small), then follows the log's
    batches in order: each entry is resolved against the batch holding its marker offset, and the
    aborted transactions the log itself shows are matched against the entries at the end."""

    def __init__(self, part: PartitionDir, report: VerifyReport):
        self.report = report
        self.entries: list[IndexedTxn] = []
        self.by_marker: dict[int, list[IndexedTxn]] = {}
        self.open: dict[int, int] = {}  # producer id -> first offset of its open transaction
        self.last_marker: dict[int, int] = {}  # producer id -> offset of its latest ABORT/COMMIT marker
        self.epochs: dict[int, tuple[int, int]] = {}  # producer id -> (highest epoch, at which offset)
        self.aborts: list[CompletedAbort] = []
        for seg in part.segments:
            if seg.txnindex is not None:
                self._load(part, seg)
        self._pending = sorted(self.by_marker)
        self._next = 0

    def _load(self, part: PartitionDir, seg) -> None:
        report = self.report
        file = part.display(seg.txnindex)
        data = part.storage.read(seg.txnindex.path)
        report.counts.files += 1
        whole = len(data) // ENTRY_SIZE * ENTRY_SIZE
        if whole != len(data):
            report.error("txn-index-format", f"{len(data) - whole} trailing bytes do not make a "
                         f"{ENTRY_SIZE}-byte entry (Kafka ignores them; expected whole entries)", file, whole)
        previous = None
        for slot, txn in enumerate(read_txn_index(data)):
            position = slot * ENTRY_SIZE
            where = (file, position, txn.last_offset)
            if txn.version != 0:
                report.error("txn-index-format", f"entry version {txn.version}, expected 0 (Kafka fails "
                             f"reading an index with a higher version)", *where)
            if txn.producer_id < 0:
                report.error("txn-index-entry", f"entry names producer {txn.producer_id}, expected a "
                             f"producer id >= 0", *where)
            if previous is not None and txn.last_offset <= previous.last_offset:
                report.error("txn-index-order", f"entry with marker offset {txn.last_offset} follows one "
                             f"with {previous.last_offset}: expected strictly increasing last offsets",
                             *where)
            previous = txn
            if txn.last_offset < seg.base_offset:
                report.error("txn-index-entry", f"marker offset {txn.last_offset} is below the segment base "
                             f"{seg.base_offset} (TransactionIndex.sanityCheck fails and the broker "
                             f"rebuilds the segment)", *where)
            if txn.first_offset > txn.last_offset:
                report.error("txn-index-entry", f"first offset {txn.first_offset} is above the ABORT "
                             f"marker's offset {txn.last_offset} (expected first offset <= marker offset)",
                             *where)
            if txn.last_stable_offset > txn.last_offset + 1:
                report.error("txn-index-entry", f"last stable offset {txn.last_stable_offset} is above the "
                             f"marker's offset + 1 ({txn.last_offset + 1}): read_committed fetches would "
                             f"stop collecting aborted transactions too early", *where)
            indexed = IndexedTxn(txn, file, position, seg.base_offset)
            self.entries.append(indexed)
            self.by_marker.setdefault(txn.last_offset, []).append(indexed)

    # --- following the log ---
    def on_batch(self, facts: BatchFacts, file: str, report: VerifyReport) -> None:
        self._resolve(facts)
        if facts.magic < MAGIC_V2 or facts.producer_id <= NO_PRODUCER_ID:  # no producer id (hasProducerId)
            return
        pid = facts.producer_id
        self._check_epoch(facts, file, report)
        if not facts.is_control:
            if facts.is_transactional:
                self.open.setdefault(pid, facts.base_offset)
            elif pid in self.open:
                report.error("txn-state", f"non-transactional batch of producer {pid} while its transaction "
                             f"from offset {self.open[pid]} is open: Kafka's producer-state rebuild fails "
                             f"here (InvalidTxnStateException) and the partition does not load", file,
                             facts.position, facts.base_offset)
            return
        if facts.control in (ControlType.ABORT, ControlType.COMMIT):
            # An empty control batch (compaction removed its transaction) settles nothing (docs/format.md §4.7).
            self.last_marker[pid] = facts.base_offset
            first = self.open.pop(pid, None)
            if first is not None and facts.control == ControlType.ABORT:
                self.aborts.append(CompletedAbort(pid, first, facts.base_offset, file, facts.position))

    def _check_epoch(self, facts: BatchFacts, file: str, report: VerifyReport) -> None:
        """Transactional batches and markers (the batches shown here) keep their producer id's epoch
        from going down (ProducerAppendInfo.checkProducerEpoch, docs/format.md §7.1)."""
        pid, epoch = facts.producer_id, facts.producer_epoch
        highest = self.epochs.get(pid)
        if highest is None or epoch > highest[0]:
            self.epochs[pid] = (epoch, facts.base_offset)
        elif epoch < highest[0] and (facts.is_transactional or facts.is_control):
            report.note("txn-epoch", f"{facts.describe()} carries producer epoch {epoch}, below the epoch "
                        f"{highest[0]} the producer reached at offset {highest[1]}: a leader refuses such a "
                        f"batch (InvalidProducerEpochException); replay only logs it and takes the lower "
                        f"epoch", file, facts.position, facts.base_offset)

    def wants(self, rows):
        """Which rows of frames (kfmt.format.frames) on_batch has anything to do for: v2 batches of a
        producer that is or may become transactional, and batches holding an indexed marker offset
        (kfmt.inspect.verify.log_runs skips the rest: for them on_batch changes nothing)."""
        import numpy as np

        pending = np.asarray(self._pending[self._next:], dtype=np.int64)
        holds = (np.searchsorted(pending, rows["last_offset"], side="right")
                 > np.searchsorted(pending, rows["base_offset"], side="left"))
        producer = (rows["magic"] >= MAGIC_V2) & (rows["producer_id"] > NO_PRODUCER_ID)
        transactional = producer & ((rows["attributes"] & ATTR_TRANSACTIONAL) != 0)
        # a data batch outside a transaction matters only while its producer has one open: one
        # opened before these rows, or by one of them (data rows close none)
        opening = np.union1d(np.fromiter(self.open, np.int64, len(self.open)),
                             rows["producer_id"][transactional])
        return holds | transactional | (producer & np.isin(rows["producer_id"], opening))

    def _resolve(self, facts: BatchFacts) -> None:
        """Check the entries whose marker offset lies in this batch's offsets."""
        pending = self._pending
        start = bisect_left(pending, facts.base_offset, self._next)
        end = bisect_left(pending, facts.last_offset + 1, start)
        for marker in pending[start:end]:
            for indexed in self.by_marker[marker]:
                indexed.resolved = True
                txn = indexed.txn
                is_marker = (facts.is_control and facts.control == ControlType.ABORT
                             and facts.producer_id == txn.producer_id and facts.base_offset == marker)
                if not is_marker:
                    self.report.error("txn-index-entry", f"entry names offset {marker} as producer "
                                      f"{txn.producer_id}'s ABORT marker, but offset {marker} is in "
                                      f"{facts.describe()} (expected that producer's ABORT marker)",
                                      indexed.file, indexed.position, marker)
                    continue
                self._check_against_log(indexed, marker)
        self._next = end

    def _check_against_log(self, indexed: IndexedTxn, marker: int) -> None:
        """What the log before the marker says about the entry (called before the marker updates the
        transactional state): the transaction begins after the producer's previous marker, and the last
        stable offset is at most the first offset of the other transactions open at the marker (the log
        may have lost some of those to compaction or retention, never gained any)."""
        txn, where = indexed.txn, (indexed.file, indexed.position, marker)
        previous = self.last_marker.get(txn.producer_id)
        if previous is not None and txn.first_offset <= previous:
            self.report.error("txn-index-entry", f"entry says producer {txn.producer_id}'s aborted "
                              f"transaction begins at {txn.first_offset}, at or before the producer's "
                              f"previous marker at {previous}: read_committed consumers would drop records "
                              f"of an earlier transaction (expected a first offset > {previous})", *where)
        others = [first for pid, first in self.open.items() if pid != txn.producer_id]
        largest_lso = min(others + [marker + 1])
        if txn.last_stable_offset > largest_lso:
            self.report.error("txn-index-entry", f"last stable offset {txn.last_stable_offset} is above "
                              f"{largest_lso}, the first offset of the transactions still open at the marker "
                              f"(or the marker's offset + 1): read_committed fetches would stop collecting "
                              f"aborted transactions too early", *where)

    # --- after the last segment ---
    def finish(self, segment_ranges: dict[int, tuple[int | None, int | None]], log_end: int | None) -> None:
        """`segment_ranges`: segment base -> (first offset, last offset) of its batches."""
        report = self.report
        for indexed in self.entries:
            txn = indexed.txn
            where = (indexed.file, indexed.position, txn.last_offset)
            if not indexed.resolved:
                if log_end is None or txn.last_offset >= log_end:
                    report.error("txn-index-entry", f"entry names marker offset {txn.last_offset}, beyond "
                                 f"the log end offset {log_end}", *where)
                elif txn.last_offset >= indexed.segment_base:
                    report.note("txn-index-entry", f"entry names marker offset {txn.last_offset}, which no "
                                f"batch holds: the log cleaner removed the ABORT marker and kept the entry",
                                *where)
            _first, last = segment_ranges.get(indexed.segment_base, (None, None))
            if last is not None and txn.first_offset > last:
                report.error("txn-index-entry", f"the aborted transaction "
                             f"{txn.first_offset}..{txn.last_offset} lies entirely after this segment (its "
                             f"offsets end at {last}): expected the entry in the segment holding the marker",
                             *where)
        for abort in self.aborts:
            named = [e for e in self.by_marker.get(abort.marker_offset, ())
                     if e.txn.producer_id == abort.producer_id]
            if not named:
                report.error("txn-index-missing", f"producer {abort.producer_id}'s ABORT marker ends a "
                             f"transaction that begins at offset {abort.first_offset}, but no .txnindex "
                             f"entry names it: read_committed consumers would read the aborted records "
                             f"(expected an entry {abort.first_offset}..{abort.marker_offset} in this "
                             f"segment's .txnindex)", abort.file, abort.position, abort.marker_offset)
                continue
            for indexed in named:
                if indexed.txn.first_offset > abort.first_offset:
                    report.error("txn-index-entry", f"entry says producer {abort.producer_id}'s aborted "
                                 f"transaction begins at {indexed.txn.first_offset}, but the log holds its "
                                 f"batches from offset {abort.first_offset}: read_committed consumers would "
                                 f"read offsets {abort.first_offset}..{indexed.txn.first_offset - 1} "
                                 f"(expected a first offset <= {abort.first_offset})", indexed.file,
                                 indexed.position, abort.marker_offset)
