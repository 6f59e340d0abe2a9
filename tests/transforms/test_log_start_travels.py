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


def run(*args) -> str:
    result = run_kfmt(*map(str, args), "--master", "inprocess", "--no-progress")
    assert result.code == 0, result.err
    return result.out


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
    assert run_kfmt("verify", out, "--deep").code == 0
    report = json.loads(((out if dst_kind == "partition" else tmp_path / "out") / "kfmt-report.json").read_text())
    [entry] = report["partitions"]
    if dst_kind == "partition":
        assert entry["first_segment_renamed_to"] == t["log_start_offset"]
        assert any("first segment written as" in n for n in report["notes"])
        # what the broker's first remaining segment holds below the log start is named, left out
        # (v2-none: the first batch holds the log start, nothing is left out; v1-gzip: 16 records)
        first, end, records, whole = expected_left_out(RETENTION / case / "remaining", t["log_start_offset"])
        assert [(e["from"], e["to"], e["records"], e["segments"]) for e in report["below_log_start"]] == \
            ([(first, end, records, whole)] if records else [])
    else:
        assert entry["log_start_offset_checkpoint"] == t["log_start_offset"]
        # the broker's segments stay byte for byte in a log directory
        assert sorted(p.name for p in out.glob("*.log")) == \
            sorted(p.name for p in (RETENTION / case / "remaining").glob("*.log"))


def test_retain_include_deleted_keeps_the_brokers_segments_whole(tmp_path):
    """--include-deleted: a partition-directory DST keeps the broker's remaining segments byte for
    byte (a broker loading it alone then serves from the first one), nothing is said left out."""
    case = "v1-gzip-delete-records"
    t = json.loads((RETENTION / case / "truth.json").read_text())
    src = tmp_path / "logs" / f"{t['topic']}-{t['partition']}"
    shutil.copytree(RETENTION / case / "input", src)
    said = run("retain", src, tmp_path / "out", "--include-deleted", "--now", t["now_ms"],
               "--log-start-offset", t["applied"]["delete_records_offset"])
    remaining = {p.name: p.read_bytes() for p in (RETENTION / case / "remaining").glob("*.log")}
    assert {p.name: p.read_bytes() for p in (tmp_path / "out").glob("*.log")} == remaining
    assert "left out" not in said
    assert json.loads((tmp_path / "out" / "kfmt-report.json").read_text())["below_log_start"] == []


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
        said = run(transform[0], logs / name, tmp_path / "out", *transform[1:])
        out, checkpoint = tmp_path / "out", None
    else:
        said = run(transform[0], logs, tmp_path / "out", *transform[1:])
        out, checkpoint = tmp_path / "out" / name, tmp_path / "out" / "log-start-offset-checkpoint"
    assert broker_log_start(out, checkpoint, tp) == truth_start
    assert cat(out) == expected
    assert run_kfmt("verify", out, "--deep").code == 0
    if dst_kind == "partition":
        assert min(p.name for p in out.glob("*.log")) == f"{truth_start:020d}.log"
    # nothing left out without a word: the offsets below the log start that DST no longer holds
    report = json.loads((tmp_path / "out" / "kfmt-report.json").read_text())
    if dst_kind == "partition" or transform[0] in ("upgrade", "recompress", "resegment"):
        first, end, records, whole = expected_left_out(logs / name, truth_start)
        [entry] = report["below_log_start"]
        assert (entry["from"], entry["to"], entry["records"], entry["segments"]) == (first, end, records, whole)
        assert f"left out offsets {first}..{end - 1} of {name} ({records} record(s)" in said
    else:  # reindex and retain keep a log directory's segments whole, the checkpoint hides the rest
        assert not report.get("below_log_start") and "left out" not in said


# --- compact: the log cleaner's output, from the log start offset on ---

def compacted(records, first_dirty: int, first_uncleanable: int) -> list[dict]:
    """One cleaning of a first-cleaned log, as a model (docs/format.md §14): in [first dirty, first
    uncleanable) the latest record of each key stays (tombstones too: a first cleaning keeps them
    until their horizon) and records without a key go; from the first uncleanable offset on, all."""
    latest = {r["key"]: r["offset"] for r in records
              if first_dirty <= r["offset"] < first_uncleanable and r["key"] is not None}
    return [r for r in records if r["offset"] >= first_uncleanable
            or (r["offset"] >= first_dirty and r["key"] is not None and latest[r["key"]] == r["offset"])]


