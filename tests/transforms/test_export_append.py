"""kfmt export --append against independent truth: an export of a log directory cut short (later
segments removed, the last one cut at a batch boundary, as a broker's active segment is), then
appended to once the segments are back, holds exactly what the Java consumer read (records.jsonl.gz),
nothing twice, as Parquet and as JSON Lines partitioned by date; a re-run with nothing new leaves the
tree byte for byte as it was; a SIGKILLed run leaves what readers see as it was and the next run
completes; offsets that retention (the corpus's own retention copy) or a raised log start offset
(log-start-offset-checkpoint) removed before they were exported are reported lost, with the range.
"""
from __future__ import annotations

import datetime
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest
from support.cli import run_kfmt
from support.corpus import REALKAFKA
from support.export_cuts import CUTS, NEW_PARTITION, complete_log_dir, cut_copy, cut_log_dir
from support.export_truth import TS_TYPES, as_consumer_records, export, listing, read_dataset, truth
from support.spark_session import plain_spark  # noqa: F401  (fixture `spark`: one Spark session for the module)
from support.trees import tree_state

from kfmt.partition.checkpoints import write_offset_checkpoint
from kfmt.storage.append_staging import TEMPORARY
from kfmt.transforms.export import REPORT_NAME
from kfmt.transforms.export_state import STATE_NAME

pytestmark = [pytest.mark.timeout(600)]


def exported_records(dst: Path, fmt: str, topic: str) -> list[dict]:
    """The records of a topic in the export, in the Java consumer's terms, sorted by offset."""
    if fmt == "parquet":
        table = read_dataset(dst)
        return as_consumer_records(table.filter(pc.equal(table.column("topic"), topic)))
    epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
    objects = [json.loads(line) for f in (dst / f"topic={topic}").rglob("*.jsonl")
               for line in f.read_text().splitlines()]
    return sorted(({"offset": o["offset"],
                    "timestamp": (datetime.datetime.fromisoformat(o["timestamp"].replace("Z", "+00:00"))
                                  - epoch) // datetime.timedelta(milliseconds=1),
                    "timestampType": TS_TYPES[o["timestampType"]], "key": o["key"], "value": o["value"],
                    "headers": o["headers"] or [],
                    "leaderEpoch": None if o["partition_leader_epoch"] < 0 else o["partition_leader_epoch"]}
                   for o in objects), key=lambda r: r["offset"])


def state(dst: Path) -> dict:
    doc = json.loads((dst / STATE_NAME).read_text())
    return {f"{p['topic']}-{p['partition']}": p["next_offset"] for p in doc["partitions"]}


@pytest.mark.parametrize("fmt,partition_by", [("parquet", "topic,partition"),
                                              ("jsonl", "topic,partition,date")])
def test_an_export_cut_short_and_appended_equals_the_consumer(tmp_path, fmt, partition_by):
    src = cut_log_dir(tmp_path / "logs")
    dst = tmp_path / "out"
    options = ("--format", fmt, "--partition-by", partition_by)
    first = export(src, dst, *options)
    assert first.code == 0, first.err
    marks = state(dst)
    # v2-none-0 was cut before its batch at offset 117: the mark is where the next run begins
    assert marks["v2-none-0"] == 117
    assert exported_records(dst, fmt, "v2-none") == [r for r in truth("v2-none-0") if r["offset"] < 117]
    files_before = {p.relative_to(dst) for p in dst.rglob("*") if p.is_file()}

    complete_log_dir(src)
    second = export(src, dst, "--append", *options)
    assert second.code == 0, second.err
    assert second.err == ""  # nothing lost
    for name in [*CUTS, NEW_PARTITION]:
        got = exported_records(dst, fmt, name.rsplit("-", 1)[0])
        assert got == truth(name), name  # the union: every record once, in offset order
    # the earlier files are untouched and the new ones carry the offset their partition resumed from
    files_after = {p.relative_to(dst) for p in dst.rglob("*") if p.is_file()}
    assert files_before <= files_after
    added = {p for p in files_after - files_before if not p.name.startswith("_")}
    assert added and all("-o000" in p.name for p in added)
    assert not (dst / TEMPORARY).exists()
    report = json.loads((dst / REPORT_NAME).read_text())
    resumed = {f"{p['topic']}-{p['partition']}": p for p in report["append"]}
    assert resumed["v2-none-0"]["from_offset"] == 117 and resumed[NEW_PARTITION]["from_offset"] == 0
    assert report["totals"]["output_records"] == sum(
        len(truth(n)) for n in [*CUTS, NEW_PARTITION]) - sum(
        len([r for r in truth(n) if r["offset"] < marks[n]]) for n in CUTS)
    if fmt == "parquet":  # pyarrow's plain hive dataset: no bookkeeping file read as data
        assert ds.dataset(dst, partitioning="hive").count_rows() == sum(
            len(truth(n)) for n in [*CUTS, NEW_PARTITION])

    # nothing new: nothing written, byte for byte and mtime for mtime
    before = tree_state(dst)
    again = export(src, dst, "--append", *options)
    assert again.code == 0, again.err
    assert "nothing new" in again.out
    assert tree_state(dst) == before


