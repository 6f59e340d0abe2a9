"""The `kafka-log` data source's range options mean what they mean in Spark's Kafka source:
startingOffsets / endingOffsets, the timestamp options resolved as a broker's ListOffsets resolves a
timestamp, startingOffsetsByTimestampStrategy and minPartitions.

Truth is the real-broker corpus: the records a Java consumer read (records.jsonl.gz), the log end
offsets the broker listed (offsets.txt), and the transaction markers kafka-dump-log listed (a
timestamp lookup sees them, a consumer does not). The offset for a timestamp is computed by brute
force from those records (support.corpus_truth.first_offset_at_or_after), never from kfmt.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest
from support.corpus import REAL_DIRS, REALKAFKA
from support.corpus_truth import consumer_records, first_offset_at_or_after
from support.datasource_probes import OUT_OF_ORDER, one_partition, probe_timestamps, topic
from support.export_truth import TXN, as_consumer_records, truth
from support.spark_session import read_all

from kfmt.partition.layout import find_partitions
from kfmt.partition.reader import PartitionReader
from kfmt.pipelines.datasource import SourceOptions
from kfmt.pipelines.kafka_options import OffsetRange
from kfmt.storage.store import open_storage

TIMESTAMPED = [n for n in REAL_DIRS if not n.startswith("v0-")]


def records(name: str, **options) -> list[dict]:
    rows, _ = read_all(REALKAFKA / name, **options)
    return as_consumer_records(rows)


def truth_between(name: str, start: int | None, end: int | None) -> list[dict]:
    return [r for r in truth(name)
            if (start is None or r["offset"] >= start) and (end is None or r["offset"] < end)]


def log_end_offset(name: str) -> int:
    """The broker's latest offset (GetOffsetShell, second line of offsets.txt)."""
    lines = (REALKAFKA / f"{name}.truth" / "offsets.txt").read_text().split()
    return int(lines[-1].rsplit(":", 1)[1])


@pytest.fixture(scope="module")
def two_topics(tmp_path_factory):
    """A log directory holding v2-none-0 and v1-gzip-0."""
    root = tmp_path_factory.mktemp("two-topics")
    for name in ("v2-none-0", "v1-gzip-0"):
        shutil.copytree(REALKAFKA / name, root / name)
    return root


# --- offsets -------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["v0-none-0", "v1-gzip-0", "v2-zstd-0", TXN, "compact-v2-none-0"])
def test_offsets_json_reads_the_consumers_records_in_the_range(name):
    end_of_log = log_end_offset(name)
    for start, end in [(0, end_of_log), (1, 2), (37, 205), (150, 151), (end_of_log - 3, end_of_log),
                       (10, 10)]:
        got = records(name, startingOffsets=one_partition(name, start),
                      endingOffsets=one_partition(name, end))
        assert got == truth_between(name, start, end), (start, end)


@pytest.mark.parametrize("name", ["v2-none-0", "compact-v1-gzip-0"])
def test_earliest_and_latest(name):
    everything = truth(name)
    assert records(name, startingOffsets="earliest", endingOffsets="latest") == everything
    assert records(name, startingOffsets=one_partition(name, -2), endingOffsets=one_partition(name, -1)) \
        == everything
    assert records(name, startingOffsets=one_partition(name, 123)) == truth_between(name, 123, None)


@pytest.mark.parametrize("name", REAL_DIRS)
def test_latest_is_the_brokers_log_end_offset(name):
    """A starting timestamp after every record with strategy latest starts at the log end offset:
    the one the broker reported, compacted and transactional logs included."""
    storage, path = open_storage(str(REALKAFKA / name))
    (part,) = find_partitions(storage, path)
    bounds = OffsetRange.parse({"startingtimestamp": str(2 ** 62),
                                "startingoffsetsbytimestampstrategy": "latest"})
    assert bounds.resolve(PartitionReader(part), topic(name), 0) == (log_end_offset(name), None)


def test_whole_segments_before_the_start_are_not_read():
    _, units = read_all(REALKAFKA / "v2-none-0", startingOffsets=one_partition("v2-none-0", 400),
                        endingOffsets=one_partition("v2-none-0", 450))
    bases = sorted({r.segment_base for u in units for r in u.ranges})
    assert bases == [399, 416, 422, 441]  # the segments holding offsets 400..449


