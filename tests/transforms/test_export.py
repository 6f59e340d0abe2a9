"""kfmt export against independent truth: every corpus partition exported and read back with pyarrow
equals what the Java consumer read (records.jsonl.gz; the read_committed file for the transactional
topic), and its on-disk columns equal kafka-dump-log's listing of the batches; Spark reads the
exported log directory back the same; and the contract (CLI.md): JSON Lines, --partition-by date,
--include-control, S3, --dry-run, exit codes 2 and 65 with nothing published, the report's digests.

Spark tests share one session for the module (local[2]) and are kept few.
"""
from __future__ import annotations

import base64
import datetime
import gzip
import hashlib
import json
import re
import shutil
import struct
from functools import cache
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder
from support.cli import run_kfmt
from support.corpus import REAL_DIRS, REALKAFKA
from support.corpus_truth import control_records
from support.export_truth import (
    TS_TYPES,
    TXN,
    as_consumer_records,
    b64,
    corrupted_copy,
    export,
    listing,
    open_transaction_partition,
    read_dataset,
    truth,
    utc_date,
)
from support.spark_session import plain_spark  # noqa: F401  (fixture `spark`: one Spark session for the module)

from kfmt.format.control import ControlType, control_key
from kfmt.format.digest import ContentDigest
from kfmt.format.javatext import java_string
from kfmt.partition.layout import find_partitions
from kfmt.partition.reader import PartitionReader
from kfmt.partition.transactions import AbortedTransaction, partition_outcomes
from kfmt.rows.columns import EXPORT_DDL, EXPORT_SCHEMA
from kfmt.storage.store import open_storage
from kfmt.transforms.export import REPORT_NAME
from kfmt.transforms.export_state import STATE_NAME


def truth_digest(records: list[dict]) -> str:
    from kfmt.format.model import make_records

    digest = ContentDigest()
    unb64 = lambda v: None if v is None else base64.b64decode(v)  # noqa: E731
    digest.update(make_records([r["offset"] for r in records], [r["timestamp"] for r in records],
                               [unb64(r["key"]) for r in records], [unb64(r["value"]) for r in records],
                               [[(h["key"].encode(), unb64(h["value"])) for h in r["headers"]]
                                for r in records]))
    return digest.hexdigest()


@cache
def record_sequences(name: str) -> dict:
    """offset -> sequence of each v2 record, from kafka-dump-log's deep iteration."""
    out = {}
    with gzip.open(REALKAFKA / f"{name}.truth" / "dump-log.deep.txt.gz", "rt", errors="replace") as f:
        for line in f:
            m = re.match(r"\| offset: (\d+) .*? sequence: (-?\d+) ", line)
            if m:
                out[int(m[1])] = int(m[2])
    return out


def check_on_disk_columns(name: str, table: pa.Table) -> None:
    """Every row's batch facts equal kafka-dump-log's for the batch at its (segment, position)."""
    batches = listing(name)
    sequences = record_sequences(name)
    for row in table.to_pylist():
        entry = batches[(row["segment_base_offset"], row["file_position"])]
        first = int(entry.get("baseOffset", entry.get("offset")))
        last = int(entry.get("lastOffset", entry.get("offset")))
        assert int(entry["magic"]) == row["magic"] and entry["compresscodec"] == row["compression"]
        assert row["batch_last_offset"] == last and row["batch_base_offset"] <= row["offset"] <= last
        if row["magic"] == 2:
            assert row["batch_base_offset"] == first
            assert (row["producer_id"], row["producer_epoch"], row["partition_leader_epoch"]) == \
                (int(entry["producerId"]), int(entry["producerEpoch"]), int(entry["partitionLeaderEpoch"]))
            assert (row["is_transactional"], row["is_control"]) == \
                (entry["isTransactional"] == "true", entry["isControl"] == "true")
            assert row["sequence"] == sequences[row["offset"]]
        else:
            assert (row["producer_id"], row["producer_epoch"], row["sequence"],
                    row["partition_leader_epoch"], row["is_transactional"], row["is_control"]) == \
                (-1, -1, -1, -1, False, False)
        assert row["topic"] == name.rsplit("-", 1)[0] and row["partition"] == 0
        assert row["header_key_bytes"] is None  # the corpus's header keys are all UTF-8


