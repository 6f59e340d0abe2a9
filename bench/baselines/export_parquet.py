"""The export baseline: what a user would script instead of `kfmt export` -- decode every segment with
aiokafka's record readers (CRCs checked, as Kafka consumers do by default), build Spark's Kafka source
columns (key, value, topic, partition, offset, timestamp, timestampType, headers) with pyarrow and write
one Parquet file per segment into Hive-style topic=/partition=/ directories; one process per core.

    python bench/baselines/export_parquet.py SRC DST [--processes N]
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import sys

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import logs  # noqa: E402

HEADERS = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))
SCHEMA = pa.schema([
    pa.field("key", pa.binary()), pa.field("value", pa.binary()), pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()), pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.timestamp("us", tz="UTC")), pa.field("timestampType", pa.int32()),
    pa.field("headers", HEADERS),
])


def export_segment(task: tuple) -> int:
    topic, partition, segment, dst = task
    with open(segment, "rb") as f:
        data = f.read()
    keys, values, offsets, stamps, types, headers = [], [], [], [], [], []
    for batch, _ in logs.batches(data):
        if not batch.validate_crc():
            raise SystemExit(f"{segment}: CRC mismatch")
        if getattr(batch, "is_control_batch", False):
            continue
        for r in batch:
            keys.append(r.key)
            values.append(r.value)
            offsets.append(r.offset)
            ts = r.timestamp
            stamps.append(None if ts is None or ts < 0 else ts * 1000)
            t = r.timestamp_type
            types.append(-1 if t is None else t)
            headers.append(r.headers)
    n = len(offsets)
    table = pa.Table.from_arrays([
        pa.array(keys, pa.binary()), pa.array(values, pa.binary()),
        pa.array([topic] * n, pa.string()), pa.array([partition] * n, pa.int32()),
        pa.array(offsets, pa.int64()), pa.array(stamps, pa.int64()).cast(SCHEMA.field("timestamp").type),
        pa.array(types, pa.int32()), pa.array(headers, HEADERS)], schema=SCHEMA)
    out = os.path.join(dst, f"topic={topic}", f"partition={partition}")
    os.makedirs(out, exist_ok=True)
    pq.write_table(table, os.path.join(out, os.path.basename(segment)[:-4] + ".parquet"))
    return n


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("src")
    p.add_argument("dst")
    p.add_argument("--topic-prefix", default="")
    p.add_argument("--processes", type=int, default=os.cpu_count())
    args = p.parse_args(argv)
    tasks = [(topic, partition, seg, args.dst)
             for topic, partition, path in logs.partitions(args.src, args.topic_prefix)
             for seg in logs.segments(path)]
    tasks.sort(key=lambda t: -os.path.getsize(t[2]))  # the biggest first, so the processes finish together
    with multiprocessing.get_context("fork").Pool(args.processes) as pool:
        records = sum(pool.imap_unordered(export_segment, tasks))
    print(f"exported {records} records from {len(tasks)} segments")
    return 0


if __name__ == "__main__":
    sys.exit(main())
