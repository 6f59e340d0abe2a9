"""The `kafka-log` Spark data source: the rows it returns equal what the Java consumer read and the
rows `kfmt export` wrote; byte ranges of split segments give the same rows as whole segments; its
options (Spark's Kafka source names where one applies) and its errors.

The reader's planning and reading are plain Python, so most tests call them directly; a few run
through Spark (one session for the module, local[2]).
"""
from __future__ import annotations

import json
import shutil

import pyarrow as pa
import pytest
from support.corpus import REAL_DIRS, REALKAFKA
from support.corpus_truth import control_records
from support.export_truth import (
    TXN,
    as_consumer_records,
    corrupted_copy,
    export,
    listing,
    open_transaction_partition,
    read_dataset,
    truth,
)
from support.kafka_dirs import empty_partition
from support.spark_session import (
    read_all,
    reader,
    spark,  # noqa: F401  (fixtures of this module)
)

from kfmt.errors import DataError, UsageError
from kfmt.partition.layout import find_partitions
from kfmt.pipelines.datasource import SourceOptions
from kfmt.rows.columns import EXPORT_SCHEMA
from kfmt.rows.ranges import Selection, plan_ranges, read_range
from kfmt.storage.store import open_storage


def segments(name: str) -> list[int]:
    return sorted(int(p.name.split(".")[0]) for p in (REALKAFKA / name).glob("*.log") if p.stat().st_size)


# --- what it returns -------------------------------------------------------------------------------

@pytest.mark.parametrize("name", REAL_DIRS)
def test_rows_equal_the_consumer_and_the_export(name, tmp_path):
    rows, _ = read_all(REALKAFKA / name)
    assert as_consumer_records(rows) == truth(name)
    assert export(REALKAFKA / name, tmp_path / "out").code == 0
    assert rows.equals(read_dataset(tmp_path / "out"))


@pytest.mark.parametrize("name", ["v0-none-0", "v1-none-0", "v2-none-0", "v2-zstd-0", TXN])
def test_split_byte_ranges_give_the_same_rows(name):
    """Cut at batch boundaries (kafka-dump-log's positions) into more tasks than segments, the rows
    are those of one task per whole segment, and of all segments packed into one task."""
    storage, path = open_storage(str(REALKAFKA / name))
    (part,) = find_partitions(storage, path)
    whole_segments = plan_ranges(part, 1 << 30)
    assert [r.segment_base for r in whole_segments] == segments(name)
    per_segment = pa.Table.from_batches(
        [b for rng in whole_segments for b in read_range(rng, Selection())], EXPORT_SCHEMA)
    packed, packed_units = read_all(REALKAFKA / name, maxBytesPerSplit=1 << 20)
    split, split_units = read_all(REALKAFKA / name, maxBytesPerSplit=1024)
    assert len(packed_units) == 1 and len(split_units) > len(segments(name))
    assert split.equals(per_segment) and packed.equals(per_segment)
    starts = {(base, pos) for base, pos in listing(name)}
    tiles: dict = {}
    for unit in split_units:
        for rng in unit.ranges:
            assert rng.start == 0 or (rng.segment_base, rng.start) in starts
            tiles.setdefault(rng.segment_base, []).append((rng.start, rng.end))
    for base, ranges in tiles.items():  # the ranges of a segment tile it
        size = (REALKAFKA / name / f"{base:020d}.log").stat().st_size
        assert [a for a, _ in ranges] == [0] + [b for _, b in ranges[:-1]] and ranges[-1][1] == size


@pytest.mark.parametrize("split", [100, 5000, 9000, 20000])
def test_small_segments_share_tasks_as_sparks_file_sources_pack_small_files(logdir, split):
    """Every range in exactly one task, in order; a task holds one partition, and more than one
    range only while they fit in maxBytesPerSplit."""
    _, units = read_all(logdir, maxBytesPerSplit=split)
    ranges = [r for u in units for r in u.ranges]
    for unit in units:
        assert len({(r.topic, r.partition) for r in unit.ranges}) == 1
        assert len(unit.ranges) == 1 or sum(r.end - r.start for r in unit.ranges) <= split
    storage, path = open_storage(str(logdir))
    planned = [r for part in find_partitions(storage, path) for r in plan_ranges(part, split)]
    assert ranges == planned


