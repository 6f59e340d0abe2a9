"""The Python API (docs/python.md) against independent truth.

* `kfmt.read` streams export rows that real readers (DuckDB, Polars) query straight from the
  RecordBatchReader, compared with what a real Java consumer read from the same real-broker partitions
  (`records.jsonl.gz`, `records.read_committed.jsonl.gz`), and, for the log start offset, with what the
  broker reported after a DeleteRecords (`_retention/*/truth.json`).
* Each command function gives what its command prints with `--format json`, and writes the same
  bytes; errors are the same kfmt.errors the command prints.
* `import kfmt` stays light.
"""
from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa
import pytest
from support.cli import run_kfmt
from support.corpus import REALKAFKA, REPO
from support.corpus_truth import consumer_records, first_offset_at_or_after

import kfmt

SPARK_TIMESTAMP_TYPES = {"NoTimestampType": -1, "CreateTime": 0, "LogAppendTime": 1}
NOW_MS = 1_800_000_000_000  # one clock for runs compared with each other


def b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def as_consumer_record(row: dict) -> dict:
    """An export row in the corpus truth's form (what the Java consumer printed)."""
    kinds = {v: k for k, v in SPARK_TIMESTAMP_TYPES.items()}
    return {"offset": row["offset"], "timestamp": row["timestamp_ms"],
            "timestampType": kinds[row["timestampType"]], "key": b64(row["key"]), "value": b64(row["value"]),
            "headers": [{"key": h["key"], "value": b64(h["value"])} for h in row["headers"] or []],
            "leaderEpoch": row["partition_leader_epoch"] if row["partition_leader_epoch"] >= 0 else None}


def log_dir(tmp_path: Path, *names: str) -> Path:
    """A log directory holding copies of corpus partition directories (kfmt does not follow links
    out of a log directory)."""
    root = tmp_path / "logs"
    root.mkdir()
    for name in names:
        shutil.copytree(REALKAFKA / name, root / name)
    return root


# --- the reader, queried by real readers ---

def test_duckdb_queries_the_reader_and_sees_what_the_java_consumer_saw(realkafka):
    reader = kfmt.read(realkafka / "v2-none-0")
    assert isinstance(reader, pa.RecordBatchReader)
    result = duckdb.connect().sql('select * from reader order by "offset"').arrow()
    rows = (result.read_all() if isinstance(result, pa.RecordBatchReader) else result).to_pylist()
    assert [as_consumer_record(r) for r in rows] == list(consumer_records("v2-none-0"))
    assert {(r["topic"], r["partition"]) for r in rows} == {("v2-none", 0)}


def test_duckdb_aggregates_over_a_log_directory_with_topic_and_partition_selections(realkafka, tmp_path):
    root = log_dir(tmp_path, "v2-none-0", "v1-gzip-0", "v0-none-0")
    reader = kfmt.read(root, topics="v[12]-*")
    counts = dict(duckdb.connect().sql("select topic, count(*) from reader group by topic").fetchall())
    assert counts == {"v2-none": len(consumer_records("v2-none-0")), "v1-gzip": len(consumer_records("v1-gzip-0"))}
    only = duckdb.connect().from_arrow(kfmt.read(root, partitions=[0], topics="v0-*")).aggregate("count(*)").fetchall()
    assert only == [(len(consumer_records("v0-none-0")),)]
    with pytest.raises(kfmt.UsageError, match="no partition directories match"):
        kfmt.read(root, partitions=3)


def test_polars_reads_committed_records_of_the_transactional_partition(realkafka):
    frame = pl.from_arrow(kfmt.read(realkafka / "txn-v2-none-0", isolation="read_committed"))
    truth = consumer_records("txn-v2-none-0", "records.read_committed")
    assert len(truth) == 173 and frame.height == 173
    assert frame["offset"].to_list() == [r["offset"] for r in truth]
    assert [b64(v) for v in frame["value"].to_list()] == [r["value"] for r in truth]
    uncommitted = pl.from_arrow(kfmt.read(realkafka / "txn-v2-none-0"))
    assert uncommitted["offset"].to_list() == [r["offset"] for r in consumer_records("txn-v2-none-0")]


