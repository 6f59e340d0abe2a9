"""Issue 28, point 3: a log start offset above a partition's first segment base (DeleteRecords)
travels into every transform's output, where a broker reads it.

A broker's log start offset on load is the larger of its log directory's `log-start-offset-checkpoint`
entry and the first segment's base offset (Kafka 4.x LogLoader.load). So a log-directory DST gets the
checkpoint entry, and a partition-directory DST (no log directory: no checkpoint) gets a first segment
named after the log start offset, beginning with the batch that holds it. `broker_log_start` below is
that rule, applied to DST's files; the truth is what the broker that wrote the data reported
(`kafka-get-offsets --time -2`) and what its Java consumer read. `kfmt cat` of DST must agree with both.

Cases: the Kafka 3.6 DeleteRecords retention cases (`retain --log-start-offset` inside a batch, as the
broker was asked), and a Kafka 4.1 partition whose broker applied DeleteRecords (log start 169 inside
segment 150), through every transform into a log directory and into a partition directory.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support.cli import run_kfmt
from support.corpus import REALKAFKA, TESTS
from support.corpus_truth import consumer_records

from kfmt.partition.checkpoints import read_offset_checkpoint

RETENTION = REALKAFKA / "_retention"
KAFKA41 = TESTS / "data" / "delete-records-4.1"
TRANSFORMS = [("reindex",), ("upgrade",), ("recompress", "--compression", "zstd"),
              ("resegment", "--segment-bytes", "20000", "--kafka-version", "3.9"), ("retain",)]


def broker_log_start(partition_dir: Path, checkpoint: Path | None, tp) -> int:
    """LogLoader.load: max(the checkpoint entry (0 without one), the first segment's base offset)."""
    entry = 0
    if checkpoint is not None and checkpoint.exists():
        entry = read_offset_checkpoint(checkpoint.read_text(), str(checkpoint)).get(tp, 0)
    return max(entry, min(int(p.name[:20]) for p in partition_dir.glob("*.log")))


def cat(path: Path, *args) -> list[dict]:
    result = run_kfmt("cat", path, "--format", "json", *args)
    assert result.code == 0, result.err
    return [json.loads(line) for line in result.lines]


def run(*args) -> None:
    result = run_kfmt(*map(str, args), "--master", "inprocess", "--no-progress")
    assert result.code == 0, result.err


def kafka41_records() -> list[dict]:
    import gzip

    with gzip.open(KAFKA41 / "d4-delrec-0.truth" / "records.jsonl.gz", "rt") as f:
        return [json.loads(line) for line in f]


@pytest.mark.parametrize("case", ["v2-none-delete-records", "v1-gzip-delete-records"])
@pytest.mark.parametrize("dst_kind", ["partition", "log"])
def test_retain_with_delete_records_serves_from_the_new_log_start(case, dst_kind, tmp_path):
    t = json.loads((RETENTION / case / "truth.json").read_text())
    name, tp = f"{t['topic']}-{t['partition']}", (t["topic"], t["partition"])
    src = tmp_path / "logs" / name
    shutil.copytree(RETENTION / case / "input", src)
    args = ["--log-start-offset", t["applied"]["delete_records_offset"], "--now", t["now_ms"]]
    if dst_kind == "partition":
        run("retain", src, tmp_path / "out" / name, *args)
        out, checkpoint = tmp_path / "out" / name, None
    else:
        run("retain", tmp_path / "logs", tmp_path / "out", *args)
        out, checkpoint = tmp_path / "out" / name, tmp_path / "out" / "log-start-offset-checkpoint"
    # the broker's log start offset, by its own rule, from DST's files
    assert broker_log_start(out, checkpoint, tp) == t["log_start_offset"]
    # kfmt cat agrees, and serves exactly what the broker's consumer read from there on
    expected = [r for r in consumer_records(t["source"]) if r["offset"] >= t["log_start_offset"]]
    assert cat(out) == expected
    assert run_kfmt("verify", out).code == 0
    report = json.loads(((out if dst_kind == "partition" else tmp_path / "out") / "kfmt-report.json").read_text())
    [entry] = report["partitions"]
    if dst_kind == "partition":
        assert entry["first_segment_renamed_to"] == t["log_start_offset"]
        assert any("first segment written as" in n for n in report["notes"])
    else:
        assert entry["log_start_offset_checkpoint"] == t["log_start_offset"]
        # the broker's segments stay byte for byte in a log directory
        assert sorted(p.name for p in out.glob("*.log")) == \
            sorted(p.name for p in (RETENTION / case / "remaining").glob("*.log"))


@pytest.mark.parametrize("transform", TRANSFORMS, ids=lambda t: t[0])
@pytest.mark.parametrize("dst_kind", ["partition", "log"])
def test_a_kafka_4_log_start_travels_through_every_transform(transform, dst_kind, tmp_path):
    tp, name = ("d4-delrec", 0), "d4-delrec-0"
    logs = tmp_path / "logs"
    shutil.copytree(KAFKA41 / "logs", logs)
    truth_start = int((KAFKA41 / "d4-delrec-0.truth" / "offsets.txt").read_text().splitlines()[0].split(":")[2])
    expected = kafka41_records()
    assert expected[0]["offset"] == truth_start == 169
    assert cat(logs / name) == expected  # the source, as kfmt reads it
    if dst_kind == "partition":
        run(transform[0], logs / name, tmp_path / "out", *transform[1:])
        out, checkpoint = tmp_path / "out", None
    else:
        run(transform[0], logs, tmp_path / "out", *transform[1:])
        out, checkpoint = tmp_path / "out" / name, tmp_path / "out" / "log-start-offset-checkpoint"
    assert broker_log_start(out, checkpoint, tp) == truth_start
    assert cat(out) == expected
    assert run_kfmt("verify", out).code == 0
    if dst_kind == "partition":
        assert min(p.name for p in out.glob("*.log")) == f"{truth_start:020d}.log"
