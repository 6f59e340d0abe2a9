"""kfmt export --format iceberg, read back with pyiceberg (`table.scan().to_arrow()`): the table holds
exactly what the Java consumer read (records.jsonl.gz) and the same on-disk columns as a Parquet
export; it is partitioned by topic, partition and day(timestamp); each run is one snapshot whose
summary carries every partition's high-water mark, `--append` continues from there (twice), a run with
nothing new commits nothing, a SIGKILLed run commits nothing and the next one completes, and offsets
deleted before their export are reported lost.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from support.corpus import REALKAFKA
from support.export_cuts import CUTS, NEW_PARTITION, complete_log_dir, cut_copy, cut_log_dir
from support.export_truth import as_consumer_records, export, read_dataset, truth

from kfmt.rows.columns import EXPORT_SCHEMA

pyiceberg = pytest.importorskip("pyiceberg")
pytestmark = [pytest.mark.timeout(600)]

ICEBERG = ("--format", "iceberg")


def load_table(dst: Path, name: str = "kafka.records"):
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog("kfmt", uri=f"sqlite:///{dst / '_catalog.db'}",
                         warehouse=f"file://{dst / 'warehouse'}")
    return catalog.load_table(name)


def table_rows(dst: Path) -> pa.Table:
    """The table as pyiceberg reads it, with the export schema's types, sorted by topic and offset."""
    table = load_table(dst).scan().to_arrow()
    return table.select(EXPORT_SCHEMA.names).cast(EXPORT_SCHEMA).sort_by(
        [("topic", "ascending"), ("offset", "ascending")])


def records_of(rows: pa.Table, name: str) -> list[dict]:
    return as_consumer_records(rows.filter(pc.equal(rows.column("topic"), name.rsplit("-", 1)[0])))


def marks(snapshot) -> dict:
    return {k: int(v) for k, v in snapshot.summary.additional_properties.items()
            if k.startswith("kfmt.hwm.")}


def test_a_table_of_the_corpus_equals_the_consumer_and_a_parquet_export(tmp_path):
    names = ["v2-none-0", "v1-gzip-0", "v0-none-0", "txn-v2-none-0", "v2-zstd-0"]
    src = tmp_path / "logs"
    for name in names:
        shutil.copytree(REALKAFKA / name, src / name)
    dst = tmp_path / "table"
    result = export(src, dst, *ICEBERG)
    assert result.code == 0, result.err
    rows = table_rows(dst)
    for name in names:
        assert records_of(rows, name) == truth(name), name
    # the on-disk columns too: row for row what a Parquet export of the same log holds
    assert export(src, tmp_path / "parquet").code == 0
    # except one known difference: pyiceberg's writer (0.12: ArrowProjectionVisitor.list rebuilds a
    # list of structs from its offsets alone) turns a null list into an empty one, so records
    # without headers (null in the Parquet export) read back with [] (docs/export.md)
    expected = [{**row, "headers": row["headers"] or []}
                for row in read_dataset(tmp_path / "parquet").to_pylist()]
    assert rows.to_pylist() == expected

    table = load_table(dst)
    spec = [(f.name, str(f.transform), table.schema().find_field(f.source_id).name)
            for f in table.spec().fields]
    assert spec == [("topic", "identity", "topic"), ("partition", "identity", "partition"),
                    ("timestamp_day", "day", "timestamp")]
    assert len(table.snapshots()) == 1
    assert marks(table.current_snapshot()) == {
        "kfmt.hwm.v2-none.0": 500, "kfmt.hwm.v1-gzip.0": len(truth("v1-gzip-0")),
        "kfmt.hwm.v0-none.0": len(truth("v0-none-0")), "kfmt.hwm.txn-v2-none.0": _log_end("txn-v2-none-0"),
        "kfmt.hwm.v2-zstd.0": 500}


def _log_end(name: str) -> int:
    """The offset after the partition's last batch, from kafka-dump-log's listing."""
    from support.export_truth import listing

    return max(int(f.get("lastOffset", f.get("offset"))) for f in listing(name).values()) + 1


