"""The `kafka-log` data source on a narrow window of a big partition: bytes read and wall time with
Spark's filter pushdown (kfmt/pipelines/pushdown.py) against a full scan, in one run.

    bin/kfmt --version && .venv/bin/python bench/narrow_window.py [--size 2G] [--root /tmp/kfmt-bench]
        [--hours 0,12,23] [--master local[2]] [--path PARTITION_DIR]

The input (generated on first use under --root, then reused) is one partition of producer-shaped lz4
batches (bench/producer_logs.py, aiokafka's builders) spanning a day of record time, 128 MiB segments,
indexed by `kfmt reindex`; its producers' clocks are skewed now and then, so timestamps are out of
order in places. For each hour asked, the query is

    spark.read.format("kafka-log").load(PATH).filter("timestamp >= A and timestamp < B").count()

with pushdown (the default) and with `pushFilters=false` (every byte read, Spark filters), and the
same window as Kafka range options (`startingTimestamp` / `endingTimestamp`: ListOffsets semantics,
an offset range, which is not the same query when timestamps are out of order). Bytes read are
counted at kfmt's store (Storage.read/map) by running the same reader in this process; wall times
are Spark's, session started before timing.
"""
from __future__ import annotations

import argparse
import datetime
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import producer_logs  # noqa: E402

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS


def dataset(root: str, size: int) -> str:
    """The partition directory (generated on first use)."""
    dst = os.path.join(root, f"day-{producer_logs.size_name(size)}-lz4-p1-indexed")
    if not os.path.isdir(dst):
        os.makedirs(root, exist_ok=True)
        print(f"narrow_window: generating {dst}", file=sys.stderr, flush=True)
        producer_logs.generate(dst, size, shapes=["v2-lz4"], partitions=1, span_ms=DAY_MS,
                               segment_bytes=128 << 20, reindex=True)
    return os.path.join(dst, "v2-lz4-0")


class StoreBytes:
    """Bytes kfmt's stores hand out in this process."""

    def __init__(self):
        from kfmt.storage.store import Storage

        self.total = 0
        for method in ("read", "map"):
            original = getattr(Storage, method)

            def counted(storage, *args, _original=original, **kwargs):
                data = _original(storage, *args, **kwargs)
                self.total += len(data)
                return data

            setattr(Storage, method, counted)


def direct_read(path: str, counter: StoreBytes, filters: list, options: dict) -> tuple[int, int]:
    """(rows, bytes read) of the reader Spark's tasks run, planned with these pushed filters."""
    from kfmt.pipelines.datasource import KafkaLogDataSource

    source = type("Source", (KafkaLogDataSource,), {"filter_pushdown": True})({"path": path, **options})
    reader = source.reader(None)
    before = counter.total
    if hasattr(reader, "pushFilters"):
        list(reader.pushFilters(filters))
    rows = sum(b.num_rows for unit in reader.partitions() for b in reader.read(unit))
    return rows, counter.total - before


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", type=producer_logs.parse_size, default=producer_logs.parse_size("2G"))
    p.add_argument("--root", default="/tmp/kfmt-bench")
    p.add_argument("--hours", default="0,12,23", help="which hours of the day to query (0,12,23)")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--path", help="query this partition directory instead of the generated one")
    args = p.parse_args(argv)
    from pyspark.sql import datasource as ds

    from kfmt.pipelines.datasource import register
    from kfmt.pipelines.session import spark_session

    path = args.path or dataset(args.root, args.size)
    counter = StoreBytes()
    spark = spark_session(args.master)
    register(spark)
    utc = datetime.timezone.utc

    def timed(df) -> tuple[int, float]:
        t = time.perf_counter()
        n = df.count()
        return n, time.perf_counter() - t

    base = spark.read.format("kafka-log")
    full_rows, full_bytes = direct_read(path, counter, [], {})
    full_n, full_s = timed(base.load(path))
    assert full_n == full_rows
    print(f"input: {path}, {full_bytes / 1e6:.0f} MB read by a full scan, {full_rows} records, "
          f"full scan count(): {full_s:.1f} s ({full_bytes / 1e6 / full_s:.0f} MB/s)", flush=True)
    table = ["| query | rows | bytes read | share of bytes | wall (s) | vs full scan |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for hour in (int(h) for h in args.hours.split(",")):
        a = producer_logs.BASE_TIMESTAMP + hour * HOUR_MS
        b = a + HOUR_MS
        window = f"timestamp >= timestamp_millis({a}) and timestamp < timestamp_millis({b})"
        filters = [ds.GreaterThanOrEqual(("timestamp",), datetime.datetime.fromtimestamp(a / 1000, utc)),
                   ds.LessThan(("timestamp",), datetime.datetime.fromtimestamp(b / 1000, utc))]
        cases = [
            (f"hour {hour}, pushFilters=false", {"pushFilters": "false"}, []),
            (f"hour {hour}, pushdown", {}, filters),
            (f"hour {hour}, startingTimestamp/endingTimestamp + filter", {
                "startingTimestamp": str(a), "endingTimestamp": str(b)}, filters),
        ]
        counts = set()
        for label, options, pushed in cases:
            _, read = direct_read(path, counter, pushed, options)
            df = base
            for k, v in options.items():
                df = df.option(k, v)
            n, seconds = timed(df.load(path).filter(window))
            if "Timestamp" not in label:
                counts.add(n)
            table.append(f"| {label} | {n} | {read / 1e6:.1f} MB | {100 * read / full_bytes:.1f} % | "
                         f"{seconds:.1f} | {full_s / seconds:.1f}x |")
            print(table[-1], flush=True)
        assert len(counts) == 1, f"pushdown changed the result of hour {hour}: {counts}"
    print("\n".join(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
