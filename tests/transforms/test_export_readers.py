"""`kfmt export` destinations opened by the readers people use, as they are, without options:
Spark, pyarrow's Hive dataset, pandas and DuckDB (Parquet), pandas and DuckDB (JSON Lines).

Each reader's rows are compared with what a real Java consumer read from the real broker's logs
(the realkafka corpus's records.jsonl.gz), and its types with the types docs/export.md promises:
Spark's Kafka source types, or what each reader infers from the Hive-style directory names.
Also: a small topic gives one file per partition, big output rolls into files of the target size,
and a re-run writes the same bytes.
"""
from __future__ import annotations

import base64
import datetime
import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from support.corpus import REAL_DIRS, REALKAFKA, REPO
from support.export_truth import export, truth, utc_date
from support.spark_session import plain_spark  # noqa: F401  (fixture `spark`: one Spark session for the module)

from kfmt.rows.columns import EXPORT_DDL, EXPORT_SCHEMA
from kfmt.transforms.export import REPORT_NAME
from kfmt.transforms.export_state import STATE_NAME

SAMPLES = REPO / "samples" / "kafka-logs"
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
TS_TYPES = {-1: "NoTimestampType", 0: "CreateTime", 1: "LogAppendTime"}
KAFKA_SOURCE_SPARK_TYPES = ("struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
                            "timestamp:timestamp,timestampType:int,"
                            "headers:array<struct<key:string,value:binary>>>")



@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """(source, partition-by, format) -> an export of it, made once per module."""
    made: dict = {}

    def get(src: Path, partition_by: str = "topic,partition", fmt: str = "parquet") -> Path:
        key = (src, partition_by, fmt)
        if key not in made:
            dst = tmp_path_factory.mktemp("export") / "out"
            result = export(src, dst, "--partition-by", partition_by, "--format", fmt)
            assert result.code == 0, result.err
            made[key] = dst
        return made[key]
    return get


def b64(data) -> str | None:
    return None if data is None else base64.b64encode(bytes(data)).decode("ascii")


def consumer_view(rows: list[dict]) -> dict[str, list[dict]]:
    """Rows of any reader (key/value bytes, `ms` the timestamp in milliseconds, headers a list of
    {key, value}), grouped by topic and sorted by offset, in the truth files' terms."""
    by_topic: dict[str, list[dict]] = {}
    for r in rows:
        epoch = r["partition_leader_epoch"]
        by_topic.setdefault(str(r["topic"]), []).append({
            "offset": int(r["offset"]), "timestamp": int(r["ms"]),
            "timestampType": TS_TYPES[int(r["timestampType"])], "key": b64(r["key"]),
            "value": b64(r["value"]),
            "headers": [{"key": h["key"], "value": b64(h["value"])} for h in (
                [] if r["headers"] is None else list(r["headers"]))],
            "leaderEpoch": None if epoch < 0 else int(epoch)})
    return {topic: sorted(records, key=lambda r: r["offset"]) for topic, records in by_topic.items()}


def check_rows(rows: list[dict], src: Path, by_date: bool = False) -> None:
    """A reader's rows are exactly what the Java consumer read from every partition of `src`, on
    partition 0, with the UTC date of their timestamp when partitioned by date."""
    names = sorted(p.name for p in src.iterdir() if p.name in REAL_DIRS)
    got = consumer_view(rows)
    assert sorted(got) == sorted(n.rsplit("-", 1)[0] for n in names)
    for name in names:
        assert got[name.rsplit("-", 1)[0]] == truth(name), name
    assert {int(r["partition"]) for r in rows} == {0}
    if by_date:
        assert all(r["date"] == utc_date(int(r["ms"])) for r in rows)


def ms_of(moment) -> int:
    """Milliseconds since the epoch of a tz-aware datetime or pandas Timestamp."""
    return (moment - EPOCH) // datetime.timedelta(milliseconds=1)


