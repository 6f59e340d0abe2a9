"""Narrow windows through `spark.read.format("kafka-log")` however the filter is written (issue 25):

* every way a Spark user writes a timestamp bound -- Python datetimes (with or without a zone),
  `timestamp_millis`, `to_timestamp` and `cast` of a constant, a string compared with the column,
  SQL `BETWEEN` of strings, SQL timestamp literals, the `timestamp_ms` column -- reaches pushFilters
  as the same bound (recorded inside Spark's own planning worker), and gives the same rows: the
  consumer's records in the window, late (out-of-order) ones included, by brute force over the
  truth files;
* a partition without index files is narrowed by its batch headers: a window reads a few percent of
  the bytes a full scan reads, and so do Kafka's range options (startingTimestamp/endingTimestamp,
  resolved as ListOffsets resolves them);
* a user-given schema is honoured: only its columns are sent; a column the source lacks, or another
  type, is refused.
"""
from __future__ import annotations

import datetime
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql import functions as F
from support.corpus import REALKAFKA
from support.corpus_truth import consumer_records
from support.datasource_probes import OUT_OF_ORDER, ByteCount
from support.spark_session import spark  # noqa: F401  (fixture: one Spark session for the module)

from kfmt.pipelines import datasource

ROOT = Path(__file__).resolve().parents[2]
UTC = datetime.timezone.utc


def probe_source(log: Path) -> type:
    """The data source with pushdown, writing the bounds pushFilters took to `log` (classes made here
    travel to Spark's planning worker by value)."""

    class ProbeReader(datasource.PushdownReader):
        def pushFilters(self, filters):
            returned = list(super().pushFilters(list(filters)))
            with open(log, "a") as out:
                out.write(json.dumps([self.pushed.min_ms, self.pushed.max_ms]) + "\n")
            yield from returned

    class ProbeSource(datasource.KafkaLogDataSource):
        @classmethod
        def name(cls):
            return "kafka-log-probe"

        def reader(self, schema):
            return ProbeReader(datasource.SourceOptions.parse(self.options), 2,
                               datasource.chosen_columns(schema))

    return ProbeSource


