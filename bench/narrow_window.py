"""The `kafka-log` data source on a narrow window of a big partition: bytes read and wall time with
Spark's filter pushdown (kfmt/pipelines/pushdown.py) against a full scan, in one run.

    bin/kfmt --version && .venv/bin/python bench/narrow_window.py [--size 2G] [--root /tmp/kfmt-bench]
        [--hours 0,12,23] [--runs N] [--master local[2]] [--path PARTITION_DIR_OR_URL] [--storage-option K=V ...]

The input (generated on first use under --root, then reused) is one partition of producer-shaped lz4
batches (bench/producer_logs.py, aiokafka's builders) spanning a day of record time, 128 MiB segments,
indexed by `kfmt reindex`; its producers' clocks are skewed now and then, so timestamps are out of
order in places. For each hour asked, the query is

    spark.read.format("kafka-log").load(PATH).filter("timestamp >= A and timestamp < B").count()

with pushdown (the default) and with `pushFilters=false` (every byte read, Spark filters), and the
same window as Kafka range options (`startingTimestamp` / `endingTimestamp`: ListOffsets semantics,
an offset range, which is not the same query when timestamps are out of order). Bytes read are
counted at kfmt's store (Storage.read/map) by running the same reader in this process; wall times
are Spark's, session started before timing, and so are the CPU seconds of Spark's processes (the
JVM and its Python workers), steadier than wall times on a shared machine; with `--runs N` every
query runs N times in a row and the table gives the median wall and CPU times.
"""
from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import producer_logs  # noqa: E402

HOUR_MS = 3_600_000
STORAGE: dict = {}  # storage.<key> options of the data source (--storage-option)
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


def spark_cpu() -> float:
    """CPU seconds used so far by this process's children (Spark's JVM, its Python daemon and
    workers, and the workers that ended): on a shared machine, steadier than wall time."""
    import psutil

    total = 0.0
    for proc in psutil.Process().children(recursive=True):
        try:
            t = proc.cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
        except psutil.NoSuchProcess:
            pass
    return total


def direct_read(path: str, counter: StoreBytes, filters: list, options: dict) -> tuple[int, int]:
    """(rows, bytes read) of the reader Spark's tasks run, planned with these pushed filters."""
    from kfmt.pipelines.datasource import KafkaLogDataSource

    source = type("Source", (KafkaLogDataSource,), {"filter_pushdown": True})({"path": path, **STORAGE,
                                                                              **options})
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
    p.add_argument("--runs", type=int, default=1, help="times each query runs (the medians are given)")
    p.add_argument("--path", help="query this partition directory (or s3://... URL) instead of the "
                                  "generated one")
    p.add_argument("--storage-option", action="append", default=[], metavar="KEY=VALUE",
                   help="an fsspec storage option for --path (repeatable), e.g. endpoint_url=...")
    args = p.parse_args(argv)
    storage = {f"storage.{k}": v for k, _, v in (o.partition("=") for o in args.storage_option)}
    from pyspark.sql import datasource as ds

    from kfmt.pipelines.datasource import register
    from kfmt.pipelines.session import spark_session

    path = args.path or dataset(args.root, args.size)
    STORAGE.update(storage)

    def kafka_log():
        """A new reader each time (option() changes the reader it is given)."""
        reader = spark.read.format("kafka-log")
        for k, v in STORAGE.items():
            reader = reader.option(k, v)
        return reader

    counter = StoreBytes()
    spark = spark_session(args.master)
    register(spark)
    utc = datetime.timezone.utc

    def timed(df) -> tuple[int, float, float]:
        """(rows, wall seconds, CPU seconds of Spark's processes: the JVM and its Python workers),
        the times the medians of --runs runs."""
        runs = []
        for _ in range(args.runs):
            cpu, t = spark_cpu(), time.perf_counter()
            n = df.count()
            runs.append((n, time.perf_counter() - t, spark_cpu() - cpu))
        return runs[0][0], statistics.median(r[1] for r in runs), statistics.median(r[2] for r in runs)

    # Python workers started, kfmt imported, and the query paths with and without pushed filters
    # run once before timing
    kafka_log().load(path).limit(1).collect()
    kafka_log().load(path).filter("offset < 0 and timestamp > timestamp_millis(0)").count()
    hours = [int(h) for h in args.hours.split(",")]
    windows = {}
    for hour in hours:
        a = producer_logs.BASE_TIMESTAMP + hour * HOUR_MS
        b = a + HOUR_MS
        windows[hour] = (a, b, f"timestamp >= timestamp_millis({a}) and timestamp < timestamp_millis({b})",
                         [ds.GreaterThanOrEqual(("timestamp",), datetime.datetime.fromtimestamp(a / 1000, utc)),
                          ds.LessThan(("timestamp",), datetime.datetime.fromtimestamp(b / 1000, utc))])
    # the full scan: every byte read, Spark filters (its time does not depend on the window)
    full_rows, full_bytes = direct_read(path, counter, [], {"pushFilters": "false"})
    a, b, window, _ = windows[hours[0]]
    full_n, full_s, full_cpu = timed(kafka_log().option("pushFilters", "false").load(path).filter(window))
    print(f"input: {path}, {full_bytes / 1e6:.0f} MB read by a full scan ({full_rows} records); "
          f"hour {hours[0]} without pushdown: {full_n} rows in {full_s:.1f} s; load {os.getloadavg()[0]:.1f}",
          flush=True)
    table = ["| query | rows | bytes read | share of bytes | wall (s) | vs full scan | CPU (s) | vs full scan |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
             f"| hour {hours[0]}, pushFilters=false (full scan) | {full_n} | {full_bytes / 1e6:.1f} MB | "
             f"100 % | {full_s:.1f} | 1.0x | {full_cpu:.1f} | 1.0x |"]
    for hour in hours:
        a, b, window, filters = windows[hour]
        cases = [(f"hour {hour}, pushdown", {}, filters),
                 (f"hour {hour}, startingTimestamp/endingTimestamp + filter", {
                     "startingTimestamp": str(a), "endingTimestamp": str(b)}, filters)]
        for label, options, pushed in cases:
            _, read = direct_read(path, counter, pushed, options)
            df = kafka_log()
            for k, v in options.items():
                df = df.option(k, v)
            n, seconds, cpu = timed(df.load(path).filter(window))
            if hour == hours[0] and not options:
                assert n == full_n, f"pushdown changed the rows of hour {hour}: {n}, not {full_n}"
            table.append(f"| {label} | {n} | {read / 1e6:.1f} MB | {100 * read / full_bytes:.1f} % | "
                         f"{seconds:.1f} | {full_s / seconds:.1f}x | {cpu:.1f} | {full_cpu / cpu:.1f}x |")
            print(table[-1], flush=True)
    print("\n".join(table))
    print(f"load at the end {os.getloadavg()[0]:.1f}; medians of {args.runs} run(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