def test_control_records_only_when_asked(realkafka):
    with_control = pl.from_arrow(kfmt.read(realkafka / "txn-v2-none-0", include_control=True))
    markers = with_control.filter(pl.col("is_control"))
    assert markers.height == 6  # the corpus README: 212 data + 6 control records
    assert with_control.height == 212 + 6


def test_batches_are_bounded(realkafka):
    sizes = [b.num_rows for b in kfmt.read(realkafka / "v2-none-0", batch_rows=64)]
    assert sum(sizes) == 500 and max(sizes) <= 64 and len(sizes) >= 8


def test_offset_ranges(realkafka):
    reader = kfmt.read(realkafka / "v2-none-0", from_offset=100, to_offset=200)
    got = duckdb.connect().sql('select "offset" from reader order by "offset"').fetchall()
    truth = [r["offset"] for r in consumer_records("v2-none-0") if 100 <= r["offset"] < 200]
    assert [o for (o,) in got] == truth and len(truth) == 100
    assert kfmt.read(realkafka / "v2-none-0", from_offset=400, to_offset=400).read_all().num_rows == 0


@pytest.mark.parametrize("name", ["v2-none-0", "v1-gzip-0"])
def test_timestamp_ranges_follow_kafkas_offset_for_timestamp(realkafka, name):
    records = consumer_records(name)
    start_ts, end_ts = records[120]["timestamp"], records[300]["timestamp"]
    start, end = first_offset_at_or_after(name, start_ts), first_offset_at_or_after(name, end_ts)
    table = kfmt.read(realkafka / name, from_timestamp=start_ts, to_timestamp=end_ts).read_all()
    assert table.column("offset").to_pylist() == [r["offset"] for r in records if start <= r["offset"] < end]
    beyond = max(r["timestamp"] for r in records) + 1
    assert kfmt.read(realkafka / name, from_timestamp=beyond).read_all().num_rows == 0
    assert kfmt.read(realkafka / name, to_timestamp=beyond).read_all().num_rows == len(records)


def test_reading_starts_at_the_log_start_offset_unless_deleted_records_are_asked_for(realkafka, tmp_path):
    case = realkafka / "_retention" / "v2-none-delete-records"
    truth = json.loads((case / "truth.json").read_text())
    root = tmp_path / "logs"
    root.mkdir()
    shutil.copytree(case / "remaining", root / f"{truth['topic']}-0")
    (root / "log-start-offset-checkpoint").write_text(
        f"0\n1\n{truth['topic']} 0 {truth['log_start_offset_checkpoint']}\n")
    consumer = [r for r in consumer_records("v2-none-0") if r["offset"] >= truth["log_start_offset"]]
    rows = kfmt.read(root).read_all().to_pylist()
    assert [as_consumer_record(r) for r in rows] == consumer
    deleted = kfmt.read(root, include_deleted=True).read_all().column("offset").to_pylist()
    assert deleted[0] == truth["remaining_base_offsets"][0] < truth["log_start_offset"]
    assert deleted[-1] == truth["log_end_offset"] - 1
    [summary] = kfmt.open_log(root).partitions()
    assert summary.log_start_offset == truth["log_start_offset"]
    assert summary.first_segment_offset == truth["remaining_base_offsets"][0]


def test_a_damaged_partition_raises_the_data_error_the_cli_prints(realkafka, tmp_path):
    damaged = tmp_path / "v2-none-0"
    shutil.copytree(realkafka / "v2-none-0", damaged)
    segment = sorted(damaged.glob("*.log"))[3]
    data = bytearray(segment.read_bytes())
    data[80] ^= 0xFF  # inside the first batch's records: its CRC fails
    segment.write_bytes(bytes(data))
    with pytest.raises(kfmt.DataError) as caught:
        kfmt.read(damaged).read_all()
    cli = run_kfmt("cat", damaged)
    assert cli.code == 65
    assert cli.err.strip() == f"kfmt: error: {caught.value}"
    with pytest.raises(kfmt.DataError):
        pl.from_arrow(kfmt.read(damaged))
    reader = kfmt.read(damaged)
    with pytest.raises(duckdb.Error) as wrapped:  # DuckDB wraps what the stream raised, message kept
        duckdb.connect().sql("select count(*) from reader").fetchall()
    assert str(caught.value) in str(wrapped.value)