@pytest.mark.parametrize("include_control", [False, True])
def test_read_committed(include_control):
    rows, _ = read_all(REALKAFKA / TXN, **{"kafka.isolation.level": "read_committed",
                                           "includeControl": str(include_control).lower()})
    data = rows.filter(pa.compute.invert(rows.column("is_control")))
    assert as_consumer_records(data) == truth(TXN, committed=True)
    control = rows.filter(rows.column("is_control"))
    assert list(zip(control.column("offset").to_pylist(), control.column("timestamp_ms").to_pylist())) == \
        (list(control_records(TXN)) if include_control else [])


def test_read_committed_stops_at_the_last_stable_offset(tmp_path):
    src = open_transaction_partition(tmp_path)
    rows, _ = read_all(src, **{"kafka.isolation.level": "read_committed", "maxBytesPerSplit": 100})
    assert rows.column("offset").to_pylist() == [0, 1, 2]


def test_include_control_without_read_committed():
    rows, _ = read_all(REALKAFKA / TXN, includeControl="TRUE")
    assert rows.num_rows == len(truth(TXN)) + len(control_records(TXN))


@pytest.fixture(scope="module")
def logdir(tmp_path_factory):
    root = tmp_path_factory.mktemp("logdir")
    for name in ("v2-none-0", "v2-lz4-0", "v1-gzip-0"):
        shutil.copytree(REALKAFKA / name, root / name)
    shutil.copytree(REALKAFKA / "v2-none-0", root / "v2-none-1")
    return root


@pytest.fixture(scope="module")
def mixed_logdir(tmp_path_factory):
    """Every message format, compressed and not, and transactions."""
    root = tmp_path_factory.mktemp("mixed")
    for name in ("v0-none-0", "v1-snappy-0", "v2-zstd-0", "compact-v2-none-0", TXN):
        shutil.copytree(REALKAFKA / name, root / name)
    return root


def topics_read(path, **options) -> list[tuple[str, int]]:
    rows, _ = read_all(path, **options)
    return sorted(set(zip(rows.column("topic").to_pylist(), rows.column("partition").to_pylist())))


def test_topic_selection_as_in_sparks_kafka_source(logdir):
    everything = [("v1-gzip", 0), ("v2-lz4", 0), ("v2-none", 0), ("v2-none", 1)]
    assert topics_read(logdir) == everything
    assert topics_read(logdir, subscribe="v2-none, v1-gzip") == \
        [("v1-gzip", 0), ("v2-none", 0), ("v2-none", 1)]
    assert topics_read(logdir, subscribePattern="v2-.*") == [("v2-lz4", 0), ("v2-none", 0), ("v2-none", 1)]
    assert topics_read(logdir, subscribePattern="v2") == []  # the whole name must match, as in Java
    assert topics_read(logdir, assign=json.dumps({"v2-none": [1], "v1-gzip": [0, 5]})) == \
        [("v1-gzip", 0), ("v2-none", 1)]
    assert topics_read(logdir, subscribe="nothing-here") == []


@pytest.mark.parametrize("options, words", [
    ({"maxOffsetsPerTrigger": "10"}, "unsupported option(s) maxoffsetspertrigger"),
    ({"kafka.bootstrap.servers": "localhost:9092"}, "unsupported option(s) kafka.bootstrap.servers"),
    ({"subscribe": "a", "assign": '{"a":[0]}'}, "at most one of subscribe"),
    ({"subscribe": " , "}, "subscribe names no topic"),
    ({"subscribePattern": "("}, "subscribePattern is not a regular expression"),
    ({"assign": "[0, 1]"}, "assign must be a JSON object"),
    ({"assign": "{"}, "assign is not JSON"),
    ({"kafka.isolation.level": "read_everything"}, "kafka.isolation.level must be one of"),
    ({"includeControl": "yes please"}, "includeControl must be true or false"),
    ({"maxBytesPerSplit": "-5"}, "maxBytesPerSplit must be a positive number"),
    ({"maxBytesPerSplit": "lots"}, "maxBytesPerSplit must be a positive number"),
])
def test_bad_options_are_refused_by_name(options, words):
    with pytest.raises(ValueError, match=None) as err:
        SourceOptions.parse({"path": str(REALKAFKA / "v2-none-0"), **options})
    assert words in str(err.value)