def first_index_entry(name: str) -> tuple[str, int, int]:
    """(segment file, offset, position) of the first `.index` entry kafka-dump-log listed."""
    file = None
    for line in (REALKAFKA / f"{name}.truth" / "dump-index.txt").read_text().splitlines():
        if line.startswith("Dumping "):
            file = line.split()[1]
        elif line.startswith("offset:"):
            _, offset, _, position = line.split()
            return file, int(offset), int(position)
    raise AssertionError(f"{name} has no index entry")


@pytest.mark.parametrize("name", ["v2-none-0", "v1-gzip-0", "v0-none-0"])
def test_ranges_of_a_cut_segment_before_the_start_are_not_read(name):
    """A segment cut at its `.index` entries (small maxBytesPerSplit): starting at an indexed
    offset, the ranges before that entry's position are not planned, and the rows stay right."""
    file, start, position = first_index_entry(name)
    base = int(file.rsplit("/", 1)[-1].split(".")[0])
    rows, units = read_all(REALKAFKA / name, maxBytesPerSplit=512, startingOffsets=one_partition(name, start))
    assert as_consumer_records(rows) == truth_between(name, start, None)
    first = units[0].ranges[0]
    assert (first.segment_base, first.start) == (base, position)


# --- timestamps ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", TIMESTAMPED)
def test_starting_timestamp_is_the_first_offset_at_or_after_it(name):
    for ts in probe_timestamps(name):
        expected = first_offset_at_or_after(name, ts)
        if expected is None:
            continue  # no record reaches it: see the strategy tests
        assert records(name, startingTimestamp=ts) == truth_between(name, expected, None), ts


@pytest.mark.parametrize("name", OUT_OF_ORDER)
def test_out_of_order_timestamps_are_not_a_filter(name):
    """After the first offset at or after t come records older than t: Kafka's consumer reads them
    (it seeks to an offset), so the data source does too."""
    differs = 0
    for ts in probe_timestamps(name):
        if first_offset_at_or_after(name, ts) is None:
            continue
        got = records(name, startingTimestamp=ts)
        differs += got != [r for r in truth(name) if r["timestamp"] >= ts]
    assert differs > 0


@pytest.mark.parametrize("name", ["v2-none-0", "v1-lz4-0", TXN, "v2-logappendtime-none-0"])
def test_ending_timestamp_is_exclusive_and_latest_when_nothing_reaches_it(name):
    for ts in probe_timestamps(name):
        end = first_offset_at_or_after(name, ts)
        assert records(name, endingTimestamp=ts) == truth_between(name, None, end), ts


def test_timestamps_by_partition_and_their_precedence(two_topics):
    a, b = "v2-none-0", "v1-gzip-0"
    ta = probe_timestamps(a)[5]
    tb = probe_timestamps(b)[-4]
    options = {"subscribe": f"{topic(a)},{topic(b)}",
               "startingOffsetsByTimestamp": json.dumps({topic(a): {"0": ta}, topic(b): {"0": -2}}),
               "endingOffsetsByTimestamp": json.dumps({topic(a): {"0": -1}, topic(b): {"0": tb}}),
               # the timestamp options take precedence over the offsets, as in Spark
               "startingOffsets": json.dumps({topic(a): {"0": 499}, topic(b): {"0": 399}})}
    rows, _ = read_all(two_topics, **options)
    by_topic = {t: [r for r, rt in zip(as_consumer_records(rows), rows.column("topic").to_pylist())
                    if rt == t] for t in (topic(a), topic(b))}
    assert by_topic[topic(a)] == truth_between(a, first_offset_at_or_after(a, ta), None)
    assert by_topic[topic(b)] == truth_between(b, None, first_offset_at_or_after(b, tb))
    single = records(a, startingTimestamp=ta, startingOffsetsByTimestamp=one_partition(a, 0))
    assert single == truth_between(a, first_offset_at_or_after(a, ta), None)