def peer_batches(log: Path) -> list[tuple[int, int, int]]:
    """(base offset, last offset, records) of each batch of a segment, read by kafka-python."""
    from kafka.record.memory_records import MemoryRecords

    records, out = MemoryRecords(log.read_bytes()), []
    while (batch := records.next_batch()) is not None:
        offsets = [r.offset for r in batch]
        out.append((offsets[0], offsets[-1], len(offsets)))
    return out


def expected_left_out(partition_dir: Path, log_start: int) -> tuple[int, int, int, int]:
    """(first offset, offset after the last left out, records, whole segments) left out below
    `log_start`, by a peer's reading of the source's segments: every batch ending below it, and the
    segments a broker's retention check deletes (the next one starts at or below it)."""
    logs = sorted(partition_dir.glob("*.log"))
    bases = [int(log.name[:20]) for log in logs]
    batches = [b for log in logs for b in peer_batches(log)]
    below = [b for b in batches if b[1] < log_start]
    holding = next(b for b in batches if b[1] >= log_start)
    whole = sum(1 for following in bases[1:] if following <= log_start)
    return bases[0], min(holding[0], log_start), sum(b[2] for b in below), whole


def kafka41_source(tmp_path: Path) -> tuple[Path, int, list[dict]]:
    logs = tmp_path / "logs"
    shutil.copytree(KAFKA41 / "logs", logs)
    return logs, 169, kafka41_records()


def kafka36_source(tmp_path: Path, case: str) -> tuple[Path, int, list[dict]]:
    """A Kafka 3.6 DeleteRecords case before the broker's retention check: its input segments, and
    the log-start-offset-checkpoint entry the DeleteRecords request left beside them."""
    t = json.loads((RETENTION / case / "truth.json").read_text())
    logs = tmp_path / "logs"
    shutil.copytree(RETENTION / case / "input", logs / f"{t['topic']}-{t['partition']}")
    start = t["log_start_offset"]
    (logs / "log-start-offset-checkpoint").write_text(f"0\n1\n{t['topic']} {t['partition']} {start}\n")
    return logs, start, [r for r in consumer_records(t["source"]) if r["offset"] >= start]


@pytest.mark.parametrize("source", ["kafka41", "v2-none-delete-records", "v1-gzip-delete-records"])
@pytest.mark.parametrize("dst_kind", ["partition", "log"])
def test_compact_serves_from_the_log_start(source, dst_kind, tmp_path):
    logs, start, served = (kafka41_source(tmp_path) if source == "kafka41"
                           else kafka36_source(tmp_path, source))
    [src] = [p for p in logs.iterdir() if p.is_dir()]
    tp = (src.name.rsplit("-", 1)[0], int(src.name.rsplit("-", 1)[1]))
    active = max(int(p.name[:20]) for p in src.glob("*.log"))
    if dst_kind == "partition":
        run("compact", src, tmp_path / "out")
        out, checkpoint, report_dir = tmp_path / "out", None, tmp_path / "out"
    else:
        run("compact", logs, tmp_path / "out")
        out, checkpoint, report_dir = tmp_path / "out" / src.name, tmp_path / "out" / "log-start-offset-checkpoint", tmp_path / "out"
    # Kafka's load rule on DST's files, kfmt cat, and the cleaner's rule on what the consumer read
    assert broker_log_start(out, checkpoint, tp) == start
    assert cat(out) == compacted(served, start, active)
    assert run_kfmt("verify", out, "--deep").code == 0
    report = json.loads((report_dir / "kfmt-report.json").read_text())
    if dst_kind == "partition":
        assert min(p.name for p in out.glob("*.log")) == f"{start:020d}.log"
        [entry] = report["below_log_start"]
        assert (entry["from"], entry["to"], entry["records"], entry["segments"]) == \
            expected_left_out(src, start)
        assert entry["log_start_offset"] == start
        assert report["partitions"][0]["first_segment_renamed_to"] == start
    else:  # the log directory keeps the offset in its checkpoint, and the segments
        assert report["below_log_start"] == []


def test_compact_include_deleted_keeps_what_lies_below(tmp_path):
    logs, start, _served = kafka41_source(tmp_path)
    result = run_kfmt("compact", logs / "d4-delrec-0", tmp_path / "out", "--include-deleted",
                      "--master", "inprocess", "--no-progress")
    assert result.code == 0, result.err
    assert "left out" not in result.out
    out = tmp_path / "out"
    assert broker_log_start(out, None, ("d4-delrec", 0)) == 150  # served again: said in docs/cli.md
    assert cat(out)[0]["offset"] < start