def test_no_path():
    with pytest.raises(ValueError, match=r'load\(PATH\)'):
        SourceOptions.parse({})


def test_a_missing_path_is_named(tmp_path):
    with pytest.raises(UsageError, match=f"{tmp_path / 'nope'}: no such file or directory"):
        reader(tmp_path / "nope").partitions()


def test_an_empty_partition_reads_nothing(tmp_path):
    empty_partition(tmp_path / "empty-0")  # a 0-byte segment: a partition no record was ever written to
    rows, units = read_all(tmp_path)
    assert rows.num_rows == 0 and len(units) == 1


def test_bad_data_names_file_position_and_offset(tmp_path):
    src, position = corrupted_copy(tmp_path)
    r = reader(src)
    with pytest.raises(DataError) as err:
        for unit in r.partitions():
            list(r.read(unit))
    assert err.value.file == str(sorted(src.glob("*.log"))[2]) and err.value.position == position
    assert err.value.offset is not None


# --- through Spark ---------------------------------------------------------------------------------


@pytest.mark.spark
def test_spark_reads_a_log_directory_like_the_exported_parquet(spark, mixed_logdir, tmp_path):
    df = spark.read.format("kafka-log").load(str(mixed_logdir))
    assert export(mixed_logdir, tmp_path / "out").code == 0
    # the export's partition columns are in its paths, so Spark lists them last
    exported = spark.read.parquet(str(tmp_path / "out")).select(*df.columns)
    assert df.schema == exported.schema
    assert df.orderBy("topic", "offset").collect() == exported.orderBy("topic", "offset").collect()
    assert df.count() == sum(len(truth(p.name)) for p in mixed_logdir.iterdir())


@pytest.mark.spark
def test_spark_options_split_and_committed(spark):
    base = spark.read.format("kafka-log").option("subscribe", "txn-v2-none")
    committed = base.option("kafka.isolation.level", "read_committed").load(str(REALKAFKA))
    split = base.option("kafka.isolation.level", "read_committed").option("maxBytesPerSplit", "2048") \
        .load(str(REALKAFKA))
    assert split.rdd.getNumPartitions() > len(segments(TXN)) and committed.rdd.getNumPartitions() == 1
    rows = committed.orderBy("offset").collect()
    assert split.orderBy("offset").collect() == rows
    assert [r["offset"] for r in rows] == [r["offset"] for r in truth(TXN, committed=True)]


@pytest.mark.spark
def test_spark_shows_the_data_error(spark, tmp_path):
    src, position = corrupted_copy(tmp_path)
    with pytest.raises(Exception) as err:
        spark.read.format("kafka-log").load(str(src)).count()
    assert f"{sorted(src.glob('*.log'))[2]}, position {position}, offset" in str(err.value)


@pytest.mark.spark
@pytest.mark.s3
def test_spark_reads_s3_through_storage_options(spark, s3_server):
    from kfmt.storage.store import open_storage

    storage, root = open_storage(s3_server.url("datasource", TXN), s3_server.storage_options)
    for f in (REALKAFKA / TXN).iterdir():
        storage.write(storage.join(root, f.name), f.read_bytes())
    reader = spark.read.format("kafka-log")
    for key, value in s3_server.storage_options.items():
        reader = reader.option(f"storage.{key}", value)
    rows = reader.load(s3_server.url("datasource", TXN)).orderBy("offset").collect()
    assert [r["offset"] for r in rows] == [r["offset"] for r in truth(TXN)]