def test_append_reads_what_a_one_shot_export_reads(tmp_path):
    """The union's on-disk columns too: row for row what one export of the whole log writes."""
    src = cut_log_dir(tmp_path / "logs")
    dst, whole = tmp_path / "out", tmp_path / "whole"
    assert export(src, dst).code == 0
    complete_log_dir(src)
    assert export(src, dst, "--append").code == 0
    assert export(src, whole).code == 0
    assert read_dataset(dst).equals(read_dataset(whole))


def test_append_to_an_empty_destination_exports_everything(tmp_path):
    dst = tmp_path / "out"
    result = export(REALKAFKA / "v2-lz4-0", dst, "--append")
    assert result.code == 0, result.err
    assert as_consumer_records(read_dataset(dst)) == truth("v2-lz4-0")
    assert state(dst) == {"v2-lz4-0": 500}


def test_append_needs_the_same_options_and_an_export(tmp_path):
    dst = tmp_path / "out"
    assert export(REALKAFKA / "v2-lz4-0", dst).code == 0
    result = export(REALKAFKA / "v2-lz4-0", dst, "--append", "--format", "jsonl")
    assert result.code == 2
    assert result.err == f"kfmt: error: {dst}: the export was written with format parquet; --append " \
                         f"must use the same\n"
    other = tmp_path / "other"
    other.mkdir()
    (other / "data.parquet").write_bytes(b"x")
    result = export(REALKAFKA / "v2-lz4-0", other, "--append")
    assert result.code == 2 and "no _kfmt-export-state.json" in result.err and result.err.count("\n") == 1


# --- a killed run ---------------------------------------------------------------------------------

def files_below(path: Path) -> list[str]:
    return [name for _dir, _subdirs, names in os.walk(path) for name in names]


def test_a_killed_append_leaves_the_export_as_it_was_and_the_next_run_completes(tmp_path):
    src = cut_log_dir(tmp_path / "logs")
    dst = tmp_path / "out"
    # small files: the run writes many, so that it can be killed in the middle of them
    sizes = ("--target-file-size", "2000", "--max-bytes-per-task", "3000")
    assert export(src, dst, *sizes).code == 0
    complete_log_dir(src)
    before = tree_state(dst)
    rows_before = read_dataset(dst)

    args = [sys.executable, "-m", "kfmt", "export", str(src), str(dst), "--append", "--master",
            "inprocess", "--no-progress", *sizes]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    staging = dst / TEMPORARY
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        if staging.exists() and len(files_below(staging)) >= 6:
            os.kill(proc.pid, signal.SIGKILL)
            break
        time.sleep(0.002)
    proc.wait(timeout=60)
    proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"

    # staged files exist, but outside of what readers see
    assert len(files_below(staging)) >= 6
    assert {k: v for k, v in tree_state(dst).items() if not k.startswith(TEMPORARY + "/")} == before
    assert read_dataset(dst).equals(rows_before)

    result = export(src, dst, *sizes, "--append")
    assert result.code == 0, result.err
    assert not staging.exists()
    for name in [*CUTS, NEW_PARTITION]:
        assert exported_records(dst, "parquet", name.rsplit("-", 1)[0]) == truth(name), name


class Died(BaseException):
    """A process dying at this point (nothing after it runs, no clean-up)."""


class DyingStorage:
    """A store whose third move into place never happens."""

    def __init__(self, storage, moves_left: int):
        self._storage, self.moves_left = storage, moves_left

    def __getattr__(self, name):
        return getattr(self._storage, name)

    def rename(self, src, dst):
        if self.moves_left == 0:
            raise Died()
        self.moves_left -= 1
        return self._storage.rename(src, dst)


