"""Filters Spark pushes into the `kafka-log` data source (pushFilters) prune what it reads, and the
rows stay exactly what a consumer would get: the consumer's records (the real-broker corpus's truth
files) with the predicate applied by brute force here, out-of-order timestamps included; the same with
pushdown off; the same when the `.index` / `.timeindex` are missing or stale. Bytes read are counted
at the store (kfmt.storage.store.Storage.read/map) to show the pruning, locally and on S3.
"""
from __future__ import annotations

import datetime
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql import datasource as ds
from support.corpus import REALKAFKA
from support.corpus_truth import consumer_records
from support.datasource_probes import OUT_OF_ORDER, ByteCount, one_partition, probe_timestamps, topic
from support.export_truth import as_consumer_records
from support.spark_session import spark  # noqa: F401  (fixture: one Spark session for the module)

from kfmt.partition.indexes import TIME_ENTRY
from kfmt.pipelines.datasource import KafkaLogDataSource, KafkaLogReader, PushdownReader
from kfmt.rows.columns import EXPORT_SCHEMA

ROOT = Path(__file__).resolve().parents[2]
UTC = datetime.timezone.utc
PUSHING = type("PushingSource", (KafkaLogDataSource,), {"filter_pushdown": True})


def at(ms: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ms / 1000, UTC)


def pushed_read(path, filters: list, **options) -> tuple[pa.Table, list, list]:
    """(rows, units, filters returned to Spark), as Spark would plan and read with these filters."""
    reader = PUSHING({"path": str(path), **{k: str(v) for k, v in options.items()}}).reader(None)
    assert isinstance(reader, PushdownReader)
    returned = list(reader.pushFilters(filters))
    units = reader.partitions()
    rows = pa.Table.from_batches([b for u in units for b in reader.read(u)], EXPORT_SCHEMA)
    return rows, units, returned


def matches(record: dict, name: str, f) -> bool:
    """The predicate of one Spark filter on a consumer record (by brute force, not kfmt)."""
    values = {"offset": record["offset"], "timestamp": at(record["timestamp"]),
              "timestamp_ms": record["timestamp"], "partition": 0, "topic": topic(name)}
    v = values[f.attribute[0]]
    if isinstance(f, ds.IsNotNull):
        return True
    if isinstance(f, ds.In):
        return v in f.value
    if isinstance(f, ds.EqualTo):
        return v == f.value
    if isinstance(f, ds.GreaterThan):
        return v > f.value
    if isinstance(f, ds.GreaterThanOrEqual):
        return v >= f.value
    if isinstance(f, ds.LessThan):
        return v < f.value
    assert isinstance(f, ds.LessThanOrEqual), f
    return v <= f.value


def expected(name: str, filters: list, start: int | None = None) -> list[dict]:
    return [r for r in consumer_records(name)
            if (start is None or r["offset"] >= start) and all(matches(r, name, f) for f in filters)]


