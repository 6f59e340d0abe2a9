"""The data model: a batch is its header facts plus its records as columns.

Records are never one Python object each: they are a `pyarrow.RecordBatch` with RECORD_SCHEMA
(offset, timestamp, key, value, headers), the shape Parquet, Spark and compaction want anyway.
Timestamps in the record columns are already resolved the way a Kafka consumer reports them
(docs/format.md §3.5, §4.3): LogAppendTime batches give every record the batch's time, v0 gives -1.

Header keys are kept as raw bytes (lossless); they are decoded as UTF-8 only for display.
"""
from __future__ import annotations

import enum
import functools
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pyarrow as pa

NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
INT32_MAX = 2**31 - 1


class TimestampType(enum.IntEnum):
    NO_TIMESTAMP_TYPE = -1
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1

    @property
    def java_name(self) -> str:
        """The name Kafka's Java classes print (kafka-dump-log, the consumer's TimestampType)."""
        return _JAVA_NAMES[self]

    @classmethod
    def from_java_name(cls, name: str) -> "TimestampType":
        return {v: k for k, v in _JAVA_NAMES.items()}[name]


_JAVA_NAMES = {
    TimestampType.NO_TIMESTAMP_TYPE: "NoTimestampType",
    TimestampType.CREATE_TIME: "CreateTime",
    TimestampType.LOG_APPEND_TIME: "LogAppendTime",
}

# The Arrow types are built on first use (module __getattr__): pyarrow is about 20 ms of a command's
# start, and the paths that never hold record columns (the legacy upgrade's kernels, byte-for-byte
# copies) do not import it.
@functools.cache
def _arrow_types() -> dict:
    import pyarrow as pa

    header_type = pa.list_(pa.struct([pa.field("key", pa.binary(), nullable=False),
                                      pa.field("value", pa.binary())]))
    schema = pa.schema([
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("timestamp", pa.int64(), nullable=False),
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("headers", header_type, nullable=False),
    ])
    # not make_records([], ...): pa.array over a Python list imports pandas (about 0.3 s) to see
    # whether the list is a pandas object
    empty = pa.RecordBatch.from_arrays([pa.nulls(0, f.type) for f in schema], schema=schema)
    return {"HEADER_TYPE": header_type, "RECORD_SCHEMA": schema, "EMPTY_RECORDS": empty}


def __getattr__(name: str):
    """HEADER_TYPE, RECORD_SCHEMA and EMPTY_RECORDS, built on first use (_arrow_types)."""
    types = _arrow_types() if name in ("HEADER_TYPE", "RECORD_SCHEMA", "EMPTY_RECORDS") else {}
    if name not in types:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return types[name]


def make_records(offsets, timestamps, keys, values, headers=None) -> pa.RecordBatch:
    """Build record columns from Python sequences (headers: lists of (key bytes, value bytes|None))."""
    import pyarrow as pa

    n = len(offsets)
    if headers is None:
        headers = [[] for _ in range(n)]
    return pa.RecordBatch.from_arrays([
        pa.array(offsets, pa.int64()),
        pa.array(timestamps, pa.int64()),
        pa.array(keys, pa.binary()),
        pa.array(values, pa.binary()),
        pa.array(headers, _arrow_types()["HEADER_TYPE"]),
    ], schema=_arrow_types()["RECORD_SCHEMA"])


def int64_values(column: pa.Array) -> np.ndarray:
    """A null-free int64 column's values as numpy, without copies. Not pyarrow's to_numpy: it imports
    pandas (0.3 CPU s of start-up, as pa.array does) where numpy over the buffer does the same."""
    return np.frombuffer(column.buffers()[1], dtype=np.int64, count=len(column), offset=column.offset * 8)


def boolean_array(mask: np.ndarray) -> pa.Array:
    """A numpy mask as an Arrow boolean array (for RecordBatch.filter), without pa.array, which
    imports pandas as to_numpy does."""
    import pyarrow as pa

    bits = np.packbits(np.asarray(mask, dtype=bool), bitorder="little")
    return pa.Array.from_buffers(pa.bool_(), len(mask), [None, pa.py_buffer(bits)])


@dataclass(slots=True)
class BatchHeader:
    """What a batch's header says; for legacy data, what the (wrapper) message says.

    A scan of a segment yields these from the header bytes alone (no decompression). A legacy
    compressed wrapper's base offset and record count are only known after decompression
    (docs/format.md §3.4): they stay None until the batch is decoded.
    """

    magic: int
    base_offset: int | None
    last_offset: int
    compression: int = 0
    timestamp_type: TimestampType = TimestampType.CREATE_TIME
    max_timestamp: int = NO_TIMESTAMP
    base_timestamp: int = NO_TIMESTAMP  # v2 only; holds the delete horizon when that flag is set
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    base_sequence: int = NO_SEQUENCE
    records_count: int | None = None
    is_transactional: bool = False
    is_control: bool = False
    has_delete_horizon: bool = False
    attributes: int = 0  # as stored (the bits above are decoded from it)
    # Where the batch sits in its file; None for batches built in memory.
    position: int | None = None
    size: int | None = None  # whole entry, including the 12-byte log overhead
    crc: int | None = None  # as stored

    @property
    def next_offset(self) -> int:
        # Never base + count: compaction leaves gaps and empty batches (docs/format.md §4.7).
        return self.last_offset + 1

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return increment_sequence(self.base_sequence, self.last_offset - (self.base_offset or 0))

    @property
    def delete_horizon_ms(self) -> int | None:
        return self.base_timestamp if self.has_delete_horizon else None

    @property
    def has_producer_id(self) -> bool:
        # AbstractRecordBatch.hasProducerId: NO_PRODUCER_ID < producerId (a negative id is none)
        return self.producer_id > NO_PRODUCER_ID

    def replace(self, **changes) -> "BatchHeader":
        return replace(self, **changes)


def increment_sequence(sequence: int, increment: int) -> int:
    """Sequence numbers wrap from INT32_MAX to 0 (DefaultRecordBatch.incrementSequence)."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


@dataclass(slots=True, frozen=True)
class LegacyMessageInfo:
    """Per-message facts of a v0/v1 message that the record columns do not carry.

    kafka-dump-log prints them (`isValid`, `crc`) and verify checks them; inner messages of a
    compressed wrapper have their own magic (KAFKA-4298 mixed magic), attributes and CRC.
    """

    magic: int
    attributes: int
    crc: int
    crc_valid: bool
    stored_timestamp: int  # as stored in the message (before any wrapper override); -1 for v0


@dataclass(slots=True)
class Batch:
    """A decoded batch: header facts plus record columns (plus legacy per-message facts)."""

    header: BatchHeader
    records: pa.RecordBatch = field(default_factory=lambda: _arrow_types()["EMPTY_RECORDS"])
    legacy: list[LegacyMessageInfo] | None = None
    crc_valid: bool = True

    def __len__(self) -> int:
        return self.records.num_rows
