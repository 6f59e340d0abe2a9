"""Checks of the `.log` segments: framing, CRCs, offsets and record structure (docs/format.md §2-§4, §12.1).

Every entry is decoded by its format plugin in lenient mode (a CRC mismatch is recorded, not raised),
so that one corrupt batch whose framing is intact is reported and the rest of the segment is still
checked; where the framing itself is broken (an impossible size, a truncated entry, garbage) the
scanner's `tail` says so and the rest of that file cannot be read.

What a segment's batches are (positions, offsets, timestamps, producers) is kept as `SegmentColumns`
for the index, transaction and checkpoint checks that compare other files against the log.

Two depths, as Kafka has them. The default is what a broker's log recovery checks (LogSegment.recover,
§12.5): framing, each entry's CRC over its stored bytes -- a compressed batch's or wrapper's
compressed ones -- and offsets in order and in range, without inflating a compressed data batch
(log_runs.stored_clean). `deep` (kafka-dump-log's --deep-iteration) also inflates every compressed
batch and checks what its consumers and lookups rely on: record offsets inside their batch and
increasing, a wrapper's offset its last inner one, inner messages' CRCs, record timestamps not above
the batch's maxTimestamp. Both decode every control batch (its markers are what the transaction
checks need) and every entry the recovery check refuses (to say what is wrong with it).
"""
from __future__ import annotations

import numpy as np
import pyarrow.compute as pc

from kfmt.errors import DataError
from kfmt.format import clean_runs, copied_runs
from kfmt.format import segment as segment_io
from kfmt.format.control import ControlType, control_type, end_txn_marker
from kfmt.format.frames import FRAME_DTYPE, headers_of
from kfmt.format.layout import MAGIC_V1, MAGIC_V2
from kfmt.format.message_formats import LENIENT, STRICT
from kfmt.format.model import (
    INT32_MAX,
    NO_PARTITION_LEADER_EPOCH,
    Batch,
    BatchHeader,
    TimestampType,
    int64_values,
)
from kfmt.partition.layout import PartitionDir, Segment
from kfmt.partition.live import segment_bytes
from kfmt.partition.reader import SegmentData

from . import log_runs
from .problems import VerifyReport
from .segment_columns import BatchFacts, SegmentColumns

MAX_SEGMENT_BYTES = INT32_MAX  # FileRecords: a segment may not exceed Integer.MAX_VALUE bytes (docs/format.md §2)