def filter_sets(name: str) -> list[list]:
    """Comparisons, ranges (open and closed), IN lists and equalities on the four columns, around the
    out-of-order timestamps of the log."""
    records = consumer_records(name)
    offsets = [r["offset"] for r in records]
    mid = offsets[len(offsets) // 2]
    out = [[ds.EqualTo(("offset",), mid)], [ds.In(("offset",), (offsets[0], mid, offsets[-1], 10**9))],
           [ds.GreaterThan(("offset",), mid), ds.LessThanOrEqual(("offset",), mid + 40)],
           [ds.LessThan(("offset",), offsets[3])], [ds.GreaterThanOrEqual(("offset",), offsets[-1])],
           [ds.EqualTo(("partition",), 0), ds.IsNotNull(("offset",))], [ds.EqualTo(("partition",), 1)],
           [ds.In(("topic",), (topic(name), "other"))], [ds.EqualTo(("topic",), "other")]]
    stamps = probe_timestamps(name)
    for i, ts in enumerate(stamps[:: max(1, len(stamps) // 12)]):
        out += [[ds.GreaterThanOrEqual(("timestamp",), at(ts))], [ds.LessThan(("timestamp",), at(ts))],
                [ds.GreaterThan(("timestamp_ms",), ts), ds.LessThanOrEqual(("timestamp_ms",), ts + 60_000)]]
        if i % 3 == 0:
            out += [[ds.GreaterThanOrEqual(("timestamp",), at(ts)), ds.LessThan(("timestamp",), at(ts + 1000)),
                     ds.GreaterThan(("offset",), offsets[1])],
                    [ds.In(("timestamp",), (at(ts), at(ts + 1))), ds.IsNotNull(("timestamp",))],
                    [ds.EqualTo(("timestamp_ms",), ts)]]
    return out


@pytest.mark.parametrize("name", OUT_OF_ORDER + ["v2-lz4-0", "v1-logappendtime-gzip-0", "v0-none-0"])
def test_pushed_filters_give_the_consumers_records(name):
    for filters in filter_sets(name):
        rows, _, returned = pushed_read(REALKAFKA / name, filters)
        assert as_consumer_records(rows) == expected(name, filters), filters
        # exact ones are not checked again by Spark; timestamp ones are
        assert all(f.attribute[0] in ("timestamp", "timestamp_ms") and not isinstance(f, ds.IsNotNull)
                   for f in returned), returned


@pytest.mark.parametrize("name", ["v2-none-0", "v1-gzip-0"])
def test_pushed_filters_with_the_range_options(name):
    start = consumer_records(name)[len(consumer_records(name)) // 3]["offset"]
    for filters in filter_sets(name)[::4]:
        rows, _, _ = pushed_read(REALKAFKA / name, filters, startingOffsets=one_partition(name, start))
        assert as_consumer_records(rows) == expected(name, filters, start), filters


@pytest.mark.parametrize("broken", ["missing", "swapped", "understated"])
@pytest.mark.parametrize("name", ["v2-none-0", "v1-gzip-0", "v2-zstd-0"])
def test_missing_or_stale_indexes_cost_bytes_not_records(name, broken, tmp_path):
    """Without index files, with each segment's indexes swapped for another segment's (wrong
    offsets, positions and timestamps), or with `.timeindex` timestamps an hour too early (a
    well-formed index that promises less than the data holds), the rows are still the consumer's."""
    src = tmp_path / name
    shutil.copytree(REALKAFKA / name, src)
    indexes = sorted(src.glob("*.index")) + sorted(src.glob("*.timeindex"))
    if broken == "missing":
        for f in indexes:
            f.unlink()
    elif broken == "understated":
        for f in sorted(src.glob("*.timeindex")):
            entries = [TIME_ENTRY.unpack_from(f.read_bytes(), i)
                       for i in range(0, f.stat().st_size - TIME_ENTRY.size + 1, TIME_ENTRY.size)]
            f.write_bytes(b"".join(TIME_ENTRY.pack(ts - 3_600_000 if rel or not i else ts, rel)
                                   for i, (ts, rel) in enumerate(entries)))
    else:
        for suffix in ("index", "timeindex"):
            files = sorted(src.glob(f"*.{suffix}"))
            contents = [f.read_bytes() for f in files]
            for f, data in zip(files, contents[1:] + contents[:1]):
                f.write_bytes(data)
    for filters in filter_sets(name)[::2]:
        rows, _, _ = pushed_read(src, filters)
        assert as_consumer_records(rows) == expected(name, filters), filters


def test_pushdown_is_off_without_the_spark_setting():
    """register() leaves pushdown off where the session turned Spark's setting off (a reader with
    pushFilters fails then), and the `pushFilters` option turns it off per query."""
    assert isinstance(KafkaLogDataSource({"path": "x"}).reader(None), KafkaLogReader)
    assert not isinstance(KafkaLogDataSource({"path": "x"}).reader(None), PushdownReader)
    assert not isinstance(PUSHING({"path": "x", "pushFilters": "false"}).reader(None), PushdownReader)


# --- bytes read ------------------------------------------------------------------------------------

DAY_MS = 86_400_000


@pytest.fixture(scope="module")
def day_log(tmp_path_factory) -> Path:
    """About 64 MB of one partition (producer-shaped lz4 batches, skewed clocks), a day of record
    time, 8 MB segments, indexed by `kfmt reindex`: written by bench/producer_logs.py."""
    dst = tmp_path_factory.mktemp("day") / "log"
    subprocess.run([sys.executable, str(ROOT / "bench" / "producer_logs.py"), str(dst), "--size", "64M",
                    "--shapes", "v2-lz4", "--partitions", "1", "--span-ms", str(DAY_MS),
                    "--segment-bytes", "8M", "--reindex"], check=True, stdout=subprocess.DEVNULL)
    return dst


def ms_rows(table: pa.Table) -> list:
    return list(zip(table.column("offset").to_pylist(), table.column("timestamp_ms").to_pylist()))


def window_check(path, monkeypatch, **options) -> tuple[int, int]:
    """(bytes of a full read, bytes of a read of the last hour and of a narrow offset range), the rows
    checked against the full read filtered here."""
    count = ByteCount(monkeypatch)
    everything, _, _ = pushed_read(path, [], **options)
    full = count.total
    stamps = everything.column("timestamp_ms").to_pylist()
    offsets = everything.column("offset").to_pylist()
    start = min(stamps) + 23 * 3_600_000
    count.total = 0
    last_hour, _, _ = pushed_read(path, [ds.GreaterThanOrEqual(("timestamp",), at(start))], **options)
    hour_bytes = count.total
    assert ms_rows(last_hour) == [(o, t) for o, t in zip(offsets, stamps) if t >= start]
    count.total = 0
    lo = offsets[len(offsets) // 2]
    narrow, _, _ = pushed_read(path, [ds.GreaterThanOrEqual(("offset",), lo),
                                      ds.LessThan(("offset",), lo + 1000)], **options)
    narrow_bytes = count.total
    assert narrow.column("offset").to_pylist() == list(range(lo, lo + 1000))
    return full, max(hour_bytes, narrow_bytes)


def test_a_narrow_query_reads_a_few_percent(day_log, monkeypatch):
    full, narrow = window_check(day_log, monkeypatch)
    assert full > 60e6 and narrow < 0.08 * full, (full, narrow)


def test_the_last_hour_is_one_task_per_core(day_log):
    """What a lower bound on timestamps leaves (a window of the last segments and a short tail of
    each earlier one) is spread over the cores: as many units as the session has, of about equal
    size, the earlier segments' tails riding along with a unit rather than a task of their own."""
    everything, _, _ = pushed_read(day_log / "v2-lz4-0", [])
    stamps = everything.column("timestamp_ms").to_pylist()
    start = min(stamps) + 23 * 3_600_000
    for cores in (2, 3):
        source = type("Cores", (PUSHING,), {"parallelism": cores})
        reader = source({"path": str(day_log / "v2-lz4-0")}).reader(None)
        list(reader.pushFilters([ds.GreaterThanOrEqual(("timestamp",), at(start))]))
        units = reader.partitions()
        sizes = [sum(r.end - r.start for r in unit.ranges) for unit in units]
        assert len(units) == cores and min(sizes) > 0.7 * max(sizes), sizes
        assert len({r.segment_base for unit in units for r in unit.ranges}) > cores  # tails were left
        rows = pa.Table.from_batches([b for u in units for b in reader.read(u)], EXPORT_SCHEMA)
        assert ms_rows(rows) == [(o, t) for o, t in zip(everything.column("offset").to_pylist(), stamps)
                                 if t >= start]


@pytest.mark.s3
def test_a_narrow_query_on_s3_reads_ranges(day_log, monkeypatch, s3_server):
    from kfmt.storage.store import open_storage

    url = s3_server.url("pushdown", "log", "v2-lz4-0")
    storage, root = open_storage(url, s3_server.storage_options)
    for f in (day_log / "v2-lz4-0").iterdir():
        storage.write(storage.join(root, f.name), f.read_bytes())
    options = {f"storage.{k}": v for k, v in s3_server.storage_options.items()}
    full, narrow = window_check(url, monkeypatch, **options)
    assert full > 60e6 and narrow < 0.08 * full, (full, narrow)


# --- through Spark ---------------------------------------------------------------------------------

def pushed_in_plan(df) -> str:
    """The filters Spark's plan says the scan took over (its scan's `PushedFilters`): the ones
    pushFilters did not hand back."""
    scan = df._jdf.queryExecution().executedPlan().collectLeaves().apply(0).scan()
    return scan.getMetaData().get("PushedFilters").get()


@pytest.mark.spark
@pytest.mark.parametrize("name", ["v2-none-0", "v1-gzip-0"])
def test_spark_gives_the_same_rows_with_pushdown_on_and_off(spark, name):
    stamps = probe_timestamps(name)
    lo, hi = stamps[len(stamps) // 3], stamps[2 * len(stamps) // 3]
    queries = [  # (query, a column whose filter the scan takes over)
        (f"timestamp >= timestamp_millis({lo}) and timestamp < timestamp_millis({hi})", None),
        (f"timestamp_ms in ({lo}, {hi}) or offset = 3", None),
        ("offset in (1, 5, 90, 400) and partition = 0", "In(offset"),
        (f"topic = '{topic(name)}' and offset > 300", "EqualTo(topic"),
        (f"timestamp <= timestamp_millis({lo}) and offset between 10 and 500", "GreaterThanOrEqual(offset")]
    for query, taken in queries:
        on = spark.read.format("kafka-log").load(str(REALKAFKA / name)).filter(query)
        off = spark.read.format("kafka-log").option("pushFilters", "false").load(str(REALKAFKA / name)) \
            .filter(query)
        pushed = pushed_in_plan(on)
        assert taken is None or taken in pushed, (query, pushed)  # Spark did push it
        assert "timestamp)" not in pushed.replace("IsNotNull(timestamp)", ""), pushed  # checked again
        assert pushed_in_plan(off) == "[]", query
        got = [(r["offset"], r["timestamp_ms"]) for r in on.orderBy("offset").collect()]
        assert got == [(r["offset"], r["timestamp_ms"]) for r in off.orderBy("offset").collect()], query
        truth = spark.createDataFrame([(r["offset"], r["timestamp"], topic(name)) for r in consumer_records(name)],
                                      "offset long, timestamp_ms long, topic string") \
            .selectExpr("*", "timestamp_millis(timestamp_ms) as timestamp", "0 as partition").filter(query)
        assert got == [(r["offset"], r["timestamp_ms"]) for r in truth.orderBy("offset").collect()], query


def test_frames_meeting_offset_intervals_by_brute_force():
    """kfmt.partition.windows.overlaps (a binary search per frame) against checking every interval."""
    import random

    import numpy as np

    from kfmt.partition.windows import overlaps

    rng = random.Random(7)
    for _ in range(500):
        points = sorted(rng.sample(range(200), 2 * rng.randrange(0, 40)))
        intervals = list(zip(points[::2], points[1::2]))
        if intervals and rng.random() < 0.3:
            intervals[0] = (None, intervals[0][1])
        if intervals and rng.random() < 0.3:
            intervals[-1] = (intervals[-1][0], None)
        first = np.array([rng.randrange(200) for _ in range(50)], dtype=np.int64)
        last = first + np.array([rng.randrange(6) for _ in range(50)], dtype=np.int64)
        brute = [any((lo is None or b >= lo) and (hi is None or a < hi) for lo, hi in intervals)
                 for a, b in zip(first, last)]
        assert overlaps(tuple(intervals), first, last).tolist() == brute


def test_errors_are_the_same_with_filters_that_leave_nothing(tmp_path):
    """A filter no record passes does not hide a missing path or a range no partition can give."""
    from kfmt.errors import UsageError

    nothing = [ds.EqualTo(("partition",), 5), ds.LessThan(("offset",), 0)]
    with pytest.raises(UsageError, match="no such file or directory"):
        pushed_read(tmp_path / "nope", nothing)
    with pytest.raises(ValueError, match="no record of v2-none-0 has a timestamp at or after"):
        pushed_read(REALKAFKA / "v2-none-0", nothing, startingTimestamp=str(2 ** 62))