# --- every corpus directory ------------------------------------------------------------------------

@pytest.mark.parametrize("name", REAL_DIRS)
def test_export_equals_the_consumer_and_the_dump(name, tmp_path):
    dst = tmp_path / "out"
    result = export(REALKAFKA / name, dst)
    assert result.code == 0, result.err
    table = read_dataset(dst)
    assert table.schema == EXPORT_SCHEMA
    expected = truth(name)
    assert as_consumer_records(table) == expected
    check_on_disk_columns(name, table)
    report = json.loads((dst / REPORT_NAME).read_text())
    (inp,), (out,) = report["inputs"], report["outputs"]
    assert inp["content_digest"] == out["content_digest"] == truth_digest(expected)
    assert inp["records"] == out["records"] == len(expected)
    # the report lists every file written, with its true size and hash
    files = {str(p.relative_to(dst)): p for p in dst.rglob("*") if p.is_file() and p.name[0] != "_"}
    assert set(report["files"]) == set(files)
    for rel, p in files.items():
        assert report["files"][rel]["sha256"] == hashlib.sha256(p.read_bytes()).hexdigest()
    assert report["duration_ms"] >= 0 and report["totals"]["content_unchanged"]


def test_read_committed_equals_the_committed_consumer(tmp_path):
    dst = tmp_path / "out"
    result = export(REALKAFKA / TXN, dst, "--isolation", "read_committed")
    assert result.code == 0, result.err
    table = read_dataset(dst)
    assert as_consumer_records(table) == truth(TXN, committed=True)
    check_on_disk_columns(TXN, table)
    (inp,) = json.loads((dst / REPORT_NAME).read_text())["inputs"]
    assert inp["content_digest"] == truth_digest(truth(TXN, committed=True))
    # 212 data records, 173 committed: the rest are aborted; the 6 markers are control records
    assert inp["left_out_records"] == {"aborted": 212 - 173, "control": 6}


def test_transaction_outcomes_equal_the_brokers_txnindex():
    """The first stage's aborted transactions are exactly the broker's .txnindex entries."""
    storage, path = open_storage(str(REALKAFKA / TXN))
    (part,) = find_partitions(storage, path)
    text = (REALKAFKA / f"{TXN}.truth" / "dump-txnindex.txt").read_text()
    broker = [AbortedTransaction(int(m[1]), int(m[2]), int(m[3]))
              for m in re.finditer(r"producerId: (\d+) firstOffset: (\d+) lastOffset: (\d+)", text)]
    outcomes = partition_outcomes(PartitionReader(part))
    assert outcomes.aborted == broker and len(broker) == 2
    assert outcomes.last_stable_offset is None  # every transaction ended


@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_include_control_exports_the_markers(tmp_path, isolation):
    dst = tmp_path / "out"
    assert export(REALKAFKA / TXN, dst, "--include-control", "--isolation", isolation).code == 0
    table = read_dataset(dst)
    control = [r for r in table.to_pylist() if r["is_control"]]
    markers = control_records(TXN)  # (offset, timestamp) from kafka-dump-log's deep iteration
    assert [(r["offset"], r["timestamp_ms"]) for r in control] == list(markers)
    kinds = [struct.unpack(">hh", r["key"])[1] for r in control]
    assert set(kinds) <= {ControlType.ABORT, ControlType.COMMIT} and kinds.count(ControlType.ABORT) == 2
    assert all(r["key"] == control_key(ControlType(k)) for r, k in zip(control, kinds))
    data = table.filter(pa.compute.invert(table.column("is_control")))
    assert as_consumer_records(data) == truth(TXN, committed=isolation == "read_committed")
    report = json.loads((dst / REPORT_NAME).read_text())
    assert report["outputs"][0]["control_records"] == 6