def window_of(name: str) -> tuple[int, int]:
    """A window in the middle of a partition whose edges fall between records, with records stamped
    earlier than their predecessors inside it (late records)."""
    stamps = sorted({r["timestamp"] for r in consumer_records(name)})
    return stamps[len(stamps) // 3] - 1, stamps[2 * len(stamps) // 3] + 1


def text(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def forms(df, view: str, lo: int, hi: int) -> dict:
    """The same window [lo, hi] written every way (the session's time zone is UTC)."""
    at = datetime.datetime.fromtimestamp(lo / 1000, UTC)
    until = datetime.datetime.fromtimestamp(hi / 1000, UTC)
    ts = F.col("timestamp")
    spark = df.sparkSession
    return {
        "aware datetime": df.filter((ts >= F.lit(at)) & (ts <= F.lit(until))),
        "naive datetime": df.filter((ts >= F.lit(at.replace(tzinfo=None))) & (ts <= F.lit(until.replace(tzinfo=None)))),
        "timestamp_millis": df.filter((ts >= F.timestamp_millis(F.lit(lo))) & (ts <= F.timestamp_millis(F.lit(hi)))),
        "to_timestamp": df.filter((ts >= F.to_timestamp(F.lit(text(lo)))) & (ts <= F.to_timestamp(F.lit(text(hi))))),
        "cast": df.filter((ts >= F.lit(text(lo)).cast("timestamp")) & (ts <= F.lit(text(hi)).cast("timestamp"))),
        "string": df.filter((ts >= text(lo)) & (ts <= text(hi))),
        "between": df.filter(ts.between(F.lit(at), F.lit(until))),
        "sql between": spark.sql(f"select * from {view} where timestamp between '{text(lo)}' and '{text(hi)}'"),
        "sql literal": spark.sql(f"select * from {view} where timestamp >= timestamp'{text(lo)}' "
                                 f"and timestamp <= timestamp'{text(hi)}'"),
        "timestamp_ms": df.filter((F.col("timestamp_ms") >= lo) & (F.col("timestamp_ms") <= hi)),
    }


def without_indexes(name: str, tmp_path: Path) -> Path:
    src = tmp_path / name
    shutil.copytree(REALKAFKA / name, src)
    for f in list(src.glob("*.index")) + list(src.glob("*.timeindex")):
        f.unlink()
    return src


@pytest.mark.spark
@pytest.mark.parametrize("indexed", [True, False], ids=["indexes", "no index files"])
@pytest.mark.parametrize("name", ["v2-none-0", "v1-gzip-0", "v2-zstd-0"])
def test_every_form_of_a_window_is_pushed_alike_and_keeps_late_records(spark, name, indexed, tmp_path):
    assert name in OUT_OF_ORDER
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    log = tmp_path / "pushed.jsonl"
    spark.dataSource.register(probe_source(log))
    path = REALKAFKA / name if indexed else without_indexes(name, tmp_path)
    df = spark.read.format("kafka-log-probe").load(str(path))
    df.createOrReplaceTempView("w")
    lo, hi = window_of(name)
    truth = [(r["offset"], r["timestamp"]) for r in consumer_records(name) if lo <= r["timestamp"] <= hi]
    late = [o for (o, t), (_, before) in zip(truth[1:], truth) if t < before]
    assert late, "the window holds no out-of-order record"
    for form, query in forms(df, "w", lo, hi).items():
        log.unlink(missing_ok=True)
        got = [(r["offset"], r["timestamp_ms"]) for r in query.orderBy("offset").collect()]
        assert got == truth, form
        assert [json.loads(line) for line in log.read_text().splitlines()] == [[lo, hi]], form


@pytest.fixture(scope="module")
def unindexed_day(tmp_path_factory) -> Path:
    """About 48 MB of one partition of lz4 batches over a day, 8 MB segments, no index files
    (bench/producer_logs.py)."""
    dst = tmp_path_factory.mktemp("day") / "log"
    subprocess.run([sys.executable, str(ROOT / "bench" / "producer_logs.py"), str(dst), "--size", "48M",
                    "--shapes", "v2-lz4", "--partitions", "1", "--span-ms", "86400000", "--segment-bytes", "8M"],
                   check=True, stdout=subprocess.DEVNULL)
    return dst / "v2-lz4-0"


def read_counted(path, monkeypatch, filters=(), **options) -> tuple[pa.Table, int]:
    """(rows, bytes the tasks read) of a read planned as Spark plans it (the planning's own look at
    the batch headers is not counted: it maps the segments, touching their headers)."""
    source = type("Pushing", (datasource.KafkaLogDataSource,), {"filter_pushdown": True})
    reader = source({"path": str(path), **options}).reader(None)
    list(reader.pushFilters(list(filters)))
    units = reader.partitions()
    count = ByteCount(monkeypatch)
    batches = [b for unit in units for b in reader.read(unit)]
    from kfmt.rows.columns import EXPORT_SCHEMA

    return pa.Table.from_batches(batches, EXPORT_SCHEMA), count.total


def test_a_window_of_a_partition_without_indexes_reads_its_batches_only(unindexed_day, monkeypatch):
    from pyspark.sql import datasource as ds

    everything, full = read_counted(unindexed_day, monkeypatch)
    stamps = everything.column("timestamp_ms").to_pylist()
    offsets = everything.column("offset").to_pylist()
    start = min(stamps) + 23 * 3_600_000
    at = datetime.datetime.fromtimestamp(start / 1000, UTC)
    last_hour, window = read_counted(unindexed_day, monkeypatch, [ds.GreaterThanOrEqual(("timestamp",), at)])
    assert list(zip(last_hour.column("offset").to_pylist(), last_hour.column("timestamp_ms").to_pylist())) \
        == [(o, t) for o, t in zip(offsets, stamps) if t >= start]
    assert window < 0.1 * full, (window, full)
    # Kafka's semantics: the offsets ListOffsets gives for the two timestamps, and nothing else read
    end = start + 1_800_000
    ranged, ranged_bytes = read_counted(unindexed_day, monkeypatch, startingTimestamp=str(start),
                                        endingTimestamp=str(end))
    first = next(o for o, t in zip(offsets, stamps) if t >= start)
    stop = next(o for o, t in zip(offsets, stamps) if t >= end)
    assert ranged.column("offset").to_pylist() == list(range(first, stop))
    assert ranged_bytes < 0.1 * full, (ranged_bytes, full)


@pytest.mark.spark
def test_a_narrow_schema_sends_only_its_columns(spark):
    path = str(REALKAFKA / "v2-none-0")
    df = spark.read.format("kafka-log").schema("offset long, timestamp timestamp").load(path)
    assert df.columns == ["offset", "timestamp"]
    rows = df.filter(F.col("offset") < 50).orderBy("offset").collect()
    truth = [r for r in consumer_records("v2-none-0") if r["offset"] < 50]
    assert [(r["offset"], int(r["timestamp"].replace(tzinfo=UTC).timestamp() * 1000)) for r in rows] == \
        [(r["offset"], r["timestamp"]) for r in truth]
    # a DataFrame of its own: this Spark keeps a filtered query's pushdown for later queries on the
    # same DataFrame (the read info is stored on the shared data source relation)
    fresh = spark.read.format("kafka-log").schema("offset long, timestamp timestamp").load(path)
    assert fresh.count() == len(consumer_records("v2-none-0"))
    reader = datasource.KafkaLogDataSource({"path": path}).reader(df.schema)
    batch = next(b for u in reader.partitions() for b in reader.read(u))
    assert batch.schema.names == ["offset", "timestamp"]
    for schema, message in [("offset long, nope int", "does not have: 'nope'"),
                            ("offset int", "the type int, the source's is bigint")]:
        with pytest.raises(Exception, match=message):
            spark.read.format("kafka-log").schema(schema).load(path).count()