class LogChecker:
    """Walks a partition's segments in order; `observers` (the transaction and leader-epoch checks)
    see every batch as it goes, so nothing but the current segment's facts is kept."""

    def __init__(self, part: PartitionDir, report: VerifyReport, observers=(), walkers=(),
                 deep: bool = False):
        self.part = part
        self.report = report
        self.deep = deep  # the record-level checks too (the module doc's two depths)
        self.observers = list(observers)
        # SegmentWalkers (kfmt.partition.reader) shown the same chunks of entries: what else wants
        # this pass over the bytes (the report: info's counts and the segments' facts)
        self.walkers = list(walkers)
        self.prev_last: int | None = None  # last offset of the previous batch of the partition
        self.prev_file: str | None = None

    def check_segment(self, seg: Segment, is_last: bool) -> SegmentColumns:
        report = self.report
        file = self.part.display(seg.log)
        buf, base = segment_bytes(self.part.storage, seg.log.path, file, seg.log.size, is_last)
        facts = SegmentColumns(seg, file)
        report.counts.segments += 1
        report.counts.files += 1
        if seg.log.size > MAX_SEGMENT_BYTES:
            report.error("segment-size", f"segment of {seg.log.size} bytes exceeds {MAX_SEGMENT_BYTES}: "
                         f"Kafka cannot address it (index positions are int32)", file)
        if self.prev_last is not None and seg.base_offset <= self.prev_last:
            report.error("segment-base", f"segment base offset {seg.base_offset} (the file name) is not "
                         f"above the last offset {self.prev_last} of the previous segment: offsets "
                         f"would be looked up in the wrong segment (expected a base offset > "
                         f"{self.prev_last})", file, 0, seg.base_offset)
        data = SegmentData(seg, buf, base, file)
        for walker in self.walkers:
            walker.on_segment(seg, data)
        scanner = segment_io.FrameScanner(buf, file)
        for chunk in scanner.chunks():
            for walker in self.walkers:
                if not walker.done:
                    walker.on_chunk(seg, data, chunk)
            # runs the kernels find nothing wrong with are taken whole (log_runs); the rest entry by entry
            for rows, records in log_runs.split(buf, chunk, self.deep):
                if records is not None and log_runs.add_clean_run(self, rows, records, facts, file, BatchFacts):
                    continue
                for i, header in enumerate(headers_of(rows)):
                    if not self.deep and header.compression and _recovery_clean(buf, rows, i, header):
                        batch_facts = self._stored_batch(header, seg, file, facts)
                    else:
                        batch_facts = self._check_batch(buf, header, seg, file, first=not len(facts))
                    facts.add(batch_facts)
                    for observer in self.observers:
                        observer.on_batch(batch_facts, file, report)
        for walker in self.walkers:
            walker.on_tail(seg, data, scanner.tail)
        self._check_tail(scanner.tail, file, is_last)
        facts.readable_end = scanner.tail.position
        facts.recovered_tail = is_last and scanner.tail.is_error
        return facts

    # --- one batch ---
    def _stored_batch(self, header: BatchHeader, seg: Segment, file: str, facts: SegmentColumns) -> BatchFacts:
        """The default depth's facts of a compressed data entry log recovery's check accepts, from its
        header alone (log_runs.stored_clean says why; a wrapper's base offset is its last)."""
        report = self.report
        report.counts.batches += 1
        wrapper = header.base_offset is None
        if wrapper:
            report.counts.uncounted_wrappers += 1
            facts.exact_bases = False
        else:
            report.counts.records += header.records_count
        batch_facts = BatchFacts(
            position=header.position, size=header.size,
            base_offset=header.last_offset if wrapper else header.base_offset,
            last_offset=header.last_offset, max_timestamp=header.max_timestamp, magic=header.magic,
            producer_id=header.producer_id, producer_epoch=header.producer_epoch,
            is_transactional=header.is_transactional, is_control=False,
            partition_leader_epoch=header.partition_leader_epoch)
        self._check_offsets(batch_facts, seg, file, not len(facts))
        return batch_facts

    def _check_batch(self, buf, header: BatchHeader, seg: Segment, file: str, first: bool) -> BatchFacts:
        report = self.report
        report.counts.batches += 1
        batch, structure_error = None, None
        try:
            batch = segment_io.decode(buf, header, file, LENIENT)
        except DataError as err:
            structure_error = err
        if batch is None or not batch.crc_valid:
            crc_error = _crc_error(buf, header, file, structure_error)
            if crc_error is not None:
                report.data_error("crc", crc_error, file, header.position, header.last_offset)
        if structure_error is not None:
            structure_error.message += f" ({_declared(header)})"
            report.data_error("record-structure", structure_error, file, header.position,
                              header.last_offset)
        h = batch.header if batch is not None else header
        facts = BatchFacts(
            position=header.position, size=header.size,
            base_offset=h.base_offset if h.base_offset is not None else h.last_offset,
            last_offset=h.last_offset, max_timestamp=h.max_timestamp, magic=h.magic,
            producer_id=h.producer_id, producer_epoch=h.producer_epoch,
            is_transactional=h.is_transactional, is_control=h.is_control,
            partition_leader_epoch=h.partition_leader_epoch)
        self._check_offsets(facts, seg, file, first)
        if batch is not None:
            report.counts.records += len(batch)
            self._check_records(batch, facts, file)
            if batch.legacy is not None and h.compression:
                self._check_inner_messages(batch, facts, file)
            if h.is_control:
                facts.control = self._check_control_records(batch, facts, file)
        return facts

    def _check_offsets(self, facts: BatchFacts, seg: Segment, file: str, first: bool) -> None:
        report = self.report
        where = (file, facts.position, facts.base_offset)
        if facts.last_offset < facts.base_offset:
            report.error("batch-offsets", f"batch ends at offset {facts.last_offset}, before its base "
                         f"offset {facts.base_offset} (lastOffsetDelta is negative; expected "
                         f"lastOffset >= baseOffset)", *where)
        if self.prev_last is not None and facts.base_offset <= self.prev_last:
            previous = "" if self.prev_file == file else f" (in {self.prev_file})"
            report.error("offset-order", f"batch offsets {facts.base_offset}..{facts.last_offset} do not "
                         f"follow the previous batch{previous}, which ends at {self.prev_last} "
                         f"(expected a first offset > {self.prev_last})", *where)
        if first and facts.last_offset < seg.base_offset:
            report.error("segment-base", f"first offset {facts.base_offset} is below the segment's base "
                         f"offset {seg.base_offset} (its file name): expected base offset <= first "
                         f"offset (docs/format.md §12.1)", *where)
        elif first and facts.base_offset < seg.base_offset:
            # what loading checks is the last offset (LogSegment.recover): the segment loads and is
            # served from its base offset on, the log start offset a partition directory carries
            report.note("segment-base", f"the first batch {facts.base_offset}..{facts.last_offset} begins "
                        f"below the segment's base offset {seg.base_offset}: a broker serves it from "
                        f"{seg.base_offset} on (docs/format.md §12.1)", *where)
        if facts.magic >= MAGIC_V2 and facts.partition_leader_epoch < NO_PARTITION_LEADER_EPOCH:
            # Not covered by the CRC (docs/format.md §4.1); Kafka writes -1 (none) or the leader's epoch (>= 0).
            report.error("leader-epoch", f"partition leader epoch {facts.partition_leader_epoch} "
                         f"(expected -1 for none, or an epoch >= 0)", *where)
        relative = facts.last_offset - seg.base_offset
        if relative > INT32_MAX:
            report.error("offset-range", f"offset {facts.last_offset} is {relative} above the segment "
                         f"base {seg.base_offset}: index entries hold int32 relative offsets (expected "
                         f"at most {INT32_MAX})", *where)
        self.prev_last, self.prev_file = facts.last_offset, file

    def _check_records(self, batch: Batch, facts: BatchFacts, file: str) -> None:
        """Semantic checks Kafka's consumer does not make: record offsets inside the batch and
        increasing (docs/format.md §4.4), a legacy wrapper carrying its last inner offset (docs/format.md §3.4), record timestamps
        not above the batch's maxTimestamp (time lookups skip batches by it, §6.5)."""
        report, h = self.report, batch.header
        if not len(batch) or (h.magic < MAGIC_V2 and not h.compression):
            return  # an uncompressed legacy entry is its one record: its offset and timestamp are the entry's
        if clean_runs.records_keep_rules(batch):
            return  # nothing to report (the checks below, in one compiled call)
        offsets = int64_values(batch.records.column(0))
        decreasing = np.flatnonzero(np.diff(offsets) <= 0)
        if decreasing.size:
            i = int(decreasing[0]) + 1
            report.error("record-offsets", f"record {i} has offset {offsets[i]} after offset "
                         f"{offsets[i - 1]}: record offsets must increase (offset deltas are strictly "
                         f"increasing)", file, facts.position, int(offsets[i]))
        first, last = int(offsets[0]), int(offsets[-1])
        if first < h.base_offset or last > h.last_offset:
            report.error("record-offsets", f"record offsets {first}..{last} fall outside the batch's "
                         f"offsets {h.base_offset}..{h.last_offset}", file, facts.position, facts.base_offset)
        elif h.magic < MAGIC_V2 and h.compression and last != h.last_offset:
            report.error("record-offsets", f"wrapper offset {h.last_offset} is not the offset {last} of "
                         f"its last inner message (a legacy wrapper carries its last inner offset, §3.4)",
                         file, facts.position, h.last_offset)
        if h.magic >= MAGIC_V1 and h.timestamp_type == TimestampType.CREATE_TIME:
            largest = pc.max(batch.records.column(1)).as_py()
            if largest > h.max_timestamp:
                report.error("record-timestamp", f"a record has timestamp {largest}, above the batch's "
                             f"maxTimestamp {h.max_timestamp}: time lookups and retention would skip it "
                             f"(expected record timestamps <= maxTimestamp)", file, facts.position,
                             facts.base_offset)

    def _check_inner_messages(self, batch: Batch, facts: BatchFacts, file: str) -> None:
        """Inner messages of a legacy wrapper have their own CRCs (docs/format.md §3.4): the broker checks them on
        produce and kafka-dump-log --deep-iteration prints them; recovery checks only the wrapper's."""
        if log_runs.inner_messages_clean(batch, facts.magic):
            return
        offsets = batch.records.column(0).to_pylist()
        for i, (info, offset) in enumerate(zip(batch.legacy, offsets)):
            if not info.crc_valid:
                self.report.error("crc", f"inner message {i} of the wrapper is corrupt: its stored crc "
                                  f"{info.crc} does not match its contents", file, facts.position, offset)
        other_magic = [i for i, info in enumerate(batch.legacy) if info.magic != facts.magic]
        if other_magic:
            self.report.note("inner-magic", f"{len(other_magic)} inner message(s) (first: {other_magic[0]}) "
                             f"have another magic than their magic {facts.magic} wrapper (written by a "
                             f"0.10.0 cleaner, KAFKA-4298; readers cope)", file, facts.position,
                             offsets[other_magic[0]])

    def _check_control_records(self, batch: Batch, facts: BatchFacts, file: str) -> ControlType | None:
        """Control records must parse (docs/format.md §4.6): key >= 4 bytes with version >= 0, and ABORT/COMMIT
        markers a value >= 6 bytes with version >= 0 (ControlRecordType, EndTransactionMarker)."""
        kinds = []
        cols = batch.records.select(["offset", "key", "value"]).to_pydict()
        for offset, key, value in zip(cols["offset"], cols["key"], cols["value"]):
            try:
                kind = control_type(key)
                if kind in (ControlType.ABORT, ControlType.COMMIT):
                    end_txn_marker(value)
                kinds.append(kind)
            except DataError as err:
                self.report.error("control-record", f"{err.message} (a control record needs a key of "
                                  f"at least 4 bytes and a marker a value of at least 6)", file,
                                  facts.position, offset)
                kinds.append(None)
        return kinds[0] if kinds else None

    # --- the end of a segment ---
    def _check_tail(self, tail, file: str, is_last: bool) -> None:
        if tail.kind == "clean":
            return
        if tail.kind == "zeros":
            message = f"{tail.length} zero bytes end the segment"
            if is_last:
                self.report.note("log-tail", f"{message}: a preallocated active segment (copied from a "
                                 f"running broker); its reader stops there", file, tail.position)
            else:
                self.report.error("framing", f"{message}: only the active segment is preallocated, an "
                                  f"inactive one is trimmed on roll (Kafka's reader rejects an entry size "
                                  f"below 14 there)", file, tail.position)
            return
        if is_last:  # a batch being appended, a broker killed mid-write, a copy cut short
            self.report.note("log-tail-truncated", f"{tail.message}; the remaining {tail.length} bytes "
                             f"of the partition's last segment are a batch a running broker is still "
                             f"appending, or the tail Kafka's log recovery truncates (LogSegment.recover "
                             f"stops at the first entry it cannot read): readers leave them out", file,
                             tail.position, tail.offset)
            return
        self.report.error("framing", f"{tail.message}; the remaining {tail.length} bytes of the file "
                          f"cannot be read (expected a complete entry or the end of the file)", file,
                          tail.position, tail.offset)