def test_a_starting_timestamp_no_record_reaches():
    late = max(r["timestamp"] for r in consumer_records("v2-none-0")) + 1
    with pytest.raises(ValueError, match="no record of v2-none-0 has a timestamp at or after .*"
                                         "startingOffsetsByTimestampStrategy=latest"):
        read_all(REALKAFKA / "v2-none-0", startingTimestamp=late)
    assert records("v2-none-0", startingTimestamp=late, startingOffsetsByTimestampStrategy="LATEST") == []
    # v0 messages have no timestamp (-1): no timestamp is ever reached
    with pytest.raises(ValueError, match="no record of v0-none-0"):
        read_all(REALKAFKA / "v0-none-0", startingTimestamp=0)


def test_control_records_count_for_a_timestamp_lookup():
    """A transaction marker is a record of the log: ListOffsets can answer with its offset, and the
    read starts there (with the next data record, since consumers skip markers)."""
    from support.corpus_truth import control_records

    offset, ts = control_records(TXN)[0]
    expected = first_offset_at_or_after(TXN, ts)
    assert records(TXN, startingTimestamp=ts) == truth_between(TXN, expected, None)


# --- minPartitions -------------------------------------------------------------------------------

@pytest.mark.parametrize("name, wanted", [("v2-none-0", 8), ("v1-gzip-0", 5), (TXN, 3)])
def test_min_partitions_cuts_more_tasks_for_the_same_rows(name, wanted):
    rows, units = read_all(REALKAFKA / name)
    more, more_units = read_all(REALKAFKA / name, minPartitions=wanted)
    assert len(units) < wanted <= len(more_units)
    assert more.equals(rows)


# --- refusals ------------------------------------------------------------------------------------

@pytest.mark.parametrize("options, words", [
    ({"startingOffsets": "latest"}, "startingOffsets can't be latest for batch queries"),
    ({"endingOffsets": "earliest"}, "endingOffsets can't be earliest for batch queries"),
    ({"startingOffsets": one_partition("v2-none-0", -1)}, "starting offset of v2-none-0 can't be latest"),
    ({"endingOffsets": one_partition("v2-none-0", -2)}, "ending offset of v2-none-0 can't be earliest"),
    ({"startingOffsets": one_partition("v2-none-0", -7)}, "the offset -7"),
    ({"startingOffsets": "the beginning"}, "startingOffsets must be earliest, latest or JSON"),
    ({"endingOffsets": '{"v2-none": [0]}'}, "endingOffsets must be a JSON object of topics"),
    ({"startingOffsetsByTimestamp": "{"}, "startingOffsetsByTimestamp is not JSON"),
    ({"startingTimestamp": "yesterday"}, "startingTimestamp must be an integer"),
    ({"endingTimestamp": "-5"}, "endingTimestamp must be milliseconds since the epoch"),
    ({"startingOffsetsByTimestampStrategy": "skip"}, "startingOffsetsByTimestampStrategy must be"),
    ({"minPartitions": "0"}, "minPartitions must be a positive integer"),
    ({"failOnDataLoss": "false"}, "unsupported option(s) failondataloss"),
    ({"kafka.bootstrap.servers": "localhost:9092"}, "unsupported option(s) kafka.bootstrap.servers"),
])
def test_bad_range_options_are_refused_by_name(options, words):
    with pytest.raises(ValueError) as err:
        SourceOptions.parse({"path": str(REALKAFKA / "v2-none-0"), **options})
    assert words in str(err.value)


@pytest.mark.parametrize("option", ["startingOffsets", "endingOffsetsByTimestamp"])
def test_json_must_name_exactly_the_partitions_read(option, two_topics):
    with pytest.raises(ValueError, match=f"{option} must give every partition the query reads.*"
                                         "it gives v2-none-0, the query reads v1-gzip-0, v2-none-0"):
        read_all(two_topics, **{option: one_partition("v2-none-0", 5)})


def test_a_start_after_the_end_is_refused():
    with pytest.raises(ValueError, match="starting offset 300 of v2-none-0 is after its ending offset 200"):
        read_all(REALKAFKA / "v2-none-0", startingOffsets=one_partition("v2-none-0", 300),
                 endingOffsets=one_partition("v2-none-0", 200))


# --- through Spark -------------------------------------------------------------------------------

