"""A consumer's view by default: every reader starts at the partition's log start offset, as a broker
serves the partition after DeleteRecords or retention; --include-deleted reads below it.

Independent truth: the realkafka corpus's DeleteRecords cases (`_retention/CASE/`, see its README): a
Kafka 3.6 broker loaded a copy of a corpus partition, DeleteRecords moved its log start offset inside
a batch, retention deleted the segments wholly below it, and the broker stopped cleanly, leaving
`remaining/` and (in its log directory) a log-start-offset-checkpoint entry (`truth.json`'s
`log_start_offset_checkpoint`). What a consumer of that broker got is what the Java consumer of the
source partition got (`records.jsonl.gz`, the same bytes) from the log start offset on
(`truth.json`'s `log_start_offset`, which `kafka-get-offsets --time -2` reported).
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support.cli import run_kfmt
from support.corpus import REALKAFKA
from support.corpus_truth import consumer_records
from support.export_truth import as_consumer_records, export, read_dataset
from support.spark_session import spark  # noqa: F401  (fixture: one Spark session for the module)

RETENTION = REALKAFKA / "_retention"
CASES = ["v2-none-delete-records", "v1-gzip-delete-records"]


def truth(case: str) -> dict:
    return json.loads((RETENTION / case / "truth.json").read_text())


def log_dir(case: str, tmp_path: Path) -> tuple[Path, dict]:
    """The broker's log directory after the deletion: `remaining/` as its partition directory, and
    the log-start-offset-checkpoint entry the broker wrote."""
    t = truth(case)
    root = tmp_path / "logs"
    shutil.copytree(RETENTION / case / "remaining", root / f"{t['topic']}-{t['partition']}")
    (root / "log-start-offset-checkpoint").write_text(
        f"0\n1\n{t['topic']} {t['partition']} {t['log_start_offset_checkpoint']}\n")
    return root, t


def served(t: dict, start: int | None = None) -> list[dict]:
    """What a consumer reading from `start` (default: the log start offset) got."""
    start = t["log_start_offset"] if start is None else start
    return [r for r in consumer_records(t["source"]) if r["offset"] >= start]


def cat(path, *args) -> list[dict]:
    result = run_kfmt("cat", path, "--format", "json", *args)
    assert result.code == 0, result.err
    return [json.loads(line) for line in result.lines]


def strip_where(records: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in ("topic", "partition")} for r in records]


@pytest.mark.parametrize("case", CASES)
def test_cat_gives_what_the_brokers_consumer_got(case, tmp_path):
    root, t = log_dir(case, tmp_path)
    part = root / f"{t['topic']}-{t['partition']}"
    assert t["log_start_offset"] > t["remaining_base_offsets"][0]  # the offset lies inside a batch
    # a log directory, and its partition directory (whose parent holds the checkpoint)
    assert strip_where(cat(root)) == served(t)
    assert cat(part) == served(t)
    # --include-deleted: everything still on disk, from the first remaining segment
    assert cat(part, "--include-deleted") == served(t, t["remaining_base_offsets"][0])
    # seeks below the log start offset start there, as a consumer reset to the earliest offset
    assert cat(part, "--from-offset", "0") == served(t)
    assert cat(part, "--from-timestamp", "0") == served(t)
    assert cat(part, "--from-offset", str(t["log_start_offset"] + 2)) == served(t, t["log_start_offset"] + 2)


@pytest.mark.parametrize("case", CASES)
def test_without_a_checkpoint_entry_the_first_segment_is_the_log_start(case, tmp_path):
    root, t = log_dir(case, tmp_path)
    (root / "log-start-offset-checkpoint").write_text("0\n1\nsome-other-topic 0 100000\n")
    assert strip_where(cat(root)) == served(t, t["remaining_base_offsets"][0])


@pytest.mark.parametrize("case", CASES)
def test_info_counts_what_a_consumer_sees(case, tmp_path):
    """--deep counts every record; by default compressed v0/v1 wrappers are counted apart (their
    headers do not say how many records they hold), and the rest is the same."""
    root, t = log_dir(case, tmp_path)
    result = run_kfmt("info", root, "--format", "json", "--deep")
    assert result.code == 0, result.err
    info = json.loads(result.lines[0])
    expected = served(t)
    assert info["log_start_offset"] == t["log_start_offset"]
    assert info["log_end_offset"] == t["log_end_offset"]
    assert (info["records"], info["first_offset"], info["last_offset"]) == \
        (len(expected), expected[0]["offset"], expected[-1]["offset"])
    deleted = json.loads(run_kfmt("info", root, "--format", "json", "--include-deleted", "--deep").lines[0])
    assert deleted["records"] == len(served(t, t["remaining_base_offsets"][0]))
    assert deleted["log_start_offset"] == t["log_start_offset"]
    shallow = json.loads(run_kfmt("info", root, "--format", "json").lines[0])
    wrappers = sum(n["batches"] for n in shallow["formats"] if n["magic"] < 2 and n["compression"] != "none")
    assert shallow["uncounted_wrappers"] == wrappers
    same = ("log_start_offset", "log_end_offset", "last_offset", "batches", "max_timestamp")
    assert {k: shallow[k] for k in same} == {k: info[k] for k in same}
    if not wrappers:
        assert (shallow["records"], shallow["first_offset"]) == (info["records"], info["first_offset"])


@pytest.mark.parametrize("case", CASES)
def test_export_writes_what_a_consumer_sees_and_counts_what_it_left_out(case, tmp_path):
    root, t = log_dir(case, tmp_path)
    assert export(root, tmp_path / "out").code == 0
    assert as_consumer_records(read_dataset(tmp_path / "out")) == served(t)
    report = json.loads(next((tmp_path / "out").glob("*kfmt-report.json")).read_text())
    below = len(served(t, t["remaining_base_offsets"][0])) - len(served(t))
    assert report["inputs"][0]["left_out_records"] == {"below_log_start_offset": below}
    assert export(root, tmp_path / "all", "--include-deleted").code == 0
    assert as_consumer_records(read_dataset(tmp_path / "all")) == served(t, t["remaining_base_offsets"][0])


@pytest.mark.parametrize("case", CASES)
def test_the_data_source_reads_what_a_consumer_sees(case, tmp_path):
    pytest.importorskip("pyspark")
    from support.spark_session import read_all

    root, t = log_dir(case, tmp_path)
    rows, _ = read_all(root)
    assert as_consumer_records(rows) == served(t)
    rows, _ = read_all(root, includeDeleted="true")
    assert as_consumer_records(rows) == served(t, t["remaining_base_offsets"][0])


def transform(command: str, src, dst, *args) -> dict:
    result = run_kfmt(command, src, dst, "--master", "inprocess", "--no-progress", "--format", "json", *args)
    assert result.code == 0, result.err
    return json.loads(result.out)


# resegment with --deep: its default check counts a wrapper's records only from... nothing (its header
# does not say), where these tests count every record carried
TRANSFORMS = [("upgrade",), ("recompress", "--compression", "zstd"),
              ("resegment", "--segment-bytes", "20000", "--kafka-version", "3.9", "--deep")]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("command", TRANSFORMS, ids=lambda c: c[0])
def test_transforms_carry_what_a_broker_serves(case, command, tmp_path):
    """Segments and batches wholly below the log start offset are left out (and counted in the
    notes); the batch holding it is carried whole, and DST's checkpoint keeps the log start offset,
    so DST serves what SRC served and verifies clean."""
    root, t = log_dir(case, tmp_path)
    start = t["log_start_offset"]
    on_disk = consumer_records(t["source"])
    batch_first, batch_last = t["applied"]["batch"]  # the batch DeleteRecords cut into
    assert batch_first < start <= batch_last
    report = transform(command[0], root, tmp_path / "out", *command[1:])
    dst = tmp_path / "out"
    # everything from the batch holding the log start offset was carried, nothing below it
    below_batch = [r for r in on_disk if t["remaining_base_offsets"][0] <= r["offset"] < batch_first]
    carried = [r for r in on_disk if batch_first <= r["offset"] < start]
    assert report["totals"]["output_records"] == len(served(t)) + len(carried)
    notes = [n for n in report["notes"] if "below the log start offset" in n]
    assert len(notes) == 1 and f" {len(below_batch)} record(s) below the log start offset {start} left out" in notes[0]
    assert f"{len(carried)} record(s) below it share the batch holding it" in notes[0]
    # DST's log directory keeps the log start offset: a consumer sees what SRC's consumer saw
    assert (dst / "log-start-offset-checkpoint").read_text().splitlines()[2:] == \
        [f"{t['topic']} {t['partition']} {start}"]
    assert strip_where(cat(dst)) == served(t)
    assert strip_where(cat(dst, "--include-deleted")) == served(t, batch_first)
    assert run_kfmt("verify", dst, "--deep").code == 0
    # --include-deleted carries everything still on disk
    report = transform(command[0], root, tmp_path / "all", *command[1:], "--include-deleted")
    assert report["totals"]["output_records"] == len(served(t, t["remaining_base_offsets"][0]))
    assert not [n for n in report["notes"] if "below the log start offset" in n]


@pytest.mark.parametrize("case", CASES)
def test_segments_wholly_below_the_log_start_offset_are_not_carried(case, tmp_path):
    """The broker's `input/` (before the deletion) with the checkpoint entry the deletion wrote: the
    segments the broker's retention check deleted (truth.json's deleted_base_offsets) are left out."""
    t = truth(case)
    root = tmp_path / "logs"
    shutil.copytree(RETENTION / case / "input", root / f"{t['topic']}-{t['partition']}")
    (root / "log-start-offset-checkpoint").write_text(
        f"0\n1\n{t['topic']} {t['partition']} {t['log_start_offset_checkpoint']}\n")
    assert strip_where(cat(root)) == served(t)
    report = transform("recompress", root, tmp_path / "out", "--compression", "lz4")
    part = tmp_path / "out" / f"{t['topic']}-{t['partition']}"
    assert sorted(int(f.stem) for f in part.glob("*.log")) == t["remaining_base_offsets"]
    assert f"({len(t['deleted_base_offsets'])} whole segment(s))" in \
        next(n for n in report["notes"] if "below the log start offset" in n)
    assert strip_where(cat(tmp_path / "out")) == served(t)


@pytest.mark.spark
@pytest.mark.parametrize("case", CASES)
def test_spark_reads_what_a_consumer_sees(case, spark, tmp_path):  # noqa: F811
    root, t = log_dir(case, tmp_path)
    df = spark.read.format("kafka-log").load(str(root))
    assert [r["offset"] for r in df.orderBy("offset").collect()] == [r["offset"] for r in served(t)]
    df = spark.read.format("kafka-log").option("includeDeleted", "true").load(str(root))
    assert df.count() == len(served(t, t["remaining_base_offsets"][0]))