def _recovery_clean(buf, rows, i: int, header: BatchHeader) -> bool:
    """Whether entry `i` of `rows`, a compressed data entry, passes log recovery's check of its stored
    bytes (log_runs.stored_clean, one entry: the pure-Python path and entries a run left out)."""
    if header.is_control:
        return False
    one = np.ascontiguousarray(rows[i:i + 1].astype(FRAME_DTYPE))
    return copied_runs.entries_digest(buf, one, 0, 1)[0] == 1


def _declared(header: BatchHeader) -> str:
    """What the entry's header promises, to say what decoding expected."""
    if header.magic >= MAGIC_V2:
        return (f"the batch at position {header.position} declares {header.records_count} records, "
                f"offsets {header.base_offset}..{header.last_offset}")
    kind = "wrapper" if header.compression else "message"
    return f"in the {kind} at position {header.position}, offset {header.last_offset}"


def _crc_error(buf, header: BatchHeader, file: str, structure_error: DataError | None) -> DataError | None:
    """The format plugin's own CRC complaint about this entry (stored and computed values), if any.

    A strict decode checks the CRC before anything else, so when it fails with a different complaint
    than the lenient decode did, that complaint is the CRC's.
    """
    try:
        segment_io.decode(buf, header, file, STRICT)
    except DataError as err:
        if structure_error is None or err.message != structure_error.message:
            return err
    return None