@pytest.mark.s3
def test_reading_from_s3_with_storage_options(realkafka, s3_server, s3_url):
    """A log directory on a real S3 server (SeaweedFS), read with its storage options as a dict."""
    from kfmt.storage.store import open_storage

    storage, root = open_storage(s3_url, s3_server.storage_options)
    for name in ("txn-v2-none-0", "v1-gzip-0"):
        for file in sorted((realkafka / name).iterdir()):
            storage.write(storage.join(root, name, file.name), file.read_bytes())
    frame = pl.from_arrow(kfmt.read(s3_url, topics="txn-*", isolation="read_committed",
                                    storage_options=s3_server.storage_options))
    assert frame["offset"].to_list() == [r["offset"] for r in consumer_records("txn-v2-none-0",
                                                                               "records.read_committed")]
    infos = kfmt.info(s3_url, storage_options=s3_server.storage_options)
    cli = run_kfmt("info", s3_url, "--format", "json", *s3_server.cli_options())
    assert infos == [json.loads(line) for line in cli.lines] and len(infos) == 2


def test_usage_errors_are_raised_before_any_record_is_read(realkafka, tmp_path):
    with pytest.raises(kfmt.UsageError, match="no such file or directory"):
        kfmt.read(tmp_path / "missing")
    with pytest.raises(kfmt.UsageError, match="isolation"):
        kfmt.open_log(realkafka / "v2-none-0").read(isolation="serializable")


# --- the commands as functions, compared with the commands ---

def without_run_facts(report: dict) -> dict:
    """A report without what differs between two runs of the same work: times and destinations."""
    text = json.dumps(report, sort_keys=True)
    text = re.sub(r'"(duration_ms|started_ms|finished_ms|elapsed_ms)": [0-9.]+', r'"\1": 0', text)
    return json.loads(text.replace("/api/", "/cli/"))