def test_append_twice_continues_where_the_last_commit_ended(tmp_path):
    src = cut_log_dir(tmp_path / "logs")
    dst = tmp_path / "table"
    assert export(src, dst, *ICEBERG).code == 0
    first = load_table(dst).current_snapshot()
    assert marks(first)["kfmt.hwm.v2-none.0"] == 117
    assert records_of(table_rows(dst), "v2-none-0") == [r for r in truth("v2-none-0") if r["offset"] < 117]

    refused = export(src, dst, *ICEBERG)  # a table exists: adding to it needs --append
    assert refused.code == 2 and "--append" in refused.err and refused.err.count("\n") == 1

    complete_log_dir(src)
    result = export(src, dst, *ICEBERG, "--append")
    assert result.code == 0, result.err
    table = load_table(dst)
    second = table.current_snapshot()
    assert second.parent_snapshot_id == first.snapshot_id and len(table.snapshots()) == 2
    assert marks(second)["kfmt.hwm.v2-none.0"] == 500
    assert set(marks(second)) == {f"kfmt.hwm.{n.rsplit('-', 1)[0]}.0" for n in [*CUTS, NEW_PARTITION]}
    rows = table_rows(dst)
    for name in [*CUTS, NEW_PARTITION]:
        assert records_of(rows, name) == truth(name), name  # nothing twice, nothing missing

    again = export(src, dst, *ICEBERG, "--append")  # nothing new: no commit
    assert again.code == 0 and "nothing new" in again.out
    assert len(load_table(dst).snapshots()) == 2

    # the third partition grows again: a second append from the marks of the second commit
    shutil.rmtree(src / "v2-none-0")
    cut_copy("v2-none-0", src / "v2-none-0", (116, 1))
    (src / "v2-lz4-0").mkdir()
    shutil.copytree(REALKAFKA / "v2-lz4-0", src / "v2-lz4-0", dirs_exist_ok=True)
    result = export(src, dst, *ICEBERG, "--append")
    assert result.code == 0, result.err
    third = load_table(dst).current_snapshot()
    assert marks(third)["kfmt.hwm.v2-none.0"] == 500  # a shorter copy exports nothing again
    assert marks(third)["kfmt.hwm.v2-lz4.0"] == 500
    rows = table_rows(dst)
    assert records_of(rows, "v2-lz4-0") == truth("v2-lz4-0")
    assert records_of(rows, "v2-none-0") == truth("v2-none-0")


def exported_cut(tmp_path: Path, name: str) -> tuple[Path, Path]:
    """(SRC, the table): a table of the first segments of a corpus partition, up to offset 116."""
    src = tmp_path / "logs"
    src.mkdir()
    cut_copy(name, src / name, (97, None))
    dst = tmp_path / "table"
    assert export(src, dst, *ICEBERG).code == 0
    shutil.rmtree(src / name)
    return src, dst


def test_offsets_deleted_before_their_export_are_reported_lost(tmp_path):
    name = "v2-none-0"
    src, dst = exported_cut(tmp_path, name)
    shutil.copytree(REALKAFKA / "_retention" / "v2-none-retention-bytes" / "remaining", src / name)
    result = export(src, dst, *ICEBERG, "--append")
    assert result.code == 0, result.err
    assert result.err == (f"kfmt: warning: {src / name}: offsets 116 to 246 were deleted from the log "
                          f"(retention or DeleteRecords) before they were exported; the export goes on "
                          f"from 247\n")
    assert records_of(table_rows(dst), name) == \
        [r for r in truth(name) if r["offset"] < 116 or r["offset"] >= 247]


def test_a_range_lost_is_stored_in_the_table_and_reported_once(tmp_path):
    """As the Parquet/JSON append does (kfmt.transforms.losses): the range goes into the commit's
    snapshot summary (`kfmt.lost.<topic>.<partition>`) and the mark moves past it, also when the run
    has no record to add (retention deleted every segment; the broker rolled an empty one at the log
    end), so the next run does not report it again."""
    import json

    name = "v2-none-0"
    src, dst = exported_cut(tmp_path, name)
    mark = marks(load_table(dst).current_snapshot())["kfmt.hwm.v2-none.0"]
    end = truth(name)[-1]["offset"] + 1  # the log end offset (no transaction markers in this log)
    (src / name).mkdir()
    shutil.copy(REALKAFKA / name / "partition.metadata", src / name)
    (src / name / f"{end:020d}.log").touch()
    result = export(src, dst, *ICEBERG, "--append", "--output", "json", "--fail-on-loss")
    assert result.code == 3, result.err
    assert [(e["from"], e["to"]) for e in json.loads(result.out)["lost"]] == [(mark, end)]
    snapshot = load_table(dst).current_snapshot()
    assert marks(snapshot)["kfmt.hwm.v2-none.0"] == end
    assert json.loads(snapshot.summary.additional_properties["kfmt.lost.v2-none.0"]) == [[mark, end]]
    snapshots = len(load_table(dst).snapshots())
    result = export(src, dst, *ICEBERG, "--append", "--fail-on-loss")
    assert result.code == 0, result.err
    assert "lost offsets" not in result.out and "deleted" not in result.err
    assert len(load_table(dst).snapshots()) == snapshots  # nothing new: no commit
    # what the table holds and the range reported lost: every offset below the log end, once
    offsets = [r["offset"] for r in records_of(table_rows(dst), name)]
    assert offsets == [r["offset"] for r in truth(name) if r["offset"] < mark]
    assert set(offsets) | set(range(mark, end)) == {r["offset"] for r in truth(name)}