# --- layout, formats ------------------------------------------------------------------------------

def test_layout_is_hive_style_with_reproducible_names(tmp_path):
    dst = tmp_path / "out"
    assert export(REALKAFKA / "v2-none-0", dst).code == 0
    files = sorted(p.relative_to(dst).as_posix() for p in dst.rglob("*.parquet"))
    # one task for the whole small partition: one file, named after its first segment
    assert files == ["topic=v2-none/partition=0/part-00000000000000000000-0000-c000.parquet"]
    assert sorted(p.name for p in dst.iterdir()) == ["_SUCCESS", STATE_NAME, REPORT_NAME, "topic=v2-none"]
    # topic and partition are in the path only, as a Spark writer leaves them
    one = pq.read_table(dst / files[0])
    assert "topic" not in one.column_names and "partition" not in one.column_names
    # a second run writes the same files, byte for byte
    again = tmp_path / "again"
    assert export(REALKAFKA / "v2-none-0", again).code == 0
    assert all((dst / f).read_bytes() == (again / f).read_bytes() for f in files)


def test_partition_by_date(tmp_path):
    logdir = tmp_path / "logdir"
    for name in ("v0-gzip-0", "v2-lz4-0", "v1-logappendtime-gzip-0"):
        shutil.copytree(REALKAFKA / name, logdir / name)
    dst = tmp_path / "out"
    assert export(logdir, dst, "--partition-by", "topic,partition,date").code == 0
    table = read_dataset(dst, by_date=True)
    expected_dirs = set()
    for topic in ("v0-gzip", "v2-lz4", "v1-logappendtime-gzip"):
        records = truth(f"{topic}-0")
        dates = [utc_date(r["timestamp"]) for r in records]
        expected_dirs |= {f"topic={topic}/partition=0/date={d}" for d in dates}
        rows = table.filter(pa.compute.equal(table.column("topic"), topic))
        assert as_consumer_records(rows.drop_columns(["date"])) == records
        assert rows.column("date").to_pylist() == dates
    assert {p.parent.relative_to(dst).as_posix() for p in dst.rglob("*.parquet")} == expected_dirs
    # v0 has no timestamps: the consumer reports -1 ms, which is on 1969-12-31
    assert "topic=v0-gzip/partition=0/date=1969-12-31" in expected_dirs
    # the date is in the path only
    assert "date" not in pq.read_table(next(dst.rglob("*.parquet"))).column_names


@pytest.mark.parametrize("name", ["v2-none-0", "v0-snappy-0", TXN])
def test_json_lines(tmp_path, name):
    dst = tmp_path / "out"
    result = export(REALKAFKA / name, dst, "--format", "jsonl", "--include-control",
                    "--partition-by", "topic,partition,date")
    assert result.code == 0, result.err
    objects = sorted(({**json.loads(line), "date": f.parent.name.removeprefix("date=")}
                      for f in dst.rglob("*.jsonl") for line in f.read_text().splitlines()),
                     key=lambda o: o["offset"])
    file_columns = [n for n in EXPORT_SCHEMA.names if n not in ("topic", "partition")]
    assert all(list(o) == file_columns + ["date"] for o in objects)
    assert all(o["date"] == utc_date(o["timestamp_ms"]).isoformat() for o in objects)
    data = [o for o in objects if not o["is_control"]]
    epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
    got = [{"offset": o["offset"],
            "timestamp": (datetime.datetime.fromisoformat(o["timestamp"].replace("Z", "+00:00")) - epoch)
            // datetime.timedelta(milliseconds=1),
            "timestampType": TS_TYPES[o["timestampType"]], "key": o["key"], "value": o["value"],
            "headers": o["headers"] or [], "leaderEpoch": None if o["partition_leader_epoch"] < 0
            else o["partition_leader_epoch"]} for o in data]
    assert got == truth(name)
    assert all(o["timestamp"].endswith("Z") for o in objects)
    assert len(objects) - len(data) == len(control_records(name))


