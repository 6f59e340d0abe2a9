"""Legacy (v0/v1) batches to v2, by Kafka 4.0's own rules (docs/format.md §16.3, KAFKA-13093).

Kafka 4.0's log cleaner converts every legacy batch it touches; kfmt's upgrade applies the same rules
to whole logs so that the result is what a 4.0 broker would have written:
* one v2 batch per compressed wrapper (all its records), one single-record v2 batch per uncompressed
  legacy message (replicas stay batch-aligned); offsets preserved, gaps included;
* the codec is kept and re-encoded in v2 framing (LZ4 gets the correct header checksum);
* v0 becomes CreateTime with timestamp -1; v1 keeps its timestamp type; a LogAppendTime wrapper becomes
  a LogAppendTime batch whose maxTimestamp is the wrapper's timestamp;
* producer id/epoch/base sequence -1, not transactional, not control, partition leader epoch -1,
  no headers; keys and values (and their nullness) unchanged.

`rebatch=True` instead groups consecutive uncompressed legacy messages into larger v2 batches (smaller
output; offsets still preserved) -- not what a broker would write, so only on request.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from kfmt.format.layout import MAGIC_V2
from kfmt.format.model import Batch, BatchHeader, TimestampType, int64_values

if TYPE_CHECKING:
    import pyarrow as pa  # imported where used: not on the paths that hold no record columns


def v2_header_for(records: pa.RecordBatch, *, compression: int, timestamp_type: TimestampType,
                  log_append_time: int | None = None) -> BatchHeader:
    """The header of a converted batch holding `records` (at least one)."""
    offsets = records.column(0)
    timestamps = records.column(1)
    first, last = offsets[0].as_py(), offsets[len(offsets) - 1].as_py()
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        max_ts = log_append_time
    else:
        # numpy over the column's buffer: importing pyarrow.compute for this would cost an upgrade
        # a tenth of a second of start-up
        assert not timestamps.null_count  # RECORD_SCHEMA's timestamps are never null
        max_ts = int(int64_values(timestamps).max())
    return BatchHeader(magic=MAGIC_V2, base_offset=first, last_offset=last, compression=compression,
                       timestamp_type=timestamp_type, max_timestamp=max_ts,
                       base_timestamp=timestamps[0].as_py(), records_count=len(offsets))


def _v2_type(batch: Batch) -> TimestampType:
    # v0 carries no timestamp: 4.0 writes CreateTime with -1 rather than inventing an append time.
    if batch.header.timestamp_type == TimestampType.NO_TIMESTAMP_TYPE:
        return TimestampType.CREATE_TIME
    return batch.header.timestamp_type


def convert_batch(batch: Batch) -> tuple[BatchHeader, pa.RecordBatch]:
    """The v2 batch Kafka 4.0 makes of one decoded legacy entry."""
    h = batch.header
    ts_type = _v2_type(batch)
    lat = h.max_timestamp if ts_type == TimestampType.LOG_APPEND_TIME else None
    records = batch.records  # v0 timestamps are already -1: the reader resolves them so
    return v2_header_for(records, compression=h.compression, timestamp_type=ts_type,
                         log_append_time=lat), records


def convert_run(batches: list[Batch]) -> tuple[BatchHeader, pa.RecordBatch]:
    """One v2 batch for a run of consecutive uncompressed legacy messages of one timestamp type
    (the --rebatch mode). The caller forms runs with `rebatchable`."""
    import pyarrow as pa

    records = pa.Table.from_batches([b.records for b in batches]).combine_chunks().to_batches()[0]
    ts_type = _v2_type(batches[0])
    lat = max(b.header.max_timestamp for b in batches) if ts_type == TimestampType.LOG_APPEND_TIME else None
    return v2_header_for(records, compression=0, timestamp_type=ts_type, log_append_time=lat), records


def rebatchable(a: Batch, b: Batch) -> bool:
    """Whether b may join a's v2 batch in --rebatch mode: both uncompressed legacy messages with the
    same timestamp type (a LogAppendTime batch can only carry one time per batch)."""
    return (a.header.magic < MAGIC_V2 and b.header.magic < MAGIC_V2 and not a.header.compression
            and not b.header.compression and _v2_type(a) == _v2_type(b)
            and _v2_type(a) != TimestampType.LOG_APPEND_TIME)

