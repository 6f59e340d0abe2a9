"""`kfmt dump --format json`: one JSON object per line, for scripts (fields in docs/dump.md).

Every object has "type" and "file" (the file as given). Bytes are given twice: base64 (exact) and
as text the way kafka-dump-log shows them (Java's UTF-8 decoding, malformed bytes as U+FFFD).
The problems the text form summarises on stderr at the end are objects here, emitted where they
are found; a batch object is emitted when its records are done (they are nested in it).
"""
from __future__ import annotations

import base64
import json

from kfmt.format.layout import MAGIC_V2
from kfmt.format.model import BatchHeader
from kfmt.inspect.dump.common import BatchView, DumpOptions, DumpRecord, DumpTarget, Sink
from kfmt.inspect.dump.java_output import java_string
from kfmt.inspect.dump.producer_state import first_sequence

# Characters json.dumps leaves raw that some readers take as line ends (Python's splitlines,
# JavaScript): escaped, so that every object stays on its one line.
_LINE_BREAKS = {0x85: "\\u0085", 0x2028: "\\u2028", 0x2029: "\\u2029"}


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def _text(data: bytes | None) -> str | None:
    return None if data is None else java_string(data)


class JsonSink(Sink):
    def __init__(self, out, options: DumpOptions):
        self.out = out
        self.options = options
        self._records: list[dict] = []

    def _emit(self, target: DumpTarget, object_type: str, /, **fields) -> None:
        text = json.dumps({"type": object_type, "file": target.display, **fields},
                          separators=(",", ":"), ensure_ascii=False)
        self.out.write(text.translate(_LINE_BREAKS))
        self.out.write("\n")

    def describe_file(self, target: DumpTarget, kind: str, **facts) -> None:
        self._emit(target, "file", kind=kind, **facts)

    def unknown_file(self, target: DumpTarget) -> None:
        self._emit(target, "file", kind="unknown", ignored=True)

    # --- .log ---
    def batch_start(self, target: DumpTarget, batch: BatchView) -> None:
        self._records = []

    def record(self, target: DumpTarget, batch: BatchView, record: DumpRecord) -> None:
        self._records.append(self._record(batch, record))

    def _record(self, batch: BatchView, r: DumpRecord) -> dict:
        obj = {"offset": r.offset}
        if not self.options.skip_record_metadata:
            obj.update(timestamp=r.timestamp, keySize=r.key_size, valueSize=r.value_size)
            if batch.header.magic >= MAGIC_V2:
                obj["sequence"] = r.sequence
                obj["headers"] = [{"key": java_string(k), "keyBase64": _b64(k), "value": _b64(v),
                                   "valueText": _text(v)} for k, v in r.headers]
            if r.legacy is not None:
                obj.update(magic=r.legacy.magic, attributes=r.legacy.attributes, crc=r.legacy.crc,
                           isValid=r.legacy.crc_valid)
            if r.control is not None:
                c = r.control
                control = {"type": c.type_name, "typeId": c.type_id}
                if c.coordinator_epoch is not None:
                    control["coordinatorEpoch"] = c.coordinator_epoch
                if c.json is not None:
                    control["record"] = json.loads(c.json)
                obj["control"] = control
        if self.options.print_data_log and not batch.header.is_control:
            obj.update(key=_b64(r.key), keyText=_text(r.key), value=_b64(r.value), valueText=_text(r.value))
            if r.decoded is not None:
                # the decoder's key and payload text as kafka-dump-log prints them, and the record
                # they come from, structured
                obj["decoded"] = {"key": r.decoded.key, "payload": r.decoded.payload,
                                  "record": r.decoded.content}
        return obj

    def batch_end(self, target: DumpTarget, batch: BatchView, decoded: BatchHeader | None) -> None:
        h = decoded or batch.header
        v2 = h.magic >= MAGIC_V2
        fields = dict(
            position=batch.position, size=h.size, magic=h.magic, baseOffset=h.base_offset,
            lastOffset=h.last_offset, count=h.records_count,
            baseSequence=h.base_sequence, lastSequence=h.last_sequence if v2 else -1,
            producerId=h.producer_id, producerEpoch=h.producer_epoch,
            partitionLeaderEpoch=h.partition_leader_epoch, isTransactional=h.is_transactional,
            isControl=h.is_control, deleteHorizonMs=h.delete_horizon_ms,
            timestampType=h.timestamp_type.java_name, maxTimestamp=h.max_timestamp,
            compression=batch.codec_name, crc=h.crc, isValid=batch.crc_valid)
        if self.options.deep:
            fields["records"] = self._records
        self._records = []
        self._emit(target, "batch", **fields)

    def invalid_bytes(self, target: DumpTarget, position: int, length: int) -> None:
        self._emit(target, "invalidBytes", position=position, length=length)

    def non_consecutive(self, target: DumpTarget, previous: int, following: int) -> None:
        self._emit(target, "nonConsecutiveOffsets", previous=previous, next=following)

    # --- indexes ---
    def index_empty(self, target: DumpTarget) -> None:
        self._emit(target, "indexEmpty")

    def sanity_check_passed(self, target: DumpTarget) -> None:
        self._emit(target, "sanityCheckPassed")

    def index_entry(self, target: DumpTarget, slot: int, offset: int, position: int) -> None:
        self._emit(target, "indexEntry", slot=slot, offset=offset, position=position)

    def index_mismatch(self, target: DumpTarget, index_offset: int, log_offset: int) -> None:
        self._emit(target, "indexMismatch", indexOffset=index_offset, logOffset=log_offset)

    def time_index_entry(self, target: DumpTarget, slot: int, timestamp: int, offset: int) -> None:
        self._emit(target, "timeIndexEntry", slot=slot, timestamp=timestamp, offset=offset)

    def timestamp_mismatch(self, target: DumpTarget, index_timestamp: int, log_timestamp: int) -> None:
        self._emit(target, "timestampMismatch", indexTimestamp=index_timestamp, logTimestamp=log_timestamp)

    def out_of_order_timestamp(self, target: DumpTarget, index_timestamp: int,
                               previous_timestamp: int) -> None:
        self._emit(target, "outOfOrderTimestamp", indexTimestamp=index_timestamp,
                   previousTimestamp=previous_timestamp)

    def offset_not_found(self, target: DumpTarget, index_offset: int, log_offset: int) -> None:
        self._emit(target, "offsetNotFound", indexOffset=index_offset,
                   logOffset=None if log_offset < 0 else log_offset)

    # --- .snapshot / .txnindex ---
    def producer(self, target: DumpTarget, e) -> None:
        batch = None
        if e.last_offset >= 0:
            batch = {"firstSequence": first_sequence(e), "lastSequence": e.last_sequence,
                     "lastOffset": e.last_offset, "offsetDelta": e.offset_delta, "timestamp": e.timestamp}
        self._emit(target, "producer", producerId=e.producer_id, producerEpoch=e.producer_epoch,
                   coordinatorEpoch=e.coordinator_epoch,
                   currentTxnFirstOffset=e.current_txn_first_offset if e.current_txn_first_offset >= 0
                   else None, lastTimestamp=e.timestamp, batch=batch)

    def snapshot_corrupt(self, target: DumpTarget, message: str) -> None:
        self._emit(target, "snapshotCorrupt", message=message)

    def aborted_txn(self, target: DumpTarget, version: int, txn) -> None:
        self._emit(target, "abortedTxn", version=version, producerId=txn.producer_id,
                   firstOffset=txn.first_offset, lastOffset=txn.last_offset,
                   lastStableOffset=txn.last_stable_offset)

    def finish(self) -> None:
        self.out.flush()