def test_topic_and_partition_filters(tmp_path):
    logdir = tmp_path / "logdir"
    for name in ("v2-none-0", "v2-lz4-0", "v1-gzip-0"):
        shutil.copytree(REALKAFKA / name, logdir / name)
    (logdir / "v2-empty-3").mkdir()  # a partition without segments yet
    (logdir / "meta.properties").write_text("broker.id=0\n")
    dst = tmp_path / "out"
    assert export(logdir, dst, "--topic", "v2-*").code == 0
    assert sorted(p.name for p in dst.iterdir()) == ["_SUCCESS", STATE_NAME, REPORT_NAME,
                                                      "topic=v2-lz4", "topic=v2-none"]
    report = json.loads((dst / REPORT_NAME).read_text())
    assert [(p["topic"], p["partition"], p["records"]) for p in report["inputs"]] == \
        [("v2-empty", 3, 0), ("v2-lz4", 0, 500), ("v2-none", 0, 500)]
    assert export(logdir, tmp_path / "none", "--topic", "v2-*", "--partition", "7").code == 2
    assert not (tmp_path / "none").exists()


def test_split_segments_give_the_same_rows(tmp_path):
    """Segments cut into byte ranges at index positions export the same rows as whole segments."""
    whole, split = tmp_path / "whole", tmp_path / "split"
    assert export(REALKAFKA / "v1-none-0", whole).code == 0
    assert export(REALKAFKA / "v1-none-0", split, "--max-bytes-per-task", "1500").code == 0
    assert len(list(split.rglob("*.parquet"))) > len(list(whole.rglob("*.parquet")))
    assert read_dataset(split).equals(read_dataset(whole))


# --- header keys that are not UTF-8, timestamps Spark cannot hold ---------------------------------

class RawKey(str):
    """A header key kafka-python writes as the given bytes (it calls key.encode("utf-8"))."""

    def __new__(cls, raw: bytes):
        obj = super().__new__(cls, "x")
        obj.raw = raw
        return obj

    def encode(self, *args, **kwargs):
        return self.raw