# --- Parquet: Spark, pyarrow, pandas, DuckDB --------------------------------------------------------

@pytest.mark.spark
@pytest.mark.parametrize("partition_by", ["topic,partition", "topic,partition,date"])
@pytest.mark.parametrize("src", [SAMPLES, REALKAFKA], ids=["samples", "corpus"])
def test_spark_reads_the_export_as_it_is(spark, exports, src, partition_by):
    df = spark.read.parquet(str(exports(src, partition_by)))
    by_date = partition_by.endswith("date")
    # the partition columns come last (Spark's partition discovery), with the Kafka source's types
    assert df.columns[-3 if by_date else -2:] == partition_by.split(",")
    kafka = df.select("key", "value", "topic", "partition", "offset", "timestamp", "timestampType",
                      "headers")
    assert kafka.schema.simpleString() == KAFKA_SOURCE_SPARK_TYPES
    expected = spark.createDataFrame([], EXPORT_DDL + (", date date" if by_date else "")).schema
    assert df.select(*expected.names).schema == expected
    rows = [r.asDict(recursive=True) for r in
            df.selectExpr("*", "unix_millis(timestamp) AS ms").collect()]
    check_rows(rows, src, by_date)


@pytest.mark.parametrize("partition_by", ["topic,partition", "topic,partition,date"])
@pytest.mark.parametrize("src", [SAMPLES, REALKAFKA], ids=["samples", "corpus"])
def test_pyarrow_reads_the_export_as_it_is(exports, src, partition_by):
    table = ds.dataset(exports(src, partition_by), partitioning="hive").to_table()
    # every column with the export's Arrow types: partition=0 is inferred as int32, the topic as a
    # string; pyarrow infers no dates, so the date is a string (docs/export.md)
    assert table.select(EXPORT_SCHEMA.names).schema == EXPORT_SCHEMA
    by_date = partition_by.endswith("date")
    if by_date:
        assert table.schema.field("date").type == pa.string()
        table = table.set_column(table.schema.get_field_index("date"), "date",
                                 table.column("date").cast(pa.date32()))
    rows = [{**r, "ms": ms_of(r["timestamp"])} for r in table.to_pylist()]
    check_rows(rows, src, by_date)


@pytest.mark.parametrize("partition_by", ["topic,partition", "topic,partition,date"])
@pytest.mark.parametrize("src", [SAMPLES, REALKAFKA], ids=["samples", "corpus"])
def test_pandas_reads_the_export_as_it_is(exports, src, partition_by):
    df = pd.read_parquet(exports(src, partition_by))
    # pandas makes Hive partition columns categoricals (of the types pyarrow infers)
    assert isinstance(df["topic"].dtype, pd.CategoricalDtype)
    assert df["partition"].dtype.categories.dtype == "int32"
    assert str(df["timestamp"].dtype) in ("datetime64[us, UTC]", "datetime64[ns, UTC]")
    assert (df["offset"].dtype, df["timestampType"].dtype, df["magic"].dtype) == ("int64", "int32", "int8")
    by_date = partition_by.endswith("date")
    rows = []
    for r in df.to_dict("records"):
        r["ms"] = ms_of(r["timestamp"])
        if by_date:
            r["date"] = datetime.date.fromisoformat(r["date"])
        rows.append(r)
    check_rows(rows, src, by_date)