def test_a_run_killed_while_publishing_is_rolled_forward(tmp_path, monkeypatch):
    """Killed after its commit journal, in the middle of the moves: the next run finishes them first."""
    import kfmt.storage.append_staging as append_staging
    from kfmt.transforms.export import export as export_run

    src = cut_log_dir(tmp_path / "logs")
    dst = tmp_path / "out"
    assert export(src, dst).code == 0
    complete_log_dir(src)
    roll_forward = append_staging._roll_forward
    monkeypatch.setattr(append_staging, "_roll_forward",
                        lambda storage, *args: roll_forward(DyingStorage(storage, 2), *args))
    with pytest.raises(Died):
        export_run(str(src), str(dst), master="inprocess", progress=False, append=True)
    monkeypatch.undo()
    assert (dst / TEMPORARY).exists()
    # the state still has the old marks: it is moved last, and nothing claims files not in place
    assert state(dst)["v2-none-0"] == 117 and NEW_PARTITION not in state(dst)
    # the next run rolls that commit forward, then finds nothing new
    result = export(src, dst, "--append")
    assert result.code == 0, result.err
    assert "nothing new" in result.out
    assert not (dst / TEMPORARY).exists()
    assert state(dst)["v2-none-0"] == 500
    for name in [*CUTS, NEW_PARTITION]:
        assert exported_records(dst, "parquet", name.rsplit("-", 1)[0]) == truth(name), name


# --- lost offsets ---------------------------------------------------------------------------------

def test_offsets_deleted_by_retention_before_their_export_are_reported_lost(tmp_path):
    name = "v2-none-0"
    src = tmp_path / "logs"
    src.mkdir()
    cut_copy(name, src / name, (97, None))  # exported up to offset 116
    dst = tmp_path / "out"
    assert export(src, dst).code == 0
    assert state(dst) == {name: 116}
    # what the broker kept after retention.bytes deleted the oldest segments (log start 247)
    shutil.rmtree(src / name)
    shutil.copytree(REALKAFKA / "_retention" / "v2-none-retention-bytes" / "remaining", src / name)
    result = export(src, dst, "--append")
    assert result.code == 0, result.err
    assert result.err == (f"kfmt: warning: {src / name}: offsets 116 to 246 were deleted from the log "
                          f"(retention or DeleteRecords) before they were exported; the export goes on "
                          f"from 247\n")
    report = json.loads((dst / REPORT_NAME).read_text())
    assert report["append"][0]["lost"] == {"from": 116, "to": 247, "offsets": 131}
    assert any("[116, 247) lost" in note for note in report["notes"])
    assert exported_records(dst, "parquet", "v2-none") == \
        [r for r in truth(name) if r["offset"] < 116 or r["offset"] >= 247]


def test_a_log_start_raised_by_delete_records_is_honoured(tmp_path):
    """The log start offset in log-start-offset-checkpoint (above the first segment's base offset)."""
    name = "v2-none-0"
    src = tmp_path / "logs"
    src.mkdir()
    cut_copy(name, src / name, (97, None))
    dst = tmp_path / "out"
    assert export(src, dst).code == 0
    shutil.rmtree(src / name)
    shutil.copytree(REALKAFKA / name, src / name)
    (src / "log-start-offset-checkpoint").write_text(write_offset_checkpoint({("v2-none", 0): 141}))
    result = export(src, dst, "--append")
    assert result.code == 0, result.err
    assert "offsets 116 to 140 were deleted" in result.err
    assert exported_records(dst, "parquet", "v2-none") == \
        [r for r in truth(name) if r["offset"] < 116 or r["offset"] >= 141]
    assert state(dst) == {name: 500}


# --- read_committed, object storage ---------------------------------------------------------------

def test_read_committed_append_equals_the_committed_consumer(tmp_path):
    src = cut_log_dir(tmp_path / "logs")
    dst = tmp_path / "out"
    assert export(src, dst, "--isolation", "read_committed").code == 0
    complete_log_dir(src)
    result = export(src, dst, "--append", "--isolation", "read_committed")
    assert result.code == 0, result.err
    assert exported_records(dst, "parquet", "txn-v2-none") == truth("txn-v2-none-0", committed=True)