def peer_partition(directory: Path, records: list[tuple]) -> Path:
    """A one-segment partition directory holding one v2 batch kafka-python built."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 20)
    for i, (ts, key, value, headers) in enumerate(records):
        assert builder.append(i, timestamp=ts, key=key, value=value, headers=headers) is not None
    directory.mkdir(parents=True)
    (directory / "00000000000000000000.log").write_bytes(bytes(builder.build()))
    return directory


def test_header_keys_decode_as_java_and_keep_their_bytes(tmp_path):
    # Java's UTF-8 decoder: an encoded surrogate (ED A0 80) is ONE U+FFFD, a stray FF one, and a
    # sequence cut short by the end one; Python's "replace" would give three for the first.
    keys = [b"ok", b"\xed\xa0\x80", b"a\xffb", b"caf\xc3"]
    src = peer_partition(tmp_path / "weird-0", [
        (1700000000000, b"k", b"v", [(RawKey(keys[0]), b"1")]),
        (1700000000001, b"k", b"v", [(RawKey(keys[1]), None), (RawKey(keys[0]), b"")]),
        (1700000000002, None, None, [(RawKey(keys[2]), b"2"), (RawKey(keys[3]), b"3")]),
        (1700000000003, b"k", b"v", []),
    ])
    dst = tmp_path / "out"
    result = export(src, dst)
    assert result.code == 0, result.err
    rows = read_dataset(dst).to_pylist()
    assert [r["headers"] for r in rows] == [
        [{"key": "ok", "value": b"1"}],
        [{"key": "\ufffd", "value": None}, {"key": "ok", "value": b""}],
        [{"key": "a\ufffdb", "value": b"2"}, {"key": "caf\ufffd", "value": b"3"}],
        None,  # no headers: null, as Spark's Kafka source gives it
    ]
    assert [r["header_key_bytes"] for r in rows] == [None, [keys[1], keys[0]], [keys[2], keys[3]], None]
    (inp,), (out,) = (json.loads((dst / REPORT_NAME).read_text())[k] for k in ("inputs", "outputs"))
    assert inp["content_digest"] == out["content_digest"]


def test_a_timestamp_spark_cannot_hold_is_bad_data(tmp_path):
    src = peer_partition(tmp_path / "far-0", [(1700000000000, b"k", b"v", []), (2**62, b"k", b"v", [])])
    result = export(src, tmp_path / "out")
    assert result.code == 65
    assert re.search(r"far-0/00000000000000000000\.log, position 0, offset 1: timestamp \d+ ms is out of "
                     r"the range of Spark's timestamp type", result.err)
    assert not (tmp_path / "out").exists()


# --- read_committed with an open transaction --------------------------------------------------------


@pytest.mark.parametrize("include_control", [False, True])
def test_nothing_at_or_after_the_last_stable_offset(tmp_path, include_control):
    src = open_transaction_partition(tmp_path)
    dst = tmp_path / "out"
    extra = ["--include-control"] if include_control else []
    result = export(src, dst, "--isolation", "read_committed", *extra)
    assert result.code == 0, result.err
    rows = read_dataset(dst)
    assert rows.column("offset").to_pylist() == ([0, 1, 2, 3] if include_control else [0, 1, 2])
    (inp,) = json.loads((dst / REPORT_NAME).read_text())["inputs"]
    left_out = {"aborted": 2, "beyond_last_stable_offset": 4, "control": 1}
    if include_control:
        del left_out["control"]
    assert inp["left_out_records"] == left_out
    # kfmt cat applies the same rule
    cat = run_kfmt("cat", src, "--isolation", "read_committed", "--format", "json", *extra)
    assert [json.loads(line)["offset"] for line in cat.lines] == rows.column("offset").to_pylist()
    # and read_uncommitted sees every data record
    assert export(src, tmp_path / "all").code == 0
    assert read_dataset(tmp_path / "all").column("offset").to_pylist() == [0, 1, 2, 4, 5, 6, 7, 9]


def test_odd_directory_names_are_escaped_as_spark_does(tmp_path):
    src = open_transaction_partition(tmp_path).rename(tmp_path / "odd%name:x=y-0")
    dst = tmp_path / "out"
    assert export(src, dst).code == 0
    assert [p.name for p in dst.iterdir() if p.is_dir()] == ["topic=odd%25name%3Ax%3Dy"]
    table = read_dataset(dst)  # pyarrow decodes the directory name
    assert set(table.column("topic").to_pylist()) == {"odd%name:x=y"}


# --- byte-exact for any record (property) ----------------------------------------------------------

RECORD = st.tuples(
    st.integers(-1, 2**44),  # timestamp (ms)
    st.none() | st.binary(max_size=12),  # key
    st.none() | st.binary(max_size=40),  # value
    st.lists(st.tuples(  # headers: keys of any bytes, some malformed for Java's decoder on purpose
        st.binary(max_size=6) | st.sampled_from([b"\xed\xa0\x80", b"\xff", "\u00e9t\u00e9".encode()]),
        st.none() | st.binary(max_size=8)), max_size=3))


def made_partition(root: Path, batches: list[list[tuple]]) -> Path:
    """A partition of v2 batches (kfmt's encoder) holding these records, offsets from 0."""
    from kfmt.format.model import BatchHeader, make_records
    from kfmt.plugin import registry

    entries, offset = [], 0
    for records in batches:
        n = len(records)
        stamps = [r[0] for r in records]
        header = BatchHeader(magic=2, base_offset=offset, last_offset=offset + n - 1,
                             base_timestamp=stamps[0], max_timestamp=max(stamps))
        entries.append(registry.get().format_for(2).encode(header, make_records(
            list(range(offset, offset + n)), stamps, [r[1] for r in records], [r[2] for r in records],
            [r[3] for r in records])))
        offset += n
    part = root / "made-0"
    part.mkdir(parents=True)
    (part / "00000000000000000000.log").write_bytes(b"".join(entries))
    return part


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(st.lists(RECORD, min_size=1, max_size=6), min_size=1, max_size=3),
       fmt=st.sampled_from(["parquet", "jsonl"]))
