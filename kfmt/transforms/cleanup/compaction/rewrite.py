"""Rebuilding a batch that lost records, gained a delete horizon or changes format (docs/format.md §4.7,
§16.3; Kafka's `MemoryRecords.buildRetainedRecordsInto`, `DefaultRecordBatch.writeEmptyHeader`).

The results are decoded batches (header facts + record columns) that the partition writer encodes
through the format plugins: the codec of the original batch at its default level, CRCs and sizes
computed there.

* v2, records kept: same base offset and *last offset* (so the producer's last sequence survives),
  same producer id/epoch/base sequence, transactional and control flags, partition leader epoch,
  codec and timestamp type; the base timestamp is the delete horizon when one is stamped (attribute
  bit 0x40), else the first kept record's timestamp, and record timestamp deltas are recomputed
  against it; the max timestamp is the kept records' maximum (LogAppendTime: the batch's time).
* v2, no record kept but the batch must stay: a 61-byte header with no records: codec none, base
  timestamp -1, the original max timestamp and offsets, no delete horizon.
* v0/v1 under Kafka 4.0: one v2 batch of the kept records by kfmt.format.convert's rules (base offset the
  first kept record's, last offset the last kept one's, v0 -> CreateTime -1, producer fields and
  leader epoch -1, the legacy codec), with the delete horizon if one is stamped.
* v0/v1 under Kafka 3.x (`keep_format`): a wrapper of the same magic and codec holding the kept
  messages (wrapper offset the last kept one's, v1 inner offsets relative to the first kept).
"""
from __future__ import annotations

import numpy as np

from kfmt.format.convert import convert_batch
from kfmt.format.layout import MAGIC_V2
from kfmt.format.model import (
    EMPTY_RECORDS,
    NO_TIMESTAMP,
    Batch,
    BatchHeader,
    TimestampType,
    boolean_array,
    int64_values,
)


def retained_batch(batch: Batch, retained: np.ndarray, delete_horizon: int | None,
                   convert_legacy: bool) -> Batch:
    records = batch.records.filter(boolean_array(retained))
    header = batch.header
    if header.magic < MAGIC_V2 and convert_legacy:
        converted, records = convert_batch(Batch(header, records))
        if delete_horizon is not None:
            converted = converted.replace(base_timestamp=delete_horizon, has_delete_horizon=True)
        return Batch(converted, records)
    if header.magic < MAGIC_V2:
        offsets = records.column(0)
        return Batch(_fresh(header, base_offset=offsets[0].as_py(),
                            last_offset=offsets[len(offsets) - 1].as_py(),
                            records_count=len(records)), records)
    timestamps = int64_values(records.column(1))  # no copy, no compute call per batch, no pandas
    if header.timestamp_type == TimestampType.LOG_APPEND_TIME:
        max_timestamp = header.max_timestamp
    else:
        max_timestamp = int(timestamps.max())
    base_timestamp = int(timestamps[0]) if delete_horizon is None else delete_horizon
    return Batch(_fresh(header, base_timestamp=base_timestamp, max_timestamp=max_timestamp,
                        has_delete_horizon=delete_horizon is not None, records_count=len(records)),
                 records)


def empty_batch(header: BatchHeader) -> Batch:
    return Batch(_fresh(header, compression=0, base_timestamp=NO_TIMESTAMP, has_delete_horizon=False,
                        records_count=0), EMPTY_RECORDS)


def _fresh(header: BatchHeader, **changes) -> BatchHeader:
    """The header with the given facts changed and the ones of the old bytes forgotten."""
    return header.replace(position=None, size=None, crc=None, **changes)
