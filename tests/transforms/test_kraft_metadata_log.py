"""The KRaft metadata log `__cluster_metadata-0`: a log directory holding only it is a log directory,
read like any partition; every transform of a KRaft log directory carries it, `bootstrap.checkpoint`
and `meta.properties` byte for byte (kfmt.transforms.metadata_log), and refuses it given on its own.

Truth: the metadata log directory of a real Kafka 4.1 KRaft node (tests/data/realkafka4) and what
kafka-dump-log 4.1 printed of its files.
"""
from __future__ import annotations

import gzip
import json
import re
import uuid

import pytest
from support.cli import run_kfmt
from support.kafka_dirs import KRAFT_ROOT_FILES, METADATA_LOG, REALKAFKA4, file_states, kraft_log_dir

import kfmt

TRUTH = REALKAFKA4 / f"{METADATA_LOG}.truth"
BATCH = re.compile(r"^baseOffset: (\d+) lastOffset: (\d+) count: (\d+) .* isControl: (true|false) ")
CARRYING = [("reindex",), ("upgrade",), ("resegment", "--segment-bytes", "1048576"),
            ("recompress", "--compression", "gzip"), ("compact",), ("retain",), ("salvage",)]


def _kafka_batches() -> list[tuple[int, int, int, bool]]:
    """(base offset, last offset, count, is control) of every batch, as Kafka's dump tool printed them."""
    lines = gzip.decompress((TRUTH / "dump-log.batches.txt.gz").read_bytes()).decode().splitlines()
    return [(int(m[1]), int(m[2]), int(m[3]), m[4] == "true") for m in map(BATCH.match, lines) if m]


def _ok(*args) -> str:
    result = run_kfmt(*args)
    assert result.code == 0, result.err
    return result.out


def test_a_log_directory_holding_only_the_metadata_log_is_read(tmp_path):
    logs = kraft_log_dir(tmp_path / "kraft")
    batches = _kafka_batches()
    [info] = kfmt.info(logs)
    assert (info["topic"], info["partition"]) == ("__cluster_metadata", 0)
    # the log end offset: after Kafka's last batch, where the snapshot it took at shutdown stands
    assert info["log_end_offset"] == batches[-1][1] + 1 == 942
    assert (logs / METADATA_LOG / f"{942:020d}.snapshot").is_file()
    assert info["batches"] == len(batches)
    assert info["records"] == sum(n for *_, n, control in batches if not control)
    assert info["control_records"] == sum(n for *_, n, control in batches if control)
    assert "OK" in _ok("verify", logs)
    assert len(_ok("cat", logs).splitlines()) == info["records"]


@pytest.mark.parametrize("name, truth", [("00000000000000000000.log", "dump-log.batches.txt.gz"),
                                         ("00000000000000000000.index", "dump-index.txt"),
                                         ("00000000000000000000.timeindex", "dump-timeindex.txt")])
def test_its_files_dump_as_kafkas_tool_dumps_them(monkeypatch, name, truth):
    expected = (TRUTH / truth).read_bytes()
    monkeypatch.chdir(REALKAFKA4 / METADATA_LOG)
    assert _ok("dump", name).encode() == (gzip.decompress(expected) if truth.endswith(".gz") else expected)
    _ok("dump", "00000000000000000000-0000000000.checkpoint", "--cluster-metadata-decoder")


def test_its_indexes_are_rebuilt_on_every_start(tmp_path):
    """The raft layer recovers the metadata log whole whatever the marker says (KafkaMetadataLog.apply):
    a 0-byte time index of it is a note."""
    logs = kraft_log_dir(tmp_path / "kraft", clean=True)
    (logs / METADATA_LOG / "00000000000000000000.timeindex").write_bytes(b"")
    result = run_kfmt("verify", logs, "--format", "json")
    assert result.code == 0, result.out
    [note] = [p for p in json.loads(result.out)["problems"] if p["check"] == "time-index-final"]
    assert note["severity"] == "note" and "KafkaMetadataLog" in note["message"]


def _carried(src_states: dict) -> dict:
    return {rel: state for rel, state in src_states.items()
            if rel.startswith(f"{METADATA_LOG}/") or rel in KRAFT_ROOT_FILES}


@pytest.mark.parametrize("partitions", [(), ("v2-none-0",)], ids=["metadata-only", "with-a-partition"])
@pytest.mark.parametrize("command", CARRYING, ids=lambda c: c[0])
def test_every_transform_carries_the_metadata_log_byte_for_byte(tmp_path, command, partitions):
    logs = kraft_log_dir(tmp_path / "kraft", partitions, clean=False)
    before = file_states(logs)
    out = tmp_path / "out"
    _ok(command[0], logs, out, *command[1:])
    carried = _carried(before)
    assert len(carried) == 10
    assert {rel: file_states(out).get(rel) for rel in carried} == carried
    assert file_states(logs) == before
    report = json.loads((out / "kfmt-report.json").read_text())
    assert any("KRaft metadata log" in note for note in report["notes"])


def test_a_topic_selection_still_carries_it(tmp_path):
    """It is the node's, as meta.properties is, not a topic's."""
    logs = kraft_log_dir(tmp_path / "kraft", ("v2-none-0", "v1-gzip-0"))
    _ok("upgrade", logs, tmp_path / "out", "--topic", "v1-*")
    assert sorted(p.name for p in (tmp_path / "out").iterdir() if p.is_dir()) == [METADATA_LOG, "v1-gzip-0"]
    assert _carried(file_states(tmp_path / "out")) == _carried(file_states(logs))


@pytest.mark.parametrize("where", ["local", "memory"])
def test_an_archive_round_trip_carries_it(tmp_path, where):
    logs = kraft_log_dir(tmp_path / "kraft", ("v2-none-0",))
    archive = tmp_path / "archive" if where == "local" else f"memory://kraft-{uuid.uuid4().hex}/archive"
    _ok("archive", logs, archive, "--include-active")
    _ok("archive", logs, archive, "--include-active")  # nothing new: the next generation the same
    _ok("restore", archive, tmp_path / "restored")
    assert _carried(file_states(tmp_path / "restored")) == _carried(file_states(logs))


@pytest.mark.parametrize("command", [*CARRYING, ("archive",)], ids=lambda c: c[0])
def test_the_metadata_log_on_its_own_is_refused_by_every_transform(tmp_path, command):
    src = kraft_log_dir(tmp_path / "kraft") / METADATA_LOG
    result = run_kfmt(command[0], src, tmp_path / "out", *command[1:])
    assert result.code == 2 and len(result.err.splitlines()) == 1, result.err
    assert "the KRaft metadata log, which no kfmt transform rewrites" in result.err
    assert not (tmp_path / "out").exists()


def test_export_reads_it_like_any_partition(tmp_path):
    logs = kraft_log_dir(tmp_path / "kraft")
    out = _ok("export", logs, tmp_path / "out", "--format", "jsonl")
    assert "exported 939 records of 1 partition(s)" in out