def test_any_record_exports_byte_exact(tmp_path_factory, batches, fmt):
    from kfmt.transforms.export import ExportOptions
    from kfmt.transforms.export import export as run_export

    root = tmp_path_factory.mktemp("made")
    src = made_partition(root, batches)
    run_export(str(src), str(root / "out"), options=ExportOptions(format=fmt), master="inprocess",
               progress=False)
    if fmt == "parquet":
        rows = read_dataset(root / "out").to_pylist()
    else:
        rows = [json.loads(line) for f in sorted((root / "out").rglob("*.jsonl"))
                for line in f.read_text().splitlines()]
        unb64 = lambda v: None if v is None else base64.b64decode(v)  # noqa: E731
        for r in rows:
            r["key"], r["value"] = unb64(r["key"]), unb64(r["value"])
            r["headers"] = r["headers"] and [{"key": h["key"], "value": unb64(h["value"])}
                                             for h in r["headers"]]
            r["header_key_bytes"] = r["header_key_bytes"] and [unb64(k) for k in r["header_key_bytes"]]
    records = [r for batch in batches for r in batch]
    assert [r["offset"] for r in rows] == list(range(len(records)))
    for row, (ts, key, value, headers) in zip(rows, records):
        assert (row["timestamp_ms"], row["key"], row["value"]) == (ts, key, value)
        if not headers:
            assert row["headers"] is None and row["header_key_bytes"] is None
            continue
        assert [h["value"] for h in row["headers"]] == [v for _, v in headers]
        raw = [k for k, _ in headers]
        assert [h["key"] for h in row["headers"]] == [java_string(k) for k in raw]
        try:
            decoded = [k.decode("utf-8") for k in raw]
        except UnicodeDecodeError:
            assert row["header_key_bytes"] == raw  # the stored bytes, where the strings are lossy
        else:
            assert row["header_key_bytes"] is None and [h["key"] for h in row["headers"]] == decoded


# --- the contract: dry run, exit codes, nothing published on failure -------------------------------

def test_dry_run_prints_the_plan_and_writes_nothing(tmp_path):
    dst = tmp_path / "out"
    result = export(REALKAFKA / TXN, dst, "--dry-run", "--isolation", "read_committed")
    assert result.code == 0, result.err
    assert f"export {REALKAFKA / TXN} -> {dst}: parquet" in result.out
    assert "txn-v2-none-0 -> topic=txn-v2-none/partition=0/: 12 segment(s)" in result.out
    plan = json.loads(export(REALKAFKA / TXN, dst, "--dry-run", "--output", "json").out)
    assert plan["partitions"][0]["destination"] == "topic=txn-v2-none/partition=0"
    assert not dst.exists() and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("dry_run", [False, True])
def test_a_destination_that_is_not_empty_is_a_usage_error(tmp_path, dry_run):
    dst = tmp_path / "out"
    dst.mkdir()
    (dst / "keep").write_text("mine")
    result = export(REALKAFKA / "v2-none-0", dst, *(["--dry-run"] if dry_run else []))
    assert result.code == 2 and "not empty" in result.err
    assert [p.name for p in dst.iterdir()] == ["keep"]


@pytest.mark.parametrize("args", [["--partition-by", "date"], ["--partition-by", "partition,topic"],
                                  ["--max-bytes-per-task", "0"], ["--target-file-size", "0"],
                                  ["--format", "csv"]])
def test_bad_options_are_usage_errors(tmp_path, args):
    assert export(REALKAFKA / "v2-none-0", tmp_path / "out", *args).code == 2


