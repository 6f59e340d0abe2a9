"""Records as export rows: Spark's Kafka source columns, then kfmt's on-disk columns.

The first eight columns are exactly those of Spark's Kafka source (`KafkaRecordToRowConverter` with
includeHeaders=true): key, value, topic, partition, offset, timestamp (Kafka's milliseconds as a
microsecond timestamp), timestampType (the Java enum's id: -1 none, 0 CreateTime, 1 LogAppendTime),
headers (null for a record without headers, as Spark gives it; header keys decoded as Java's
`new String(bytes, UTF_8)` decodes them, kfmt.format.javatext). So anything written against that source runs
on kfmt's output. The rest say where each record lived on disk, and keep what those columns cannot:
`timestamp_ms` (the stored milliseconds) and `header_key_bytes` (the stored bytes of every header key
of a record, only for records with a header key that is not valid UTF-8, whose string is lossy).
Keys, values and header values are the stored bytes.

`rows_to_records` goes back from rows to kfmt's record columns (kfmt.format.model.RECORD_SCHEMA), so that
the content digest (kfmt.format.digest) of the exported rows can be compared with the digest of what
was read.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kfmt.errors import DataError
from kfmt.format.layout import ATTR_TRANSACTIONAL, MAGIC_V2
from kfmt.format.javatext import java_string
from kfmt.format.model import EMPTY_RECORDS, RECORD_SCHEMA, Batch
from kfmt.plugin import registry

HEADERS_TYPE = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))
SPARK_KAFKA_FIELDS = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    pa.field("timestampType", pa.int32()),
    pa.field("headers", HEADERS_TYPE),
]
ON_DISK_FIELDS = [
    pa.field("timestamp_ms", pa.int64()),  # the stored milliseconds (-1 for none), lossless
    pa.field("magic", pa.int8()),
    pa.field("compression", pa.string()),
    pa.field("batch_base_offset", pa.int64()),
    pa.field("batch_last_offset", pa.int64()),
    pa.field("partition_leader_epoch", pa.int32()),
    pa.field("producer_id", pa.int64()),
    pa.field("producer_epoch", pa.int16()),
    pa.field("sequence", pa.int32()),  # the record's sequence number, -1 when none
    pa.field("is_transactional", pa.bool_()),
    pa.field("is_control", pa.bool_()),
    pa.field("segment_base_offset", pa.int64()),
    pa.field("file_position", pa.int64()),  # of the record's batch (legacy: wrapper) in its segment
    pa.field("header_key_bytes", pa.list_(pa.binary())),  # null unless a header key is not UTF-8
]
EXPORT_SCHEMA = pa.schema(SPARK_KAFKA_FIELDS + ON_DISK_FIELDS)
# Spark's DDL for the same schema (Python data sources declare theirs as a string).
EXPORT_DDL = (
    "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
    "timestampType int, headers array<struct<key:string,value:binary>>, timestamp_ms long, "
    "magic byte, compression string, batch_base_offset long, batch_last_offset long, "
    "partition_leader_epoch int, producer_id long, producer_epoch short, sequence int, "
    "is_transactional boolean, is_control boolean, segment_base_offset long, file_position long, "
    "header_key_bytes array<binary>")
DATE_FIELD = pa.field("date", pa.date32())  # the directory level of exports partitioned by date
MS_PER_DAY = 86_400_000
# Spark's timestamps are int64 microseconds: milliseconds beyond this do not fit (Spark's own Kafka
# source fails on them too: DateTimeUtils.millisToMicros uses Math.multiplyExact).
MAX_MICROS_MS = (2**63 - 1) // 1000

_BATCH_COLUMNS = ("magic", "compression", "batch_base_offset", "batch_last_offset",
                  "partition_leader_epoch", "producer_id", "producer_epoch", "is_transactional",
                  "is_control", "segment_base_offset", "file_position", "timestampType")


def concat_records(pieces: list[pa.RecordBatch]) -> pa.RecordBatch:
    """Record columns (RECORD_SCHEMA) of several blocks as one."""
    if len(pieces) == 1:
        return pieces[0]
    table = pa.Table.from_batches(pieces, RECORD_SCHEMA).combine_chunks()
    return table.to_batches()[0] if table.num_rows else EMPTY_RECORDS


def export_batch(batches: list[tuple[Batch, int]], topic: str, partition: int,
                 records: pa.RecordBatch | None = None) -> pa.RecordBatch:
    """Rows for the records of several (batch, segment base offset) pairs, in order (`records`:
    theirs concatenated, when the caller has them already).

    Batch-level facts are gathered once per batch and spread over its records with one `take`, so
    the cost per record stays in Arrow, not in Python.
    """
    codec_name = registry.get().codec_name
    counts = np.fromiter((len(b) for b, _ in batches), dtype=np.int64, count=len(batches))
    cols = {name: [] for name in _BATCH_COLUMNS}
    base_sequences = []
    for batch, segment_base in batches:
        h = batch.header
        cols["magic"].append(h.magic)
        cols["compression"].append(codec_name(h.compression))
        cols["batch_base_offset"].append(h.base_offset)
        cols["batch_last_offset"].append(h.last_offset)
        cols["partition_leader_epoch"].append(h.partition_leader_epoch)
        cols["producer_id"].append(h.producer_id)
        cols["producer_epoch"].append(h.producer_epoch)
        cols["is_transactional"].append(h.is_transactional)
        cols["is_control"].append(h.is_control)
        cols["segment_base_offset"].append(segment_base)
        cols["file_position"].append(h.position)
        cols["timestampType"].append(int(h.timestamp_type))
        base_sequences.append(h.base_sequence)
    types = {f.name: f.type for f in EXPORT_SCHEMA}
    facts = {name: pa.array(values, types[name]) for name, values in cols.items()}
    if records is None:
        records = concat_records([b.records for b, _ in batches])
    return _export_rows(records, facts, np.asarray(base_sequences, dtype=np.int64), counts, topic,
                        partition)


def export_frames(records: pa.RecordBatch, rows: np.ndarray, segment_base: int, topic: str,
                  partition: int, counts: np.ndarray | None = None,
                  base_offsets: np.ndarray | None = None) -> pa.RecordBatch:
    """export_batch for a run of entries decoded as one column block, `counts[i]` records for entry i
    (by default: uncompressed entries, one record per v0/v1 message, records_count per v2 batch:
    kfmt.format.legacy_runs.decode_run, kfmt.format.batch_runs.decode_run) with the base offsets
    decode gives (by default the rows'; a compressed wrapper's is its first inner offset:
    kfmt.format.inflated_runs). The batch facts come from the rows of frames (kfmt.format.frames),
    no object per entry."""
    types = {f.name: f.type for f in EXPORT_SCHEMA}
    n = len(rows)
    v2 = rows["magic"] >= MAGIC_V2
    if counts is None:
        counts = np.where(v2, rows["records_count"], 1)
    if base_offsets is None:
        base_offsets = rows["base_offset"]
    facts = {
        "magic": pa.array(rows["magic"], types["magic"]),
        "compression": _codec_names(rows["compression"], n),
        "batch_base_offset": pa.array(base_offsets, types["batch_base_offset"]),
        "batch_last_offset": pa.array(rows["last_offset"], types["batch_last_offset"]),
        "partition_leader_epoch": pa.array(rows["partition_leader_epoch"], types["partition_leader_epoch"]),
        "producer_id": pa.array(rows["producer_id"], types["producer_id"]),
        "producer_epoch": pa.array(rows["producer_epoch"], types["producer_epoch"]),
        "is_transactional": pa.array(v2 & (rows["attributes"] & ATTR_TRANSACTIONAL != 0)),
        "is_control": pa.array(np.zeros(n, dtype=bool)),
        "segment_base_offset": pa.array(np.full(n, segment_base, dtype=np.int64)),
        "file_position": pa.array(rows["position"], types["file_position"]),
        "timestampType": pa.array(rows["timestamp_type"].astype(np.int32), types["timestampType"]),
    }
    return _export_rows(records, facts, rows["base_sequence"].astype(np.int64),
                        np.asarray(counts, np.int64), topic, partition)


def _codec_names(codecs: np.ndarray, n: int) -> pa.Array:
    """The `compression` column for entries with these codec ids (a few distinct values)."""
    codec_name = registry.get().codec_name
    kinds = np.unique(codecs)
    if len(kinds) == 1:
        return pa.repeat(pa.scalar(codec_name(int(kinds[0])), pa.string()), n)
    names = pa.array([codec_name(int(k)) for k in kinds], pa.string())
    return pc.take(names, pa.array(np.searchsorted(kinds, codecs)))


def _export_rows(records: pa.Table | pa.RecordBatch, facts: dict, base_sequences: np.ndarray,
                 counts: np.ndarray, topic: str, partition: int) -> pa.RecordBatch:
    """The export rows of `records`, whose batches hold `counts` records each and have the batch
    facts `facts` (one value per batch, by export column name) and base sequences."""
    take = pa.array(np.repeat(np.arange(len(counts)), counts))
    spread = {name: pc.take(values, take) for name, values in facts.items()}
    n = records.num_rows
    offsets = _column(records, "offset")
    timestamps = _column(records, "timestamp")
    _check_timestamps(timestamps, offsets, facts["file_position"], counts)
    # sequence = incrementSequence(baseSequence, offset - baseOffset), -1 without a producer
    base_seq = np.repeat(base_sequences, counts)
    delta = offsets.to_numpy() - np.repeat(
        facts["batch_base_offset"].to_numpy(zero_copy_only=False).astype(np.int64), counts)
    sequence = np.where(base_seq < 0, -1, (base_seq + delta) % (2**31))
    headers, header_key_bytes = _spark_headers(_column(records, "headers"))
    return pa.RecordBatch.from_arrays([
        _column(records, "key"),
        _column(records, "value"),
        pa.repeat(pa.scalar(topic, pa.string()), n),  # in Arrow: not n Python references
        pa.array(np.full(n, partition, dtype=np.int32)),
        offsets,
        pc.multiply(timestamps, 1000).cast(pa.timestamp("us", tz="UTC")),
        spread["timestampType"],
        headers,
        timestamps,
        spread["magic"], spread["compression"], spread["batch_base_offset"],
        spread["batch_last_offset"], spread["partition_leader_epoch"], spread["producer_id"],
        spread["producer_epoch"], pa.array(sequence.astype(np.int32)), spread["is_transactional"],
        spread["is_control"], spread["segment_base_offset"], spread["file_position"],
        header_key_bytes,
    ], schema=EXPORT_SCHEMA)


def _column(records: pa.Table | pa.RecordBatch, name: str) -> pa.Array:
    column = records.column(name)
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


def _check_timestamps(timestamps: pa.Array, offsets: pa.Array, positions: pa.Array, counts) -> None:
    ms = timestamps.to_numpy()
    bad = np.flatnonzero((ms > MAX_MICROS_MS) | (ms < -MAX_MICROS_MS))
    if len(bad):
        row = int(bad[0])
        batch = int(np.searchsorted(np.cumsum(counts), row, side="right"))
        raise DataError(f"timestamp {int(ms[row])} ms is out of the range of Spark's timestamp type "
                        f"(+-{MAX_MICROS_MS} ms)", position=positions[batch].as_py(),
                        offset=offsets[row].as_py())


def _spark_headers(headers: pa.ListArray) -> tuple[pa.ListArray, pa.ListArray]:
    """(headers with string keys, null for a record without headers; the stored key bytes of the
    records whose keys are not all valid UTF-8, null for the others)."""
    n = len(headers)
    lengths = pc.list_value_length(headers).fill_null(0).to_numpy()
    offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))
    flat = pc.list_flatten(headers)
    keys, values = flat.field("key"), flat.field("value")
    text, invalid = _java_strings(keys)
    entries = pa.StructArray.from_arrays([text, values], fields=list(HEADERS_TYPE.value_type))
    spark = pa.ListArray.from_arrays(offsets, entries, type=HEADERS_TYPE, mask=pa.array(lengths == 0))
    raw_type = EXPORT_SCHEMA.field("header_key_bytes").type
    if invalid is None:
        return spark, pa.nulls(n, raw_type)
    lossy = np.zeros(n, dtype=bool)
    lossy[np.repeat(np.arange(n), lengths)[invalid]] = True
    raw = pa.ListArray.from_arrays(offsets, keys.cast(pa.binary()), type=raw_type, mask=pa.array(~lossy))
    return spark, raw


def _java_strings(keys: pa.Array) -> tuple[pa.Array, np.ndarray | None]:
    """Header keys as Java decodes them, and which were not valid UTF-8 (None when all were)."""
    try:
        return keys.cast(pa.string()), None  # validates UTF-8 at C speed
    except pa.ArrowInvalid:
        pass
    text, invalid = [], np.zeros(len(keys), dtype=bool)
    for i, key in enumerate(keys.to_pylist()):
        try:
            text.append(key.decode("utf-8"))
        except UnicodeDecodeError:
            text.append(java_string(key))
            invalid[i] = True
    return pa.array(text, pa.string()), invalid


def record_dates(rows: pa.RecordBatch | pa.Table) -> np.ndarray:
    """The UTC date of each row's exported `timestamp` (what Spark's `to_date(timestamp)` gives in a
    UTC session), as days since the epoch. A record without a timestamp (v0) is exported with -1 ms,
    as Kafka's consumer reports it, so it falls on 1969-12-31 like its `timestamp` column: a null date
    (`__HIVE_DEFAULT_PARTITION__`) would be more literal, but pandas cannot read such a directory
    ("Cannot yet unify dictionaries with nulls"), and `timestampType` -1 already says there is none."""
    ms = rows.column("timestamp_ms")
    if isinstance(ms, pa.ChunkedArray):
        ms = ms.combine_chunks()
    return np.floor_divide(ms.to_numpy(), MS_PER_DAY).astype(np.int32)


def rows_to_records(rows: pa.RecordBatch | pa.Table) -> pa.RecordBatch:
    """kfmt's record columns (RECORD_SCHEMA) from export rows: the stored bytes of keys, values and
    header keys, the timestamp from the Spark `timestamp` column. Raises ValueError if a timestamp
    is not a whole number of milliseconds (kfmt never writes one)."""
    if isinstance(rows, pa.Table):
        rows = rows.combine_chunks().to_batches()[0] if rows.num_rows else \
            pa.RecordBatch.from_pylist([], rows.schema)
    micros = rows.column("timestamp").cast(pa.int64()).to_numpy(zero_copy_only=False)
    if np.any(micros % 1000):
        raise ValueError("a timestamp is not a whole number of milliseconds")
    headers = rows.column("headers")
    lengths = pc.list_value_length(headers).fill_null(0).to_numpy()
    flat = pc.list_flatten(headers)
    keys = flat.field("key").cast(pa.binary())
    raw = rows.column("header_key_bytes")
    if raw.null_count < len(raw):  # rows whose keys are only right in their stored bytes
        key_list = keys.to_pylist()
        starts = np.concatenate([[0], np.cumsum(lengths)])
        for row, stored in enumerate(raw.to_pylist()):
            if stored is not None:
                key_list[starts[row]:starts[row] + lengths[row]] = stored
        keys = pa.array(key_list, pa.binary())
    offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))
    entries = pa.StructArray.from_arrays([keys, flat.field("value")],
                                         fields=list(RECORD_SCHEMA.field("headers").type.value_type))
    return pa.RecordBatch.from_arrays([
        rows.column("offset"),
        pa.array(micros // 1000, pa.int64()),
        rows.column("key"),
        rows.column("value"),
        pa.ListArray.from_arrays(offsets, entries, type=RECORD_SCHEMA.field("headers").type),
    ], schema=RECORD_SCHEMA)
