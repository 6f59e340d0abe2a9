"""Dumping a `.log` segment (or a KRaft snapshot `.checkpoint`) as kafka-dump-log does (docs/format.md §15.2).

Batches are framed the way Kafka's file reader frames them (FileLogInputStream, docs/format.md §2): it stops
quietly when 17 or fewer bytes remain or when an entry runs past the end (the dump then reports
"Found N invalid bytes"), and throws on an entry size below 14 — which includes a zero-filled tail of
18 bytes or more. kfmt's FrameScanner tells these cases apart; `kafka_frames` maps them onto Kafka's
behaviour. Deep iteration decodes each batch leniently (a bad CRC is printed as `isvalid: false`, as
Kafka prints it, not refused).
"""
from __future__ import annotations

import re
from typing import Iterator

from kfmt.defaults import DEFAULT_DUMP_MAX_BYTES
from kfmt.errors import DataError
from kfmt.format import segment
from kfmt.format.layout import HEADER_SIZE_UP_TO_MAGIC, MAGIC_V2, MIN_ENTRY_SIZE
from kfmt.format.message_formats import LENIENT
from kfmt.format.model import NO_SEQUENCE, Batch, BatchHeader, increment_sequence, int64_values
from kfmt.format.segment import FrameScanner
from kfmt.inspect.dump import text_blocks
from kfmt.inspect.dump.common import BatchView, DumpOptions, DumpRecord, DumpTarget, Sink
from kfmt.inspect.dump.control_records import control_info
from kfmt.inspect.dump.decoders import decoder_for
from kfmt.plugin import registry

KRAFT_SNAPSHOT_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")
BOOTSTRAP_SNAPSHOT_NAME = "bootstrap.checkpoint"


def kafka_frames(data, target: DumpTarget, start: int, end: int,
                 first_rows: int | None = None) -> Iterator[BatchHeader]:
    """The entries of data[start:end] as Kafka's file reader sees them; raises where it throws.
    `first_rows`: as FrameScanner's (1 for a lookup that stops after the first entries)."""
    scanner = FrameScanner(data, target.display, start, end, first_rows=first_rows)
    yield from scanner
    tail = scanner.tail
    if tail.kind == "zeros" and tail.length > HEADER_SIZE_UP_TO_MAGIC:
        raise DataError(f"Found record size 0 smaller than minimum record overhead ({MIN_ENTRY_SIZE}): "
                        f"the remaining {tail.length} bytes are zeros", file=target.display,
                        position=tail.position)
    if tail.kind == "corrupt":
        raise tail.error(target.display)


def codec_name(header: BatchHeader) -> str:
    """`compressionType.name`: Kafka looks the id up without regard to the magic (ids 5-7 throw)."""
    codec = registry.get().compressions.get(header.compression)
    if codec is None:
        raise DataError(f"Unknown compression type id: {header.compression}", position=header.position,
                        offset=header.last_offset)
    return codec.name


def crc_valid(data, header: BatchHeader) -> bool:
    fmt = registry.get().format_for(header.magic)
    return fmt.crc_valid(segment.entry_bytes(data, header), header)


def dump_log(target: DumpTarget, options: DumpOptions, sink: Sink) -> None:
    _describe(target, sink)
    target.require()
    size = target.size()
    end = min(size, options.max_bytes)  # FileRecords.slice(0, maxBytes)
    data = target.read_all() if end == size else target.read(0, end)
    valid_bytes = 0
    last_offset = -1  # per file, across batches (the non-consecutive check)
    for header in kafka_frames(data, target, 0, end):
        try:
            view = BatchView(header, valid_bytes, crc_valid(data, header), codec_name(header))
        except DataError as err:
            raise err.located(file=target.display)
        sink.batch_start(target, view)
        decoded = None
        if options.deep:
            batch = segment.decode(data, header, target.display, LENIENT)
            decoded = batch.header
            fast = _record_block(sink, target, view, batch, options, last_offset)
            if fast is not None:
                last_offset = fast
            for record in () if fast is not None else dump_records(batch, target, options):
                # Scala's check: the first record of the file sets lastOffset without a comparison
                if last_offset == -1:
                    last_offset = record.offset
                elif record.offset != last_offset + 1:
                    sink.non_consecutive(target, last_offset, record.offset)
                last_offset = record.offset
                sink.record(target, view, record)
        sink.batch_end(target, view, decoded)
        valid_bytes += header.size
    trailing = end - valid_bytes
    if trailing > 0 and options.max_bytes == DEFAULT_DUMP_MAX_BYTES:  # --max-bytes given: Kafka stays silent
        sink.invalid_bytes(target, valid_bytes, trailing)


def _record_block(sink: Sink, target: DumpTarget, view: BatchView, batch: Batch, options: DumpOptions,
                  last_offset: int) -> int | None:
    """A batch's records printed as one block of text when the sink takes one and text_blocks can
    make it; returns the last offset after them, None (nothing done) otherwise."""
    write_block = getattr(sink, "record_block", None)
    if write_block is None:
        return None
    lines = text_blocks.record_lines(batch, options)
    checked = None if lines is None else text_blocks.non_consecutive(
        int64_values(batch.records.column(0)), last_offset)
    if checked is None:
        return None
    pairs, last_offset = checked
    for previous, following in pairs:
        sink.non_consecutive(target, previous, following)
    write_block(target, view, lines)
    return last_offset


def _describe(target: DumpTarget, sink: Sink) -> None:
    name = target.name
    if name.endswith(".log"):
        sink.describe_file(target, "log", baseOffset=target.base_offset())
    elif name == BOOTSTRAP_SNAPSHOT_NAME:
        sink.describe_file(target, "kraftBootstrapSnapshot")
    else:
        m = KRAFT_SNAPSHOT_NAME.match(name)
        if m is None:
            raise DataError("not a KRaft snapshot name (<20-digit end offset>-<10-digit epoch>"
                            ".checkpoint)", file=target.display)
        sink.describe_file(target, "kraftSnapshot", endOffset=int(m[1]), epoch=int(m[2]))


def dump_records(batch: Batch, target: DumpTarget, options: DumpOptions) -> Iterator[DumpRecord]:
    """The records of a decoded batch with the facts kafka-dump-log prints about each."""
    h = batch.header
    decoder = (decoder_for(options.decoder, options.kafka_version)
               if options.decoder and options.print_data_log else None)
    cols = batch.records.to_pydict()
    for i, (offset, timestamp, key, value, headers) in enumerate(zip(
            cols["offset"], cols["timestamp"], cols["key"], cols["value"], cols["headers"])):
        record = DumpRecord(offset, timestamp, key, value,
                            -1 if key is None else len(key), -1 if value is None else len(value))
        if h.magic >= MAGIC_V2:
            record.headers = [(x["key"], x["value"]) for x in headers]
            # DefaultRecord: the sequence is only defined when the batch has a base sequence
            record.sequence = (increment_sequence(h.base_sequence, offset - h.base_offset)
                               if h.base_sequence >= 0 else NO_SEQUENCE)
        elif batch.legacy is not None:
            record.legacy = batch.legacy[i]
        # Kafka parses the control record only to print its metadata
        if h.is_control and not options.skip_record_metadata:
            try:
                record.control = control_info(key, value, options.kafka_version)
            except DataError as err:
                raise err.located(file=target.display, base_position=h.position, offset=offset)
        # ... and hands only data records to the decoder, only when it prints their contents
        if decoder is not None and not h.is_control:
            try:
                record.decoded = decoder(key, value, offset)
            except DataError as err:
                raise err.located(file=target.display, base_position=h.position, offset=offset)
        yield record