def test_append_on_s3(tmp_path, s3_server):
    import s3fs

    src = cut_log_dir(tmp_path / "logs")
    dst = s3_server.url(f"append-{tmp_path.name}")
    args = ("--master", "inprocess", "--no-progress", *s3_server.cli_options())
    assert run_kfmt("export", src, dst, *args).code == 0
    complete_log_dir(src)
    result = run_kfmt("export", src, dst, "--append", *args)
    assert result.code == 0, result.err
    fs = s3fs.S3FileSystem(**s3_server.storage_options, skip_instance_cache=True)
    root = dst[len("s3://"):]
    names = set(fs.find(root))
    assert not any(f"/{TEMPORARY}/" in n for n in names)
    table = read_s3_dataset(root, fs)
    for name in [*CUTS, NEW_PARTITION]:
        rows = table.filter(pc.equal(table.column("topic"), name.rsplit("-", 1)[0]))
        assert as_consumer_records(rows) == truth(name), name
    # the manifest lists every data file of both runs, and nothing else of the data
    manifest = json.loads(fs.cat(f"{root}/_kfmt_manifest.json"))
    data_files = {n[len(root) + 1:] for n in names if n.endswith(".parquet")}
    assert data_files and data_files <= set(manifest["files"])
    again = run_kfmt("export", src, dst, "--append", *args)
    assert again.code == 0 and "nothing new" in again.out
    assert set(fs.find(root)) == names


def read_s3_dataset(root: str, fs) -> pa.Table:
    table = ds.dataset(root, filesystem=fs, partitioning="hive").to_table()
    return table.sort_by([("topic", "ascending"), ("offset", "ascending")])


def test_a_dry_run_append_prints_where_each_partition_resumes_and_writes_nothing(tmp_path):
    src = cut_log_dir(tmp_path / "logs")
    dst = tmp_path / "out"
    assert export(src, dst).code == 0
    complete_log_dir(src)
    before = tree_state(dst)
    result = export(src, dst, "--append", "--dry-run", "--output", "json")
    assert result.code == 0, result.err
    plan = json.loads(result.out)
    # v2-none-0's first task begins in segment 116 at the batch of offset 117, by kafka-dump-log
    positions = sorted(pos for base, pos in listing("v2-none-0") if base == 116)
    v2 = next(p for p in plan["partitions"] if p["name"] == "v2-none-0")
    assert v2["tasks"][0][0] == [116, positions[1], (REALKAFKA / "v2-none-0" / f"{116:020d}.log").stat().st_size]
    assert tree_state(dst) == before


# --- Spark ------------------------------------------------------------------------------------------

@pytest.mark.spark
def test_a_spark_append_reads_back_with_spark_which_skips_staged_files(spark, tmp_path):
    src = cut_log_dir(tmp_path / "logs")
    dst = tmp_path / "out"
    assert export(src, dst).code == 0
    complete_log_dir(src)
    result = run_kfmt("export", src, dst, "--append", "--master", "local[2]", "--no-progress")
    assert result.code == 0, result.err
    # what a killed run leaves staged: a data file below _temporary/<run>/
    staged = dst / TEMPORARY / ("0" * 32) / "topic=v2-none" / "partition=0"
    staged.mkdir(parents=True)
    shutil.copy(next((dst / "topic=v2-none" / "partition=0").glob("*.parquet")), staged / "x.parquet")
    rows = spark.read.parquet(str(dst)).select("topic", "offset").collect()
    for name in [*CUTS, NEW_PARTITION]:
        offsets = sorted(r["offset"] for r in rows if r["topic"] == name.rsplit("-", 1)[0])
        assert offsets == [r["offset"] for r in truth(name)], name


def test_a_partition_without_segments_yet_starts_at_its_log_start_later(tmp_path):
    """No mark for a partition that had nothing to read: nothing is reported lost when its log
    starts above 0 (the corpus's retention copy starts at 247)."""
    src = tmp_path / "logs"
    (src / "v2-none-0").mkdir(parents=True)
    shutil.copytree(REALKAFKA / "v2-lz4-0", src / "v2-lz4-0")
    dst = tmp_path / "out"
    assert export(src, dst).code == 0
    assert state(dst) == {"v2-lz4-0": 500}
    shutil.rmtree(src / "v2-none-0")
    shutil.copytree(REALKAFKA / "_retention" / "v2-none-retention-bytes" / "remaining", src / "v2-none-0")
    result = export(src, dst, "--append")
    assert result.code == 0 and result.err == ""
    assert exported_records(dst, "parquet", "v2-none") == [r for r in truth("v2-none-0") if r["offset"] >= 247]
    assert state(dst) == {"v2-lz4-0": 500, "v2-none-0": 500}