@pytest.mark.parametrize("partition_by", ["topic,partition", "topic,partition,date"])
@pytest.mark.parametrize("src", [SAMPLES, REALKAFKA], ids=["samples", "corpus"])
def test_duckdb_reads_the_export_as_it_is(exports, src, partition_by):
    import duckdb

    dst = exports(src, partition_by)
    relation = duckdb.sql(f"SELECT *, epoch_ms(timestamp) AS ms FROM "
                          f"read_parquet('{dst}/**/*.parquet', hive_partitioning=true)")
    types = dict(zip(relation.columns, map(str, relation.types)))
    # the data columns with the files' types; DuckDB infers partition=0 as BIGINT, the date as DATE
    assert {c: types[c] for c in ("key", "value", "topic", "partition", "offset", "timestamp",
                                  "timestampType", "headers")} == {
        "key": "BLOB", "value": "BLOB", "topic": "VARCHAR", "partition": "BIGINT", "offset": "BIGINT",
        "timestamp": "TIMESTAMP WITH TIME ZONE", "timestampType": "INTEGER",
        "headers": 'STRUCT("key" VARCHAR, "value" BLOB)[]'}
    by_date = partition_by.endswith("date")
    if by_date:
        assert types["date"] == "DATE"
    rows = [dict(zip(relation.columns, values)) for values in relation.fetchall()]
    check_rows(rows, src, by_date)


# --- JSON Lines: pandas, DuckDB -----------------------------------------------------------------------

def hive_values(path: Path, dst: Path) -> dict:
    return dict(part.split("=", 1) for part in path.parent.relative_to(dst).parts)


def unb64_row(r: dict) -> dict:
    """A JSON Lines row with its base64 bytes decoded (pandas gives NaN for null in a column
    without a value)."""
    unb64 = lambda v: base64.b64decode(v) if isinstance(v, str) else None  # noqa: E731
    r["key"], r["value"] = unb64(r["key"]), unb64(r["value"])
    r["headers"] = [{"key": h["key"], "value": unb64(h["value"])} for h in r["headers"]] \
        if isinstance(r["headers"], list) else None
    return r


@pytest.mark.parametrize("partition_by", ["topic,partition", "topic,partition,date"])
def test_pandas_reads_json_lines(exports, partition_by):
    dst = exports(SAMPLES, partition_by, "jsonl")
    rows = []
    for path in sorted(dst.rglob("*.jsonl")):
        df = pd.read_json(path, lines=True)
        # pandas parses columns named timestamp* as dates: the ISO strings are exact, in UTC
        assert str(df["timestamp"].dtype).endswith(", UTC]")
        partition = hive_values(path, dst)
        for r in df.to_dict("records"):
            r = unb64_row({**r, **partition})
            r["ms"] = ms_of(r["timestamp"])
            if "date" in r:
                r["date"] = datetime.date.fromisoformat(r["date"])
            rows.append(r)
    check_rows(rows, SAMPLES, partition_by.endswith("date"))


@pytest.mark.parametrize("partition_by", ["topic,partition", "topic,partition,date"])
def test_duckdb_reads_json_lines(exports, partition_by):
    import duckdb

    dst = exports(SAMPLES, partition_by, "jsonl")
    relation = duckdb.sql(f"SELECT *, epoch_ms(timestamp) AS ms FROM "
                          f"read_json('{dst}/**/*.jsonl', hive_partitioning=true)")
    types = dict(zip(relation.columns, map(str, relation.types)))
    assert (types["timestamp"], types["topic"], types["partition"]) == \
        ("TIMESTAMP WITH TIME ZONE", "VARCHAR", "BIGINT")
    rows = [unb64_row(dict(zip(relation.columns, values))) for values in relation.fetchall()]
    check_rows(rows, SAMPLES, partition_by.endswith("date"))


# --- what is in DST, file sizes, re-runs ------------------------------------------------------------------

