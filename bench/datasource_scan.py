"""Full-scan throughput of the `kafka-log` data source against `kfmt export` of the same input, in one
run (issue 15's target: the data source at no less than half of export's bytes per second).

    bin/kfmt --version && .venv/bin/python bench/datasource_scan.py PARTITION_OR_LOG_DIR [--runs 3]
        [--master local[2]]

`kfmt export SRC DST --master inprocess` runs as a user runs it (a fresh process, whole wall time);
then one Spark session (started, and its Python workers warmed by one small query, before timing)
runs `count()` and an aggregation (`groupBy(timestampType)` with a count of values, the sum of their
lengths and the largest offset) over the whole input. Each is the median of --runs. Throughput is
the input's `.log` bytes over the wall time. On a shared machine compare the ratios, not the times.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def log_bytes(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path)
               for f in files if f.endswith(".log"))


def export_seconds(path: str) -> float:
    out = tempfile.mkdtemp(prefix="kfmt-scan-export-")
    shutil.rmtree(out)
    try:
        t = time.perf_counter()
        subprocess.run([os.path.join(ROOT, "bin", "kfmt"), "export", path, out, "--master", "inprocess",
                        "--no-progress"], check=True, stdout=subprocess.DEVNULL)
        return time.perf_counter() - t
    finally:
        shutil.rmtree(out, ignore_errors=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("path")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--master", default="local[2]")
    args = p.parse_args(argv)
    from pyspark.sql import functions as F

    from kfmt.pipelines.datasource import register
    from kfmt.pipelines.session import spark_session

    size = log_bytes(args.path)
    export = statistics.median(export_seconds(args.path) for _ in range(args.runs))
    spark = spark_session(args.master)
    register(spark)
    df = spark.read.format("kafka-log").load(args.path)
    df.limit(1).collect()  # Python workers started and kfmt imported before timing

    def timed(action) -> float:
        times = []
        for _ in range(args.runs):
            t = time.perf_counter()
            action()
            times.append(time.perf_counter() - t)
        return statistics.median(times)

    count = timed(lambda: df.count())
    aggregate = timed(lambda: df.groupBy("timestampType").agg(
        F.count("value"), F.sum(F.length("value")), F.max("offset")).collect())
    rows = [("kfmt export --master inprocess (whole process)", export),
            ("kafka-log count()", count), ("kafka-log groupBy(timestampType).agg(count, sum(length(value)), max(offset))",
                                              aggregate)]
    print(f"input: {args.path}, {size / 1e6:.0f} MB of .log, median of {args.runs} runs, {args.master}")
    print("| what | wall (s) | MB/s | vs export |")
    print("| --- | ---: | ---: | ---: |")
    for label, seconds in rows:
        print(f"| {label} | {seconds:.2f} | {size / 1e6 / seconds:.0f} | {export / seconds:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
