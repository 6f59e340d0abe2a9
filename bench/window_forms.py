"""A 1 % time window of a big v2 lz4 partition through `spark.read.format("kafka-log")`, written every way
a Spark user writes it, with and without index files, against a full scan in the same session (issue
25's targets).

    bin/kfmt --version && .venv/bin/python bench/window_forms.py [--root /tmp/kfmt-bench] [--runs 3]
        [--master local[2]] [--path PARTITION_DIR]

The partition (by default `v2-lz4-opaque-0` of bench/producer_logs.py's `opaque` mix at 2G: about
540 MB, 1.4 M records of mostly incompressible values with headers, 64 MiB segments, no index files)
is read as it is and as a copy indexed by `kfmt reindex` (made once, beside it). For each:

* the full scan: `count()` with `pushFilters=false` (every byte read and every row made);
* the middle 1 % of the partition's record time as a filter, in each form (`aware datetime`,
  `timestamp_millis`, `to_timestamp` of a string, SQL `BETWEEN` of strings, `timestamp_ms`): exact,
  late records included, so every batch after the window's start is inflated (for its timestamps);
* the same window as Kafka's range options (`startingTimestamp`/`endingTimestamp`: ListOffsets);
* the last 1 % as a filter;
* the three again with a narrow schema (`offset long, timestamp timestamp`).

Every query is a new DataFrame (this Spark keeps a pushed-down read for later queries on the same
one), run --runs times (median) in rounds that each start one query further on, the session's Python
workers warmed first. Targets: every form within
10 % of the others; the middle window at most 0.6x the full scan, 0.1x with Kafka's semantics, the last
1 % 0.05x; each at most half of that with the narrow schema.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import producer_logs  # noqa: E402

NARROW = "offset long, timestamp timestamp"
TARGETS = {"middle": 0.6, "middle, Kafka semantics": 0.1, "last 1 %": 0.05}


def partition(root: str) -> tuple[str, int, int]:
    """(the partition directory, its first and last record time) of the opaque 2G input."""
    facts = producer_logs.cached(root, producer_logs.parse_size("2G"), mix="opaque")
    return (os.path.join(facts["path"], "v2-lz4-opaque-0"), producer_logs.BASE_TIMESTAMP,
            producer_logs.BASE_TIMESTAMP + facts["span_ms"])


def indexed(path: str) -> str:
    """A copy of the partition with index files (kfmt reindex, made once, in a directory beside the
    partition's log directory, under the partition's own name)."""
    parent, name = os.path.split(path.rstrip("/"))
    dst = os.path.join(parent + "-indexed-partitions", name)
    if not os.path.isdir(dst):
        kfmt = os.path.join(os.path.dirname(HERE), "bin", "kfmt")
        partial = os.path.join(parent + "-indexed-partitions.partial", name)
        subprocess.run([kfmt, "reindex", path, partial, "--no-progress"], check=True, stdout=subprocess.DEVNULL)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        os.rename(partial, dst)
        os.rmdir(os.path.dirname(partial))
    return dst


def queries(spark, path: str, first: int, last: int) -> dict:
    """name -> a function making the query's DataFrame (a new one each time)."""
    from pyspark.sql import functions as F

    utc = datetime.timezone.utc
    mid_a, mid_b = first + (last - first) * 495 // 1000, first + (last - first) * 505 // 1000
    tail = last - (last - first) // 100

    def load(schema=None, **options):
        reader = spark.read.format("kafka-log")
        if schema:
            reader = reader.schema(schema)
        for k, v in options.items():
            reader = reader.option(k, v)
        return reader.load(path)

    def text(ms):
        return datetime.datetime.fromtimestamp(ms / 1000, utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]

    def at(ms):
        return F.lit(datetime.datetime.fromtimestamp(ms / 1000, utc))

    ts = F.col("timestamp")
    forms = {
        "aware datetime": lambda df: df.filter((ts >= at(mid_a)) & (ts < at(mid_b))),
        "timestamp_millis": lambda df: df.filter((ts >= F.timestamp_millis(F.lit(mid_a)))
                                                 & (ts < F.timestamp_millis(F.lit(mid_b)))),
        "to_timestamp": lambda df: df.filter((ts >= F.to_timestamp(F.lit(text(mid_a))))
                                             & (ts < F.to_timestamp(F.lit(text(mid_b))))),
        "sql between": lambda df: df.filter(f"timestamp between '{text(mid_a)}' and '{text(mid_b - 1)}'"),
        "timestamp_ms": lambda df: df.filter((F.col("timestamp_ms") >= mid_a) & (F.col("timestamp_ms") < mid_b)),
    }
    out = {"full scan": lambda: load(pushFilters="false")}
    out.update({f"middle: {name}": (lambda f=f: f(load())) for name, f in forms.items()})
    kafka = {"startingTimestamp": str(mid_a), "endingTimestamp": str(mid_b)}
    out["middle, Kafka semantics"] = lambda: load(**kafka)
    out["last 1 %"] = lambda: load().filter(ts >= at(tail))
    out["middle, narrow schema"] = lambda: forms["aware datetime"](load(NARROW))
    out["middle, Kafka semantics, narrow schema"] = lambda: load(NARROW, **kafka)
    out["last 1 %, narrow schema"] = lambda: load(NARROW).filter(ts >= at(tail))
    return out