@pytest.mark.spark
def test_spark_sql_over_a_time_window():
    from kfmt.pipelines.datasource import register
    from kfmt.pipelines.session import spark_session, stop_session

    name = "v2-none-0"
    t1, t2 = probe_timestamps(name)[3], probe_timestamps(name)[-6]
    spark = spark_session("local[2]")
    try:
        register(spark)
        df = (spark.read.format("kafka-log").option("startingTimestamp", str(t1))
              .option("endingTimestamp", str(t2)).option("minPartitions", "4").load(str(REALKAFKA / name)))
        df.createOrReplaceTempView("window")
        (count, low, high), = spark.sql("SELECT count(*), min(offset), max(offset) FROM window").collect()
    finally:
        stop_session()
    expected = truth_between(name, first_offset_at_or_after(name, t1), first_offset_at_or_after(name, t2))
    assert (count, low, high) == (len(expected), expected[0]["offset"], expected[-1]["offset"])


# --- workers without kfmt ------------------------------------------------------------------------

@pytest.mark.spark
def test_register_says_in_one_line_when_workers_cannot_import_kfmt(monkeypatch):
    """Workers running an interpreter without kfmt (the system python3; Spark gives its workers
    pyspark itself): register() fails with one line naming that interpreter and the fix."""
    from kfmt.errors import KfmtError
    from kfmt.pipelines.datasource import register
    from kfmt.pipelines.session import spark_session, stop_session

    system_python = shutil.which("python3", path="/usr/bin")
    if system_python is None or subprocess.run([system_python, "-c", "import kfmt.pipelines"],
                                               capture_output=True, cwd="/").returncode == 0:
        pytest.skip("no python3 without kfmt in /usr/bin")
    monkeypatch.setenv("PYSPARK_PYTHON", system_python)
    monkeypatch.setenv("KFMT_SHIP", "never")  # only the check (shipping: the test below)
    with pytest.raises(KfmtError) as err:  # kfmt's session checks the workers itself
        spark_session("local[1]")
    stop_session()
    from pyspark.sql import SparkSession

    # a session the user built, and register(spark) in it
    spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
             .config("spark.driver.bindAddress", "127.0.0.1").getOrCreate())
    try:
        with pytest.raises(KfmtError) as again:
            register(spark)
    finally:
        spark.stop()
    for message in (str(err.value), str(again.value)):
        assert "\n" not in message
        assert f"Spark's Python workers ({system_python}) cannot import kfmt" in message
        # (a worker started in a checkout finds its kfmt/ folder, without the installed kfmt.pipelines)
        assert re.search(r"No module named 'kfmt(\.pipelines)?'", message) and "PYSPARK_PYTHON" in message
        assert "KFMT_SHIP=auto, not never" in message


@pytest.mark.spark
def test_shipping_to_workers_without_pysparks_requirements_says_what_they_lack(monkeypatch, tmp_path):
    """The system python3 has neither kfmt nor pyarrow/numpy: kfmt and its dependencies are shipped,
    and the line then names what the workers still lack (PySpark's own requirements) and that the
    rest was shipped."""
    from kfmt.errors import KfmtError
    from kfmt.pipelines.session import spark_session, stop_session

    system_python = shutil.which("python3", path="/usr/bin")
    if system_python is None or subprocess.run([system_python, "-c", "import numpy"],
                                               capture_output=True, cwd="/").returncode == 0:
        pytest.skip("optional resource missing: this check needs a system python3 in /usr/bin without numpy")
    monkeypatch.setenv("PYSPARK_PYTHON", system_python)
    monkeypatch.setenv("KFMT_SHIP_CACHE", str(tmp_path / "cache"))
    try:
        with pytest.raises(KfmtError) as err:
            spark_session("local[1]")
    finally:
        stop_session()
    message = str(err.value)
    assert "\n" not in message
    # (local workers start in the JVM's directory: in a checkout, its kfmt/ folder comes first)
    assert re.search(r"cannot import kfmt \(ModuleNotFoundError: No module named '(numpy|pyarrow|kfmt.pipelines)', "
                     r"with kfmt "
                     r"and \d+ dependencies shipped to them\); give PYSPARK_PYTHON an interpreter with "
                     r"PySpark's own requirements", message), message
