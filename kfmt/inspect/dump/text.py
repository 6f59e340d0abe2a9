"""kafka-dump-log's own text (Kafka 3.6 and 4.1, docs/format.md §15.2), line for line.

stdout gets the lines as the tool prints them, payloads decoded as Java decodes them and printed raw
(values with newlines span lines). stderr gets what the tool prints there, in its order: "Ignoring
unknown file" and snapshot errors as they happen, then after the last file the summaries, each
grouped per file in the iteration order of the Scala maps that hold them (ScalaHashMap). Index and
non-consecutive-offset pairs were prepended to Scala Lists, so they come out newest first; time-index
problems were appended to ArrayBuffers.
"""
from __future__ import annotations

from kfmt.format.layout import MAGIC_V2
from kfmt.format.model import BatchHeader
from kfmt.inspect.dump.common import BatchView, DumpOptions, DumpRecord, DumpTarget, Sink
from kfmt.inspect.dump.java_output import java_string
from kfmt.inspect.dump.producer_state import first_sequence
from kfmt.inspect.dump.scalamap import ScalaHashMap


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _optional_long(value: int | None) -> str:
    return "OptionalLong.empty" if value is None else f"OptionalLong[{value}]"


def batch_line(batch: BatchView) -> str:
    """printBatchLevel"""
    h = batch.header
    if h.magic >= MAGIC_V2:
        head = (f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.records_count} "
                f"baseSequence: {h.base_sequence} lastSequence: {h.last_sequence} producerId: "
                f"{h.producer_id} producerEpoch: {h.producer_epoch} partitionLeaderEpoch: "
                f"{h.partition_leader_epoch} isTransactional: {_bool(h.is_transactional)} isControl: "
                f"{_bool(h.is_control)} deleteHorizonMs: {_optional_long(h.delete_horizon_ms)}")
    else:
        head = f"offset: {h.last_offset}"
    return (f"{head} position: {batch.position} {h.timestamp_type.java_name}: {h.max_timestamp} size: "
            f"{h.size} magic: {h.magic} compresscodec: {batch.codec_name} crc: {h.crc} isvalid: "
            f"{_bool(batch.crc_valid)}")


def record_line(batch: BatchView, record: DumpRecord, options: DumpOptions) -> str:
    """One record of dumpLog's deep iteration (what is printed up to its println)."""
    h = batch.header
    parts = []
    prefix = "| "
    if not options.skip_record_metadata:
        parts.append(f"| offset: {record.offset} {h.timestamp_type.java_name}: {record.timestamp} "
                     f"keySize: {record.key_size} valueSize: {record.value_size}")
        prefix = " "
        if h.magic >= MAGIC_V2:
            keys = ",".join(java_string(k) for k, _ in record.headers)
            parts.append(f" sequence: {record.sequence} headerKeys: [{keys}]")
        if record.legacy is not None:
            # the stray "}" is in Kafka 3.6's format string
            parts.append(f" isValid: {_bool(record.legacy.crc_valid)} crc: {record.legacy.crc}}}")
        if record.control is not None:
            parts.append(control_text(record))
    if options.print_data_log and not h.is_control and record.decoded is not None:
        if record.decoded.key is not None:
            parts.append(f"{prefix}key: {record.decoded.key}")
        if record.decoded.payload is not None:
            parts.append(f" payload: {record.decoded.payload}")
    elif options.print_data_log and not h.is_control:
        if record.key is not None:
            parts.append(f"{prefix}key: {java_string(record.key)}")
        if record.value is not None:
            parts.append(f" payload: {java_string(record.value)}")
    return "".join(parts)


def control_text(record: DumpRecord) -> str:
    c = record.control
    if c.coordinator_epoch is not None:
        return f" endTxnMarker: {c.type_name} coordinatorEpoch: {c.coordinator_epoch}"
    if c.label is not None:
        return f" {c.label} {c.json}"
    return f" controlType: {c.type_name}({c.type_id})"


def producer_line(entry) -> str:
    """dumpProducerIdSnapshot (the trailing space without batch metadata is Kafka's)."""
    txn_first = entry.current_txn_first_offset if entry.current_txn_first_offset >= 0 else None
    line = (f"producerId: {entry.producer_id} producerEpoch: {entry.producer_epoch} coordinatorEpoch: "
            f"{entry.coordinator_epoch} currentTxnFirstOffset: {_optional_long(txn_first)} "
            f"lastTimestamp: {entry.timestamp} ")
    if entry.last_offset >= 0:  # readSnapshot keeps batch metadata only for a real last offset
        line += (f"firstSequence: {first_sequence(entry)} lastSequence: {entry.last_sequence} "
                 f"lastOffset: {entry.last_offset} offsetDelta: {entry.offset_delta} "
                 f"timestamp: {entry.timestamp}")
    return line