def timed(makers: dict, runs: int) -> dict:
    """name -> (rows, median wall seconds) of each query, run in rounds (each round runs every
    query once, in turn), so that a drift of the machine's load falls on all of them alike. Each
    round starts one query further on (the full scan stays first): the first query after the full
    scan pays the round's first planning, and in a fixed order that was always the same filter form,
    which measured the order, not the form."""
    times: dict = {name: [] for name in makers}
    rows: dict = {}
    first, *rest = list(makers)
    for r in range(runs):
        turn = r % len(rest) if rest else 0
        for name in [first, *rest[turn:], *rest[:turn]]:
            df = makers[name]()
            t = time.perf_counter()
            rows[name] = df.count()
            times[name].append(time.perf_counter() - t)
    return {name: (rows[name], statistics.median(times[name])) for name in makers}


def target_of(name: str) -> float | None:
    base = name.replace(", narrow schema", "")
    base = "middle" if base.startswith("middle:") else base
    target = TARGETS.get(base)
    return None if target is None else target / (2 if "narrow schema" in name else 1)


def run_on(spark, label: str, path: str, first: int, last: int, runs: int) -> list[dict]:
    rows = []
    made = queries(spark, path, first, last)
    measured = timed(made, runs)
    full_rows, full = measured.pop("full scan")
    rows.append({"input": label, "query": "full scan", "rows": full_rows, "seconds": full, "ratio": 1.0})
    print(f"| {label} | full scan | {full_rows} | {full:.2f} s | 1.00x | | | {os.getloadavg()[0]:.1f} |", flush=True)
    for name, (n, seconds) in measured.items():
        target = target_of(name)
        ratio = seconds / full
        met = "" if target is None else ("yes" if ratio <= target else "NO")
        rows.append({"input": label, "query": name, "rows": n, "seconds": seconds, "ratio": ratio,
                     "target": target, "met": met})
        print(f"| {label} | {name} | {n} | {seconds:.2f} s | {ratio:.3f}x | "
              f"{'' if target is None else f'<= {target:g}x'} | {met} | {os.getloadavg()[0]:.1f} |", flush=True)
    forms = [r["seconds"] for r in rows if r["query"].startswith("middle: ")]
    spread = max(forms) / min(forms) - 1
    print(f"| {label} | filter forms: slowest over fastest | | | +{100 * spread:.0f} % | <= +10 % | "
          f"{'yes' if spread <= 0.10 else 'NO'} | |", flush=True)
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--root", default="/tmp/kfmt-bench")
    p.add_argument("--path", help="another partition directory (record time from its own timestamps)")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--json", help="where to write the results")
    args = p.parse_args(argv)
    from kfmt.pipelines.datasource import register
    from kfmt.pipelines.session import spark_session

    path, first, last = partition(args.root) if not args.path else (args.path, None, None)
    spark = spark_session(args.master)
    register(spark)
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    if first is None:
        stamps = spark.read.format("kafka-log").load(path).selectExpr("min(timestamp_ms)", "max(timestamp_ms)").first()
        first, last = stamps[0], stamps[1]
    # the Python workers started and kfmt imported before timing, both query paths once
    spark.read.format("kafka-log").load(path).limit(1).collect()
    spark.read.format("kafka-log").load(path).filter("offset < 0 and timestamp > timestamp_millis(0)").count()
    print(f"window_forms {datetime.datetime.now().isoformat(timespec='seconds')}: {path}, master {args.master}, "
          f"median of {args.runs}, load {os.getloadavg()[0]:.1f}\n")
    print("| input | query | rows | wall | vs full scan | target | met | load |")
    print("| --- | --- | ---: | ---: | ---: | --- | --- | --- |")
    results = run_on(spark, "no index files", path, first, last, args.runs)
    results += run_on(spark, "with indexes", indexed(path), first, last, args.runs)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