def test_a_destination_inside_the_source_is_refused(tmp_path):
    src = tmp_path / "logdir"
    shutil.copytree(REALKAFKA / "v2-none-0", src / "v2-none-0")
    before = sorted(p.relative_to(src) for p in src.rglob("*"))
    for dst in (src / "out", src / "v2-none-0" / "out"):
        result = export(src, dst)
        assert result.code == 2 and "inside the source" in result.err
    assert sorted(p.relative_to(src) for p in src.rglob("*")) == before


@pytest.mark.parametrize("master", ["inprocess", "spark"])
def test_bad_data_exits_65_and_publishes_nothing(tmp_path, master, request):
    src, position = corrupted_copy(tmp_path)
    dst = tmp_path / "out"
    if master == "spark":
        request.getfixturevalue("spark")
        result = run_kfmt("export", src, dst, "--master", "local[2]", "--no-progress")
    else:
        result = export(src, dst)
    assert result.code == 65, result.err
    log = sorted(src.glob("*.log"))[2]
    assert f"{log}, position {position}, offset " in result.err and "CRC" in result.err.upper()
    assert len(result.err.strip().splitlines()) == 1
    assert not dst.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["v2-gzip-0"]


def test_rows_built_wrong_fail_the_job(tmp_path, monkeypatch):
    """A bug in building the export rows (here: one value changed) is caught by the digest of the rows
    handed to the writer against the records read: exit 1, one line, nothing published."""
    from kfmt.rows import columns

    real = columns._export_rows

    def one_value_changed(*args, **kwargs):
        rows = real(*args, **kwargs)
        values = rows.column("value").to_pylist()
        values[-1] = (values[-1] or b"") + b"!"
        return rows.set_column(1, "value", pa.array(values, pa.binary()))

    monkeypatch.setattr(columns, "_export_rows", one_value_changed)
    dst = tmp_path / "out"
    result = export(REALKAFKA / "v2-none-0", dst)
    assert result.code == 1
    assert len(result.err.strip().splitlines()) == 1 and "nothing was published" in result.err
    assert re.search(r"the rows written hold (\d+) records .* but \1 were read", result.err)
    assert not dst.exists()


def test_a_writer_losing_a_row_fails_the_job(tmp_path, monkeypatch):
    """A Parquet writer that loses a row is caught by the row count of the file's footer."""
    from kfmt.default_plugins.exporters import files as export_files

    real_write = export_files.ParquetFileWriter.write
    monkeypatch.setattr(export_files.ParquetFileWriter, "write",
                        lambda self, rows: real_write(self, rows.slice(1)))
    dst = tmp_path / "out"
    result = export(REALKAFKA / "v2-none-0", dst)
    assert result.code == 1
    assert len(result.err.strip().splitlines()) == 1 and "nothing was published" in result.err
    assert re.search(r"\.parquet: the file holds (\d+) rows but (\d+) were written to it", result.err)
    assert not dst.exists()


def test_json_lines_written_wrong_fail_the_job(tmp_path, monkeypatch):
    """JSON Lines are kfmt's own encoding: every file is read back and digested, so an encoder bug
    (here: one value changed) fails the job."""
    from kfmt.default_plugins.exporters import files as export_files

    real = export_files.rows_to_json_objects

    def one_value_changed(rows):
        objects = real(rows)
        objects[0]["value"] = base64.b64encode(b"changed").decode()
        return objects

    monkeypatch.setattr(export_files, "rows_to_json_objects", one_value_changed)
    dst = tmp_path / "out"
    result = export(REALKAFKA / "v2-none-0", dst, "--format", "jsonl")
    assert result.code == 1
    assert len(result.err.strip().splitlines()) == 1 and "nothing was published" in result.err
    assert re.search(r"\.jsonl: the file holds (\d+) rows \(digest \S+\) but \1 were written to it",
                     result.err)
    assert not dst.exists()


# --- Spark -----------------------------------------------------------------------------------------