# --- restore: an archive's log start offset, into a partition directory ---

def archive_and_restore(src: Path, archive: str, restored: Path, *options) -> tuple[dict, str]:
    """(the restore's report, its summary line)."""
    run("archive", src, archive, *options)
    said = run("restore", archive, restored, *options)
    return json.loads((restored / "kfmt-report.json").read_text()), said


@pytest.mark.parametrize("source", ["kafka41", "v2-none-delete-records", "v1-gzip-delete-records"])
def test_restore_of_a_partition_archive_serves_from_its_log_start(source, tmp_path):
    """A partition directory's log start offset is its log directory's checkpoint entry: the archive
    records it, and restore carries it in the first segment's name, naming what that leaves out;
    its check of the restored data against the archive's record adds what was left out."""
    logs, start, served = (kafka41_source(tmp_path) if source == "kafka41"
                           else kafka36_source(tmp_path, source))
    [src] = [p for p in logs.iterdir() if p.is_dir()]
    tp = (src.name.rsplit("-", 1)[0], int(src.name.rsplit("-", 1)[1]))
    report, said = archive_and_restore(src, str(tmp_path / "archive"), tmp_path / "restored")
    manifest = json.loads((tmp_path / "archive" / "_kfmt_manifest.json").read_text())
    assert manifest["archive"]["partitions"][0]["log_start_offset"] == start
    out = tmp_path / "restored"
    assert broker_log_start(out, None, tp) == start
    assert min(p.name for p in out.glob("*.log")) == f"{start:020d}.log"
    assert cat(out) == list(served)
    assert run_kfmt("verify", out, "--deep").code == 0
    first, end, records, whole = expected_left_out(src, start)
    [entry] = report["below_log_start"]
    assert (entry["partition"], entry["from"], entry["to"], entry["records"], entry["segments"]) == \
        (src.name, first, end, records, whole)
    assert f"left out offsets {first}..{end - 1} of {src.name}" in said
    # --include-deleted: every archived record back, served from the first archived segment
    run("restore", tmp_path / "archive", tmp_path / "everything", "--include-deleted")
    assert cat(tmp_path / "everything") == cat(src, "--include-deleted")


def test_restore_of_a_log_directory_archive_keeps_the_checkpoint(tmp_path):
    logs, start, served = kafka41_source(tmp_path)
    report, said = archive_and_restore(logs, str(tmp_path / "archive"), tmp_path / "restored")
    out = tmp_path / "restored"
    assert broker_log_start(out / "d4-delrec-0", out / "log-start-offset-checkpoint", ("d4-delrec", 0)) == start
    assert cat(out / "d4-delrec-0") == served
    assert report["below_log_start"] == [] and "left out" not in said


@pytest.mark.s3
def test_restore_from_s3_serves_from_the_log_start(tmp_path, s3_server, s3_url):
    logs, start, served = kafka41_source(tmp_path)
    opts = s3_server.cli_options()
    archive_and_restore(logs / "d4-delrec-0", f"{s3_url}/archive", tmp_path / "restored", *opts)
    assert broker_log_start(tmp_path / "restored", None, ("d4-delrec", 0)) == start
    assert cat(tmp_path / "restored") == served


def test_restore_refuses_a_cut_that_loses_a_batch(tmp_path, monkeypatch):
    """The check adds what was left out to what was restored: a cut one batch too far (the batch
    holding the log start dropped) differs from the archive's record, and nothing is published."""
    import kfmt
    import kfmt.transforms.reindex as reindex_module
    from kfmt.errors import DataError
    from kfmt.format import segment

    logs, _start, _served = kafka41_source(tmp_path)
    run("archive", logs / "d4-delrec-0", tmp_path / "archive")
    right = reindex_module.first_kept_position

    def one_batch_too_far(data, file, floor):
        position = right(data, file, floor)
        return position + segment.FrameScanner(data, file, position).__iter__().__next__().size

    monkeypatch.setattr(reindex_module, "first_kept_position", one_batch_too_far)
    with pytest.raises(DataError, match="differs from what the archive recorded"):
        kfmt.restore(tmp_path / "archive", tmp_path / "restored", master="inprocess")
    assert not (tmp_path / "restored").exists()