class TextSink(Sink):
    def __init__(self, out, err, options: DumpOptions):
        self.out = out
        self.err = err
        self.options = options
        self.index_mismatches = ScalaHashMap()  # absolute path -> [(index offset, log offset)]
        self.timestamp_mismatches = ScalaHashMap()  # absolute path -> [(index ts, log ts)]
        self.out_of_order = ScalaHashMap()  # absolute path -> [(index ts, previous ts)]
        self.not_found = ScalaHashMap()  # absolute path -> [(index offset, log offset)]
        self.non_consecutive_pairs = ScalaHashMap()  # absolute path -> [(previous, next)]

    def _print(self, line: str) -> None:
        self.out.write(line)
        self.out.write("\n")

    def _stderr(self, line: str) -> None:
        self.out.flush()  # keep the two streams in the order Kafka wrote them
        self.err.write(line)
        self.err.write("\n")
        self.err.flush()

    # --- per file ---
    def begin_file(self, target: DumpTarget) -> None:
        self._print(f"Dumping {target.display}")

    def describe_file(self, target: DumpTarget, kind: str, **facts) -> None:
        if kind == "log":
            self._print(f"Log starting offset: {facts['baseOffset']}")
        elif kind == "kraftSnapshot":
            self._print(f"Snapshot end offset: {facts['endOffset']}, epoch: {facts['epoch']}")
        elif kind == "kraftBootstrapSnapshot":
            self._print("KRaft bootstrap snapshot")

    def unknown_file(self, target: DumpTarget) -> None:
        self._stderr(f"Ignoring unknown file {target.display}")

    # --- .log ---
    def batch_start(self, target: DumpTarget, batch: BatchView) -> None:
        self._print(batch_line(batch))

    def record(self, target: DumpTarget, batch: BatchView, record: DumpRecord) -> None:
        self._print(record_line(batch, record, self.options))

    def record_block(self, target: DumpTarget, batch: BatchView, lines: bytes | str) -> None:
        """The lines of many records at once, each ending in a newline (kfmt.inspect.dump.text_blocks);
        bytes (ASCII) straight to the stream's buffer, after the text before them."""
        raw = getattr(self.out, "buffer", None) if isinstance(lines, bytes) else None
        if raw is not None:
            self.out.flush()
            raw.write(lines)
        else:
            self.out.write(lines.decode("ascii") if isinstance(lines, bytes) else lines)

    def batch_end(self, target: DumpTarget, batch: BatchView, decoded: BatchHeader | None) -> None:
        pass

    def invalid_bytes(self, target: DumpTarget, position: int, length: int) -> None:
        self._print(f"Found {length} invalid bytes at the end of {target.name}")

    def non_consecutive(self, target: DumpTarget, previous: int, following: int) -> None:
        _prepend(self.non_consecutive_pairs, target.absolute, (previous, following))

    # --- indexes ---
    def index_empty(self, target: DumpTarget) -> None:
        self._print(f"{target.display} is empty.")

    def sanity_check_passed(self, target: DumpTarget) -> None:
        self._print(f"{target.display} passed sanity check.")

    def index_entry(self, target: DumpTarget, slot: int, offset: int, position: int) -> None:
        self._print(f"offset: {offset} position: {position}")

    def index_mismatch(self, target: DumpTarget, index_offset: int, log_offset: int) -> None:
        _prepend(self.index_mismatches, target.absolute, (index_offset, log_offset))

    def time_index_entry(self, target: DumpTarget, slot: int, timestamp: int, offset: int) -> None:
        self._print(f"timestamp: {timestamp} offset: {offset}")

    def timestamp_mismatch(self, target: DumpTarget, index_timestamp: int, log_timestamp: int) -> None:
        _append(self.timestamp_mismatches, target.absolute, (index_timestamp, log_timestamp))

    def out_of_order_timestamp(self, target: DumpTarget, index_timestamp: int,
                               previous_timestamp: int) -> None:
        _append(self.out_of_order, target.absolute, (index_timestamp, previous_timestamp))

    def offset_not_found(self, target: DumpTarget, index_offset: int, log_offset: int) -> None:
        _append(self.not_found, target.absolute, (index_offset, log_offset))

    # --- .snapshot / .txnindex ---
    def producer(self, target: DumpTarget, entry) -> None:
        self._print(producer_line(entry))

    def snapshot_corrupt(self, target: DumpTarget, message: str) -> None:
        self._stderr(message)

    def aborted_txn(self, target: DumpTarget, version: int, txn) -> None:
        self._print(f"version: {version} producerId: {txn.producer_id} firstOffset: {txn.first_offset} "
                    f"lastOffset: {txn.last_offset} lastStableOffset: {txn.last_stable_offset}")

    # --- the summaries, after the last file ---
    def finish(self) -> None:
        lines = []
        for path, pairs in self.index_mismatches.items():
            lines.append(f"Mismatches in :{path}")
            lines += [f"  Index offset: {a}, log offset: {b}" for a, b in reversed(pairs)]
        for path, pairs in self.timestamp_mismatches.items():
            lines.append(f"Found timestamp mismatch in :{path}")
            lines += [f"  Index timestamp: {a}, log timestamp: {b}" for a, b in pairs]
        for path, pairs in self.out_of_order.items():
            lines.append(f"Found out of order timestamp in :{path}")
            lines += [f"  Index timestamp: {a}, Previously indexed timestamp: {b}" for a, b in pairs]
        for pairs in self.not_found.values():
            lines.append("The following indexed offsets are not found in the log.")
            lines += [f"Indexed offset: {a}, found log offset: {b}" for a, b in pairs]
        for path, pairs in self.non_consecutive_pairs.items():
            lines.append(f"Non-consecutive offsets in {path}")
            lines += [f"  {a} is followed by {b}" for a, b in reversed(pairs)]
        self.out.flush()
        for line in lines:
            self.err.write(line)
            self.err.write("\n")
        self.err.flush()


def _prepend(summary: ScalaHashMap, path: str, pair: tuple) -> None:
    # `seq ::= pair; map.put(path, seq)`: a put for every pair (kept in arrival order here, and
    # printed reversed)
    pairs = summary.get(path, [])
    pairs.append(pair)
    summary.put(path, pairs)


def _append(summary: ScalaHashMap, path: str, pair: tuple) -> None:
    # `getOrElse(path, new ArrayBuffer)`, put only when it was new, then append
    pairs = summary.get(path)
    if pairs is None:
        pairs = []
        summary.put(path, pairs)
    pairs.append(pair)