@pytest.mark.spark
def test_spark_export_of_the_log_directory_reads_back_with_spark(spark, tmp_path):
    dst, same = tmp_path / "spark", tmp_path / "inprocess"
    result = run_kfmt("export", REALKAFKA, dst, "--partition-by", "topic,partition,date",
                      "--master", "local[2]", "--no-progress")
    assert result.code == 0, result.err
    # the same files as the same work done without Spark
    assert export(REALKAFKA, same, "--partition-by", "topic,partition,date").code == 0
    files = sorted(p.relative_to(dst) for p in dst.rglob("*.parquet"))
    assert files == sorted(p.relative_to(same) for p in same.rglob("*.parquet"))
    assert all((dst / f).read_bytes() == (same / f).read_bytes() for f in files)
    # Spark's partition discovery over the whole tree, without options (docs/export.md): the
    # partition columns come last, with the Kafka source's types
    df = spark.read.parquet(str(dst))
    expected_schema = spark.createDataFrame([], f"{EXPORT_DDL}, date date").schema
    assert df.columns[-3:] == ["topic", "partition", "date"]
    assert df.select(*expected_schema.names).schema.simpleString() == expected_schema.simpleString()
    rows = df.selectExpr("*", "unix_micros(timestamp) AS micros").collect()
    by_topic: dict = {}
    for r in rows:
        by_topic.setdefault(r["topic"], []).append(r)
    assert sorted(by_topic) == sorted(n.rsplit("-", 1)[0] for n in REAL_DIRS)
    for topic, topic_rows in by_topic.items():
        topic_rows.sort(key=lambda r: r["offset"])
        got = [{"offset": r["offset"], "timestamp": r["micros"] // 1000,
                "timestampType": TS_TYPES[r["timestampType"]], "key": b64(r["key"]), "value": b64(r["value"]),
                "headers": [{"key": h["key"], "value": b64(h["value"])} for h in r["headers"] or []],
                "leaderEpoch": None if r["partition_leader_epoch"] < 0 else r["partition_leader_epoch"]}
               for r in topic_rows]
        assert got == truth(f"{topic}-0"), topic
        assert all(r["micros"] == r["timestamp_ms"] * 1000 and r["partition"] == 0 for r in topic_rows)
        assert [r["date"] for r in topic_rows] == [utc_date(r["timestamp"]) for r in truth(f"{topic}-0")]


@pytest.mark.spark
def test_spark_reads_json_lines_with_the_export_schema(spark, tmp_path):
    parquet, jsonl = tmp_path / "parquet", tmp_path / "jsonl"
    assert export(REALKAFKA / TXN, parquet, "--include-control").code == 0
    assert export(REALKAFKA / TXN, jsonl, "--include-control", "--format", "jsonl").code == 0
    from_json = spark.read.schema(EXPORT_DDL).json(str(jsonl))
    from_parquet = spark.read.parquet(str(parquet))
    # the partition columns come last either way
    assert from_json.columns == from_parquet.columns
    assert from_json.orderBy("offset").collect() == from_parquet.orderBy("offset").collect()
    assert from_json.count() == 218


# --- S3 --------------------------------------------------------------------------------------------

@pytest.mark.s3
@pytest.mark.parametrize("master", ["inprocess", "spark"])
def test_export_to_s3(tmp_path, master, request, s3_server):
    import s3fs

    if master == "spark":
        request.getfixturevalue("spark")
    dst = s3_server.url(f"export-{master}-{tmp_path.name}")
    result = run_kfmt("export", REALKAFKA / TXN, dst, *s3_server.cli_options(), "--no-progress",
                      "--master", "local[2]" if master == "spark" else "inprocess",
                      "--isolation", "read_committed")
    assert result.code == 0, result.err
    fs = s3fs.S3FileSystem(**s3_server.storage_options, skip_instance_cache=True)
    root = dst[len("s3://"):]
    names = fs.find(root)
    assert {f"{root}/_kfmt_manifest.json", f"{root}/{REPORT_NAME}", f"{root}/_SUCCESS"} <= set(names)
    table = ds.dataset(root, filesystem=fs, partitioning="hive").to_table().sort_by("offset")
    assert as_consumer_records(table) == truth(TXN, committed=True)