def data_files(dst: Path) -> dict[str, bytes]:
    return {p.relative_to(dst).as_posix(): p.read_bytes() for p in dst.rglob("*")
            if p.is_file() and not p.name.startswith("_")}


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_twenty_small_partitions_give_twenty_files(exports, fmt):
    dst = exports(REALKAFKA, "topic,partition", fmt)
    files = data_files(dst)
    assert len(REAL_DIRS) == 20 and len(files) == 20
    assert sorted(Path(f).parent.as_posix() for f in files) == \
        sorted(f"topic={n.rsplit('-', 1)[0]}/partition=0" for n in REAL_DIRS)
    assert sorted(p.name for p in dst.iterdir() if p.is_file()) == ["_SUCCESS", STATE_NAME, REPORT_NAME]
    assert (dst / "_SUCCESS").read_bytes() == b""
    report = json.loads((dst / REPORT_NAME).read_text())
    assert set(report["files"]) == set(files)
    if fmt == "parquet":
        # rows gathered across the segments into row groups sized for scans: one per small file
        assert all(pq.ParquetFile(dst / f).num_row_groups == 1 for f in files)


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_a_rerun_writes_the_same_bytes(exports, tmp_path, fmt):
    first = exports(REALKAFKA, "topic,partition,date", fmt)
    again = tmp_path / "again"
    assert export(REALKAFKA, again, "--partition-by", "topic,partition,date", "--format", fmt).code == 0
    assert data_files(again) == data_files(first)


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_files_roll_at_the_target_size(tmp_path, monkeypatch, fmt):
    """With small row groups and a small target, a partition's task writes several files, each
    closed once it reached the target, holding together exactly the consumer's records."""
    from kfmt.rows import part_files

    monkeypatch.setattr(part_files, "ROW_GROUP_ROWS", 100)
    dst = tmp_path / "out"
    target = 8000
    result = export(REALKAFKA / "v2-none-0", dst, "--target-file-size", str(target), "--format", fmt)
    assert result.code == 0, result.err
    files = sorted((dst / "topic=v2-none" / "partition=0").iterdir())
    assert [p.name for p in files] == [f"part-00000000000000000000-0000-c{i:03d}.{fmt}"
                                       for i in range(len(files))]
    assert len(files) > 3
    assert all(p.stat().st_size >= target for p in files[:-1])
    if fmt == "parquet":
        assert all(pq.ParquetFile(p).metadata.row_group(0).num_rows <= 100 for p in files)
        table = ds.dataset(dst, partitioning="hive").to_table()
        rows = [{**r, "ms": ms_of(r["timestamp"])} for r in table.to_pylist()]
    else:
        rows = [unb64_row({**json.loads(line), "topic": "v2-none", "partition": 0})
                for p in files for line in p.read_text().splitlines()]
        for r in rows:
            r["ms"] = ms_of(datetime.datetime.fromisoformat(r["timestamp"].replace("Z", "+00:00")))
    assert consumer_view(rows) == {"v2-none": truth("v2-none-0")}


def test_rows_gathered_for_many_directories_stay_within_a_row_group(tmp_path):
    """A task writing to many date directories at once holds at most one row group's worth of rows,
    and every directory's file still has its rows in order."""
    from kfmt.rows.exporters import exporters
    from kfmt.rows.part_files import PartFiles
    from kfmt.storage.staging import StagedFiles
    from kfmt.storage.store import open_storage

    storage, root = open_storage(str(tmp_path))
    schema = pa.schema([("offset", pa.int64()), ("value", pa.binary())])
    bound = 20_000
    out = PartFiles(exporters()["parquet"], StagedFiles(storage, root), schema, 7, 1,
                    row_group_rows=1000, row_group_bytes=bound)
    for i in range(60):
        offsets = range(i * 50, i * 50 + 50)
        out.write(f"date={i % 3}", pa.record_batch([pa.array(offsets, pa.int64()),
                                                    pa.array([b"x" * 100] * 50)], schema=schema))
        assert out.pending_bytes < bound
    records = sorted(out.close(), key=lambda r: r.rel)
    assert [r.rel for r in records] == [f"date={d}/part-00000000000000000007-0001-c000.parquet"
                                        for d in range(3)]
    for d, record in enumerate(records):
        table = pq.read_table(tmp_path / record.rel)
        assert table.column("offset").to_pylist() == [o for i in range(d, 60, 3)
                                                      for o in range(i * 50, i * 50 + 50)]
        assert pq.ParquetFile(tmp_path / record.rel).num_row_groups > 1
