"""Records as export rows: Spark's Kafka source columns, then kfmt's on-disk columns.

The first eight columns are exactly those of Spark's Kafka source (key, value, topic, partition,
offset, timestamp, timestampType, headers), so anything written against that source runs on kfmt's
output; the rest say where each record lived on disk. Keys, values and header values are the stored
bytes; header keys are strings as Spark (and Java) decode them.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kfmt import registry
from kfmt.model import Batch

SPARK_KAFKA_FIELDS = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    pa.field("timestampType", pa.int32()),
    pa.field("headers", pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))),
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
    pa.field("file_position", pa.int64()),  # of the record's batch in its segment file
]
EXPORT_SCHEMA = pa.schema(SPARK_KAFKA_FIELDS + ON_DISK_FIELDS)
# Spark's DDL for the same schema (Python data sources declare theirs as a string).
EXPORT_DDL = (
    "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
    "timestampType int, headers array<struct<key:string,value:binary>>, timestamp_ms long, "
    "magic byte, compression string, batch_base_offset long, batch_last_offset long, "
    "partition_leader_epoch int, producer_id long, producer_epoch short, sequence int, "
    "is_transactional boolean, is_control boolean, segment_base_offset long, file_position long")

_BATCH_COLUMNS = ("magic", "compression", "batch_base_offset", "batch_last_offset",
                  "partition_leader_epoch", "producer_id", "producer_epoch", "is_transactional",
                  "is_control", "segment_base_offset", "file_position", "timestampType")


def export_batch(batches: list[tuple[Batch, int]], topic: str, partition: int) -> pa.RecordBatch:
    """Rows for the records of several (batch, segment base offset) pairs, in order.

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
    take = pa.array(np.repeat(np.arange(len(batches)), counts))
    types = {f.name: f.type for f in EXPORT_SCHEMA}
    spread = {name: pc.take(pa.array(values, types[name]), take) for name, values in cols.items()}
    records = pa.Table.from_batches([b.records for b, _ in batches]).combine_chunks()
    n = records.num_rows
    offsets = records.column("offset")
    timestamps = records.column("timestamp")
    # sequence = incrementSequence(baseSequence, offset - baseOffset), -1 without a producer
    base_seq = np.repeat(np.asarray(base_sequences, dtype=np.int64), counts)
    delta = offsets.to_numpy() - np.repeat(np.asarray(cols["batch_base_offset"], dtype=np.int64), counts)
    sequence = np.where(base_seq < 0, -1, (base_seq + delta) % (2**31))
    headers = records.column("headers").combine_chunks()
    return pa.RecordBatch.from_arrays([
        records.column("key").combine_chunks(),
        records.column("value").combine_chunks(),
        pa.array([topic] * n, pa.string()) if n else pa.array([], pa.string()),
        pa.array(np.full(n, partition, dtype=np.int32)),
        offsets.combine_chunks(),
        pc.multiply(timestamps.combine_chunks(), 1000).cast(pa.timestamp("us", tz="UTC")),
        spread["timestampType"],
        _string_header_keys(headers),
        timestamps.combine_chunks(),
        spread["magic"], spread["compression"], spread["batch_base_offset"],
        spread["batch_last_offset"], spread["partition_leader_epoch"], spread["producer_id"],
        spread["producer_epoch"], pa.array(sequence.astype(np.int32)), spread["is_transactional"],
        spread["is_control"], spread["segment_base_offset"], spread["file_position"],
    ], schema=EXPORT_SCHEMA)


def _string_header_keys(headers: pa.ListArray) -> pa.ListArray:
    """Header keys as strings; bytes that are not UTF-8 become U+FFFD, as Java decodes them."""
    keys = headers.values.field("key")
    try:
        as_text = keys.cast(pa.string())  # validates UTF-8
    except pa.ArrowInvalid:
        as_text = pa.array([k.decode("utf-8", "replace") for k in keys.to_pylist()], pa.string())
    struct = pa.StructArray.from_arrays([as_text, headers.values.field("value")],
                                        fields=list(EXPORT_SCHEMA.field("headers").type.value_type))
    return pa.ListArray.from_arrays(headers.offsets, struct)
