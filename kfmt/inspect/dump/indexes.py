"""Dumping `.index` and `.timeindex` files as kafka-dump-log does, with its checks (docs/format.md §6, §15.2).

Kafka opens an index the way the broker does: `entries = file length // entry size`, every slot,
including the zero-filled tail of a preallocated file. Printing stops at the first slot after slot 0
whose offset is the base offset (the zero fill); lookups in the offset index, though, binary-search
all slots with Kafka's "warm section" first (AbstractIndex.indexSlotRangeFor), so a zero tail sends a
lookup to position 0 — reproduced here, since it decides which batch a time-index entry is checked
against.

Checks (reported by the sink, summarised on stderr at the end by the text form):
* `.index`: the first batch at each entry's position (read within --max-message-size) must have the
  entry's offset as its last offset.
* `.timeindex`: the batch found for each entry's offset must end exactly there, its largest record
  timestamp must equal the entry's, and entries must increase.
`--index-sanity-check` runs OffsetIndex/TimeIndex.sanityCheck instead (failing it is fatal, as the
exception is in Kafka's tool).
"""
from __future__ import annotations

from kfmt.errors import DataError
from kfmt.format import segment
from kfmt.format.message_formats import LENIENT
from kfmt.format.model import NO_TIMESTAMP
from kfmt.inspect.dump.common import DumpOptions, DumpTarget, Sink
from kfmt.inspect.dump.log import kafka_frames
from kfmt.partition.indexes import OFFSET_ENTRY, TIME_ENTRY

WARM_BYTES = 8192  # AbstractIndex.warmEntries() = 8192 / entry size


class RawIndex:
    """Every slot of an index file, as Kafka maps it (no trimming of a zero tail)."""

    def __init__(self, data, entry, base_offset: int):
        self.data = data
        self.entry = entry
        self.base_offset = base_offset
        self.entries = len(data) // entry.size

    def slot(self, i: int) -> tuple:
        return self.entry.unpack_from(self.data, i * self.entry.size)


def _offset_at(index: RawIndex, slot: int) -> int:
    return index.base_offset + index.slot(slot)[0]