def written(root: Path) -> dict[str, bytes]:
    """Every file under `root` and its bytes; the report only by name (it holds times and paths)."""
    return {str(p.relative_to(root)): b"" if "report" in p.name else p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_upgrade_function_equals_the_command(realkafka, tmp_path):
    src = log_dir(tmp_path, "v1-gzip-0", "v0-none-0")
    api = kfmt.upgrade(src, tmp_path / "api" / "out", master="inprocess", now_ms=NOW_MS)
    cli = run_kfmt("upgrade", src, tmp_path / "cli" / "out", "--master", "inprocess", "--now", NOW_MS,
                   "--format", "json")
    assert cli.code == 0, cli.err
    assert without_run_facts(api) == without_run_facts(json.loads(cli.out))
    assert written(tmp_path / "api" / "out") == written(tmp_path / "cli" / "out")
    # and the upgraded log reads as the Java consumer read the original (v0: CreateTime -1)
    rows = kfmt.read(tmp_path / "api" / "out", topics="v1-gzip").read_all().to_pylist()
    assert [as_consumer_record(r) for r in rows] == list(consumer_records("v1-gzip-0"))


def test_a_dry_run_gives_the_plan(realkafka, tmp_path):
    plan = kfmt.upgrade(realkafka / "v1-gzip-0", tmp_path / "out", dry_run=True, now_ms=NOW_MS)
    assert plan.is_plan and not (tmp_path / "out").exists()
    cli = run_kfmt("upgrade", realkafka / "v1-gzip-0", tmp_path / "out", "--dry-run", "--now", NOW_MS,
                   "--format", "json")
    assert dict(plan) == json.loads(cli.out)


def test_info_and_verify_functions_equal_the_commands(realkafka, tmp_path):
    root = log_dir(tmp_path, "v2-none-0", "txn-v2-none-0")
    infos = kfmt.info(root)
    assert infos == [json.loads(line) for line in run_kfmt("info", root, "--format", "json").lines]
    by_topic = {i["topic"]: i for i in infos}
    assert by_topic["v2-none"]["records"] == len(consumer_records("v2-none-0"))
    assert by_topic["txn-v2-none"]["log_end_offset"] == 218  # the corpus README
    report = kfmt.verify(root)
    assert report == json.loads(run_kfmt("verify", root, "--format", "json").out)
    assert report["summary"]["ok"] and report["summary"]["partitions"] == 2
    deep = kfmt.verify(root, deep=True)
    assert deep == json.loads(run_kfmt("verify", root, "--format", "json", "--deep").out)
    assert (report["summary"]["depth"], deep["summary"]["depth"]) == ("recovery", "deep")


def test_reindex_function_equals_the_command(realkafka, tmp_path):
    src = realkafka / "v2-none-0"
    api = kfmt.reindex(src, tmp_path / "api" / "v2-none-0", now_ms=NOW_MS)
    cli = run_kfmt("reindex", src, tmp_path / "cli" / "v2-none-0", "--now", NOW_MS, "--format", "json")
    assert cli.code == 0, cli.err
    assert without_run_facts(api) == without_run_facts(json.loads(cli.out))
    assert written(tmp_path / "api") == written(tmp_path / "cli")


def test_retain_function_equals_the_command_and_deletes_what_the_broker_deleted(realkafka, tmp_path):
    case = realkafka / "_retention" / "v2-none-delete-records"
    truth = json.loads((case / "truth.json").read_text())
    src = tmp_path / "src" / f"{truth['topic']}-0"
    shutil.copytree(case / "input", src)
    offset = truth["applied"]["delete_records_offset"]
    api = kfmt.retain(src, tmp_path / "api" / src.name, log_start_offset=offset, now_ms=truth["now_ms"],
                      master="inprocess")
    cli = run_kfmt("retain", src, tmp_path / "cli" / src.name, "--log-start-offset", offset, "--now",
                   truth["now_ms"], "--master", "inprocess", "--format", "json")
    assert cli.code == 0, cli.err
    assert without_run_facts(api) == without_run_facts(json.loads(cli.out))
    assert written(tmp_path / "api") == written(tmp_path / "cli")
    [entry] = api["partitions"]
    assert entry["kept_base_offsets"] == truth["remaining_base_offsets"]
    assert entry["log_start_offset"] == truth["log_start_offset"]


def test_export_function_equals_the_command(realkafka, tmp_path):
    src = log_dir(tmp_path, "txn-v2-none-0")
    api = kfmt.export(src, tmp_path / "api" / "out", master="inprocess", isolation="read_committed")
    cli = run_kfmt("export", src, tmp_path / "cli" / "out", "--master", "inprocess", "--isolation",
                   "read_committed", "--output", "json")
    assert cli.code == 0, cli.err
    assert without_run_facts(api) == without_run_facts(json.loads(cli.out))
    assert written(tmp_path / "api" / "out") == written(tmp_path / "cli" / "out")
    assert api["totals"]["output_records"] == len(consumer_records("txn-v2-none-0", "records.read_committed"))


def test_function_errors_are_the_commands_errors(realkafka, tmp_path):
    with pytest.raises(kfmt.UsageError) as caught:
        kfmt.upgrade(realkafka / "v1-gzip-0", tmp_path / "out", max_batch_bytes=1000)
    cli = run_kfmt("upgrade", realkafka / "v1-gzip-0", tmp_path / "out", "--max-batch-bytes", "1000")
    assert cli.code == 2 and cli.err.strip() == f"kfmt: error: {caught.value}"
    with pytest.raises(kfmt.UsageError) as caught:
        kfmt.info(tmp_path / "missing")
    cli = run_kfmt("info", tmp_path / "missing")
    assert cli.code == 2 and cli.err.strip() == f"kfmt: error: {caught.value}"


# --- the surface ---

def test_import_kfmt_is_light():
    code = ("import sys, kfmt; kfmt.read; kfmt.upgrade; kfmt.verify; kfmt.export; kfmt.archive; "
            "heavy = [m for m in ('pyspark', 'py4j', 'polars', 'duckdb') if m in sys.modules]; "
            "print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    bare = subprocess.run([sys.executable, "-c", "import sys, kfmt; print('pyarrow' in sys.modules)"],
                          capture_output=True, text=True, check=True)
    assert bare.stdout.strip() == "False"


def test_every_public_name_resolves_and_is_documented():
    doc = (REPO / "docs" / "python.md").read_text()
    for name in kfmt.__all__:
        assert getattr(kfmt, name) is not None
        if not name.startswith("__"):
            assert f"`{name}" in doc or f"kfmt.{name}" in doc, f"{name} is not in docs/python.md"
    with pytest.raises(AttributeError):
        kfmt.no_such_name