def test_append_needs_the_same_options(tmp_path):
    dst = tmp_path / "table"
    assert export(REALKAFKA / "v2-lz4-0", dst, *ICEBERG).code == 0
    result = export(REALKAFKA / "v2-lz4-0", dst, *ICEBERG, "--append", "--isolation", "read_committed")
    assert result.code == 2 and "isolation read_uncommitted" in result.err
    assert result.err.count("\n") == 1


def data_files(dst: Path) -> set[str]:
    return {str(p) for p in (dst / "warehouse").rglob("*.parquet")}


def test_a_killed_run_commits_nothing(tmp_path):
    src = cut_log_dir(tmp_path / "logs")
    dst = tmp_path / "table"
    small = ("--target-file-size", "2000")  # many small chunks: many data files, time to kill
    assert export(src, dst, *ICEBERG, *small).code == 0
    before_snapshots = [s.snapshot_id for s in load_table(dst).snapshots()]
    before_rows = table_rows(dst)
    before_files = data_files(dst)
    complete_log_dir(src)

    proc = subprocess.Popen([sys.executable, "-m", "kfmt", "export", str(src), str(dst), *ICEBERG,
                             *small, "--append", "--no-progress"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        if len(data_files(dst) - before_files) >= 3:
            os.kill(proc.pid, signal.SIGKILL)
            break
        time.sleep(0.002)
    proc.wait(timeout=60)
    proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    assert len(data_files(dst) - before_files) >= 3  # it had written data files...
    assert [s.snapshot_id for s in load_table(dst).snapshots()] == before_snapshots  # ...not committed
    assert table_rows(dst).to_pylist() == before_rows.to_pylist()

    result = export(src, dst, *ICEBERG, *small, "--append")
    assert result.code == 0, result.err
    assert len(load_table(dst).snapshots()) == len(before_snapshots) + 1
    rows = table_rows(dst)
    for name in [*CUTS, NEW_PARTITION]:
        assert records_of(rows, name) == truth(name), name


def test_any_pyiceberg_catalog_by_name_and_properties(tmp_path):
    """--iceberg-catalog NAME with its properties given as --iceberg-property (pyiceberg's
    load_catalog), and --iceberg-table; DST is then only a name for messages."""
    from pyiceberg.catalog import load_catalog

    props = {"type": "sql", "uri": f"sqlite:///{tmp_path / 'lake.db'}",
             "warehouse": f"file://{tmp_path / 'lake'}"}
    args = ["--iceberg-catalog", "lake", "--iceberg-table", "raw.v2_lz4"]
    for k, v in props.items():
        args += ["--iceberg-property", f"{k}={v}"]
    result = export(REALKAFKA / "v2-lz4-0", tmp_path / "unused", *ICEBERG, *args)
    assert result.code == 0, result.err
    assert "raw.v2_lz4" in result.out
    table = load_catalog("lake", **props).load_table("raw.v2_lz4")
    rows = table.scan().to_arrow().sort_by("offset")
    assert as_consumer_records(rows.select(EXPORT_SCHEMA.names).cast(EXPORT_SCHEMA)) == truth("v2-lz4-0")
    assert marks(table.current_snapshot()) == {"kfmt.hwm.v2-lz4.0": 500}
    bad = export(REALKAFKA / "v2-lz4-0", tmp_path / "unused", *ICEBERG, "--iceberg-property", "novalue")
    assert bad.code == 2 and bad.err == "kfmt: error: --iceberg-property 'novalue': give it as KEY=VALUE\n"