def lookup_position(index: RawIndex, target: int) -> int:
    """OffsetIndex.lookup(target).position over all slots: the largest lower bound of `target`,
    searching the last 8 KiB of slots first; 0 when every slot is above it or the index is empty."""
    n = index.entries
    if n == 0:
        return 0
    first_hot = max(0, n - 1 - WARM_BYTES // index.entry.size)
    if _offset_at(index, first_hot) < target:
        slot = _largest_lower_bound(index, target, first_hot, n - 1)
    elif _offset_at(index, 0) > target:
        return 0
    else:
        slot = _largest_lower_bound(index, target, 0, first_hot)
    return index.slot(slot)[1]


def _largest_lower_bound(index: RawIndex, target: int, lo: int, hi: int) -> int:
    while lo < hi:
        mid = (lo + hi + 1) // 2
        found = _offset_at(index, mid)
        if found > target:
            hi = mid - 1
        elif found < target:
            lo = mid
        else:
            return mid
    return lo


def _companion(target: DumpTarget, suffix: str) -> DumpTarget:
    """The file of the same segment with another suffix; Kafka's tool cannot go on without it."""
    other = target.sibling(target.name.split(".")[0] + suffix)
    if not other.exists():
        raise DataError(f"{other.display} is missing (kafka-dump-log reads it to check "
                        f"{target.name})", file=target.display)
    return other


def _slice_end(position: int, size: int, length: int, log: DumpTarget) -> int:
    """FileRecords.slice(position, length): the end of the slice, or Kafka's IllegalArgumentException."""
    if position < 0:
        raise DataError(f"Invalid position: {position} in read from {log.display}", file=log.display)
    if position > size:
        raise DataError(f"Slice from position {position} exceeds end position of {log.display} "
                        f"({size} bytes)", file=log.display)
    return min(position + length, size)


def dump_offset_index(target: DumpTarget, options: DumpOptions, sink: Sink) -> None:
    base = target.base_offset()
    sink.describe_file(target, "index", baseOffset=base)
    log = _companion(target, ".log")
    target.require()
    index = RawIndex(target.read_copy(), OFFSET_ENTRY, base)
    if index.entries == 0:
        sink.index_empty(target)
        return
    if options.index_sanity_check:
        _offset_index_sanity_check(index, target)
        sink.sanity_check_passed(target)
        return
    log_data = log.read_all()
    for slot in range(index.entries):
        relative, position = index.slot(slot)
        offset = base + relative
        if offset == base and slot > 0:
            return  # the zero-filled tail of a preallocated index
        end = _slice_end(position, len(log_data), options.max_message_size, log)
        first = next(kafka_frames(log_data, log, position, end, first_rows=1), None)
        if first is None and slot == 0 and not any(index.data):
            # a running broker's new active segment: its index preallocated, nothing in it yet, and
            # no complete batch in the log (Kafka's tool fails on `.head` of no batches here)
            sink.index_empty(target)
            return
        if first is None:
            raise DataError(f"no complete batch at position {position} within --max-message-size "
                            f"{options.max_message_size} bytes (index entry {slot}, offset {offset})",
                            file=log.display, position=position, offset=offset)
        if first.last_offset != offset:
            sink.index_mismatch(target, offset, first.last_offset)
        if not options.verify_index_only:
            sink.index_entry(target, slot, offset, position)


def _offset_index_sanity_check(index: RawIndex, target: DumpTarget) -> None:
    last_offset = _offset_at(index, index.entries - 1)
    if last_offset < index.base_offset:
        raise DataError(f"Corrupt index found, index file ({target.absolute}) has non-zero size but the "
                        f"last offset is {last_offset} which is less than the base offset "
                        f"{index.base_offset}", file=target.display)
    if len(index.data) % OFFSET_ENTRY.size:
        raise DataError(f"Index file {target.absolute} is corrupt, found {len(index.data)} bytes which "
                        f"is neither positive nor a multiple of {OFFSET_ENTRY.size}", file=target.display)


def dump_time_index(target: DumpTarget, options: DumpOptions, sink: Sink) -> None:
    base = target.base_offset()
    sink.describe_file(target, "timeindex", baseOffset=base)
    log = _companion(target, ".log")
    offset_index = _companion(target, ".index")
    target.require()
    index = RawIndex(target.read_copy(), TIME_ENTRY, base)
    if options.index_sanity_check:
        _time_index_sanity_check(index, target)
        sink.sanity_check_passed(target)
        return
    offsets = RawIndex(offset_index.read_copy(), OFFSET_ENTRY, base)
    log_data = log.read_all()
    previous_timestamp = NO_TIMESTAMP
    for slot in range(index.entries):
        timestamp, relative = index.slot(slot)
        offset = base + relative
        if offset == base and slot > 0:
            return  # the zero-filled tail of a preallocated index
        position = lookup_position(offsets, offset)
        end = _slice_end(position, len(log_data), len(log_data), log)
        frames = kafka_frames(log_data, log, position, end, first_rows=1)
        batch = next((h for h in frames if h.last_offset >= offset), None)
        if batch is None:
            sink.offset_not_found(target, offset, -1)
        elif batch.last_offset != offset:
            sink.offset_not_found(target, offset, batch.last_offset)
        else:
            records = segment.decode(log_data, batch, log.display, LENIENT).records
            largest = max([NO_TIMESTAMP, *records.column("timestamp").to_pylist()])
            if largest != timestamp:
                sink.timestamp_mismatch(target, timestamp, largest)
            if previous_timestamp >= timestamp:
                sink.out_of_order_timestamp(target, timestamp, previous_timestamp)
        if not options.verify_index_only:
            sink.time_index_entry(target, slot, timestamp, offset)
        previous_timestamp = timestamp


def _time_index_sanity_check(index: RawIndex, target: DumpTarget) -> None:
    if index.entries:
        first_timestamp = index.slot(0)[0]
        last_timestamp, last_relative = index.slot(index.entries - 1)
        last_offset = index.base_offset + last_relative
        if last_timestamp < first_timestamp:
            raise DataError(f"Corrupt time index found, time index file ({target.absolute}) has non-zero "
                            f"size but the last timestamp is {last_timestamp} which is less than the "
                            f"first timestamp {first_timestamp}", file=target.display)
        if last_offset < index.base_offset:
            raise DataError(f"Corrupt time index found, time index file ({target.absolute}) has non-zero "
                            f"size but the last offset is {last_offset} which is less than the first "
                            f"offset {index.base_offset}", file=target.display)
    if len(index.data) % TIME_ENTRY.size:
        raise DataError(f"Time index file {target.absolute} is corrupt, found {len(index.data)} bytes "
                        f"which is neither positive nor a multiple of {TIME_ENTRY.size}",
                        file=target.display)
