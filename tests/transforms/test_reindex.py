"""kfmt reindex against Kafka's own rebuild of every corpus partition, and its contract (CLI.md):
log directories, fsspec storage, --dry-run, exit codes, atomic publication, SRC left untouched."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import fsspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.cli import run_kfmt
from support.corpus import REAL_DIRS, REALKAFKA
from support.kafka_dirs import file_states
from support.reindex_truth import COMPANION, companions, index_interval, rebuild_now_ms, truth_digest

from kfmt.format import segment
from kfmt.format.digest import ContentDigest
from kfmt.format.model import make_records
from kfmt.partition.checkpoints import read_offset_checkpoint
from kfmt.partition.indexes import read_offset_index, read_time_index
from kfmt.transforms.report import REPORT_NAME

REBUILT = [d for d in REAL_DIRS if (REALKAFKA / f"{d}.truth" / "rebuilt").is_dir()]


def tree_state(root: Path) -> dict:
    return {str(p.relative_to(root)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


def reindex(src, dst, *args):
    return run_kfmt("reindex", src, dst, "--no-progress", *args)


@pytest.mark.parametrize("name", REBUILT)
def test_reindex_equals_the_brokers_own_rebuild(name, tmp_path):
    src, dst = REALKAFKA / name, tmp_path / name
    result = reindex(src, dst, "--now", rebuild_now_ms(name), "--index-interval-bytes", index_interval(name))
    assert result.code == 0, result.err
    rebuilt = REALKAFKA / f"{name}.truth" / "rebuilt"
    assert companions(dst) == companions(rebuilt)  # same names, same bytes
    for log in src.glob("*.log"):
        copy = dst / log.name
        assert copy.read_bytes() == log.read_bytes()
        assert copy.stat().st_mtime_ns // 1_000_000 == log.stat().st_mtime_ns // 1_000_000
    assert (dst / "partition.metadata").read_bytes() == (src / "partition.metadata").read_bytes()
    report = json.loads((dst / REPORT_NAME).read_text())
    [summary] = report["inputs"]
    assert (summary["records"], summary["content_digest"]) == truth_digest(name)
    assert report["outputs"][0]["content_digest"] == summary["content_digest"]
    assert summary["segments"] == len(list(src.glob("*.log")))


def frames(log: Path):
    data = log.read_bytes()
    return list(segment.scan(data, str(log)))


@pytest.mark.parametrize("name", ["v0-none-0", "v1-none-0", "v2-none-0", "v1-gzip-0",
                                  "txn-v2-none-0", "compact-v2-none-0"])
def test_index_interval_zero_indexes_every_batch_but_the_first(name, tmp_path):
    result = reindex(REALKAFKA / name, tmp_path / "out", "--index-interval-bytes", 0,
                     "--now", rebuild_now_ms(name))
    assert result.code == 0, result.err
    rebuilt = REALKAFKA / f"{name}.truth" / "rebuilt"
    out = companions(tmp_path / "out")
    for log in sorted((REALKAFKA / name).glob("*.log")):
        base = int(log.stem)
        headers = frames(log)
        entries = read_offset_index(out[f"{log.stem}.index"], base)
        assert [(e.offset, e.position) for e in entries] == [(h.last_offset, h.position) for h in headers[1:]]
        # The time index's last entry is the segment's largest timestamp whatever the interval:
        # Kafka's own (rebuilt) file ends with the same entry.
        ours = read_time_index(out[f"{log.stem}.timeindex"], base)
        kafkas = read_time_index((rebuilt / f"{log.stem}.timeindex").read_bytes(), base)
        assert ours[-1:] == kafkas[-1:]
        assert all(a.timestamp < b.timestamp and a.offset <= b.offset for a, b in zip(ours, ours[1:]))
    # Nothing else depends on the interval.
    assert {n: d for n, d in out.items() if not n.endswith("index")} == \
        {n: d for n, d in companions(rebuilt).items() if not n.endswith("index")}


@pytest.mark.parametrize("name", ["v0-none-0", "v1-none-0", "v2-none-0", "v2-zstd-0"])
def test_a_large_index_interval_leaves_only_the_final_time_entry(name, tmp_path):
    result = reindex(REALKAFKA / name, tmp_path / "out", "--index-interval-bytes", 2**31 - 1,
                     "--now", rebuild_now_ms(name))
    assert result.code == 0, result.err
    rebuilt = REALKAFKA / f"{name}.truth" / "rebuilt"
    out = companions(tmp_path / "out")
    for log in (REALKAFKA / name).glob("*.log"):
        assert out[f"{log.stem}.index"] == b""
        assert out[f"{log.stem}.timeindex"] == (rebuilt / f"{log.stem}.timeindex").read_bytes()[-12:]


@pytest.fixture
def log_dir(tmp_path, realkafka) -> Path:
    """A broker's log directory: four corpus partitions (default index.interval.bytes), the log-dir
    files the broker left at shutdown, a clean-shutdown marker and a KRaft metadata directory."""
    root = tmp_path / "kafka-logs"
    root.mkdir()
    for name in ["txn-v2-none-0", "v2-gzip-0", "compact-v1-gzip-0", "v0-lz4-0"]:
        shutil.copytree(realkafka / name, root / name)  # copy2 keeps the mtimes
    for f in (realkafka / "_logdir-root").iterdir():
        shutil.copy2(f, root / f.name)
    (root / ".kafka_cleanshutdown").write_text("")
    (root / "__cluster_metadata-0").mkdir()
    (root / "__cluster_metadata-0" / "00000000000000000000.log").write_bytes(b"")
    for p in root.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    return root


def test_log_directory_with_several_partitions(log_dir, tmp_path):
    before = tree_state(log_dir)
    # The txn topic's markers make its snapshots depend on the clock; the others' 2023 producers
    # expire at any 2026 time, so the txn topic's rebuild time reproduces all four rebuilds.
    result = reindex(log_dir, tmp_path / "out", "--now", rebuild_now_ms("txn-v2-none-0"), "--format", "json")
    assert result.code == 0, result.err
    out = tmp_path / "out"
    names = ["compact-v1-gzip-0", "txn-v2-none-0", "v0-lz4-0", "v2-gzip-0"]
    # the KRaft metadata log is carried as it is, never reindexed (kfmt.transforms.metadata_log)
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["__cluster_metadata-0", *names]
    assert file_states(out / "__cluster_metadata-0") == file_states(log_dir / "__cluster_metadata-0")
    for name in names:
        assert companions(out / name) == companions(REALKAFKA / f"{name}.truth" / "rebuilt")
    assert (out / "meta.properties").read_bytes() == (log_dir / "meta.properties").read_bytes()
    assert not (out / ".kafka_cleanshutdown").exists()
    topics = {n.rsplit("-", 1)[0] for n in names}
    for checkpoint in ["recovery-point-offset-checkpoint", "replication-offset-checkpoint",
                       "cleaner-offset-checkpoint", "log-start-offset-checkpoint"]:
        original = read_offset_checkpoint((log_dir / checkpoint).read_text(), checkpoint)
        written = read_offset_checkpoint((out / checkpoint).read_text(), checkpoint)
        assert written == {tp: o for tp, o in original.items() if tp[0] in topics}
    report = json.loads(result.out)
    assert report == json.loads((out / REPORT_NAME).read_text())
    assert [p["topic"] for p in report["inputs"]] == sorted(topics)
    assert tree_state(log_dir) == before


def test_topic_and_partition_narrow_a_log_directory(log_dir, tmp_path):
    result = reindex(log_dir, tmp_path / "v2", "--topic", "v2-*")
    assert result.code == 0, result.err
    # the KRaft metadata log is the node's, not a topic's: carried whatever --topic selects
    dirs = sorted(p.name for p in (tmp_path / "v2").iterdir() if p.is_dir())
    assert dirs == ["__cluster_metadata-0", "v2-gzip-0"]
    recovery = read_offset_checkpoint((tmp_path / "v2" / "recovery-point-offset-checkpoint").read_text(), "")
    assert recovery == {("v2-gzip", 0): 500}
    result = reindex(log_dir, tmp_path / "none", "--partition", 1)
    assert result.code == 2 and "no partition" in result.err
    assert not (tmp_path / "none").exists()


def test_log_start_offset_checkpoint_shapes_epochs_and_snapshots(tmp_path, realkafka):
    """DeleteRecords moved the log start offset inside the first segment (retention ground truth):
    recovery then starts the leader epoch at it and keeps no snapshot at or below it."""
    case = realkafka / "_retention" / "v2-none-delete-records"
    truth = json.loads((case / "truth.json").read_text())
    root = tmp_path / "logs"
    shutil.copytree(case / "remaining", root / "v2-none-0")
    (root / "v2-none-0" / "leader-epoch-checkpoint").unlink()  # derive it from the batches alone
    log_start = truth["log_start_offset_checkpoint"]
    (root / "log-start-offset-checkpoint").write_text(f"0\n1\nv2-none 0 {log_start}\n")
    result = reindex(root, tmp_path / "out")
    assert result.code == 0, result.err
    out = tmp_path / "out" / "v2-none-0"
    assert (out / "leader-epoch-checkpoint").read_bytes() == \
        (case / "remaining" / "leader-epoch-checkpoint").read_bytes()
    bases = sorted(int(p.stem) for p in out.glob("*.log"))
    assert sorted(int(p.stem) for p in out.glob("*.snapshot")) == bases[1:] + [truth["log_end_offset"]]


def test_fsspec_memory_source_and_destination(tmp_path):
    name = "txn-v2-none-0"
    fs = fsspec.filesystem("memory")
    root = f"/kfmt-test-{os.getpid()}"
    try:
        for f in (REALKAFKA / name).iterdir():
            fs.pipe_file(f"{root}/src/{name}/{f.name}", f.read_bytes())
        now = rebuild_now_ms(name)
        result = reindex(f"memory://{root}/src/{name}", f"memory://{root}/dst", "--now", now)
        assert result.code == 0, result.err
        written = {p.rsplit("/", 1)[1]: fs.cat_file(p) for p in fs.find(f"{root}/dst")}
        assert {n: d for n, d in written.items() if COMPANION.search(n)} == \
            companions(REALKAFKA / f"{name}.truth" / "rebuilt")
        assert all(written[f.name] == f.read_bytes() for f in (REALKAFKA / name).glob("*.log"))
        assert "_kfmt_manifest.json" in written and REPORT_NAME in written
        # Memory to local gives the same files.
        local = reindex(f"memory://{root}/src/{name}", tmp_path / "local", "--now", now)
        assert local.code == 0, local.err
        assert companions(tmp_path / "local") == {n: d for n, d in written.items() if COMPANION.search(n)}
    finally:
        if fs.exists(root):
            fs.rm(root, recursive=True)


def test_dry_run_prints_the_plan_and_writes_nothing(log_dir, tmp_path):
    result = reindex(log_dir, tmp_path / "out", "--dry-run")
    assert result.code == 0, result.err
    assert "txn-v2-none-0" in result.out and "skip .kafka_cleanshutdown" in result.out
    assert list(tmp_path.iterdir()) == [log_dir]
    as_json = reindex(log_dir, tmp_path / "out", "--dry-run", "--format", "json")
    plan = json.loads(as_json.out)
    assert [p["name"] for p in plan["partitions"]] == ["compact-v1-gzip-0", "txn-v2-none-0", "v0-lz4-0",
                                                       "v2-gzip-0"]
    assert list(tmp_path.iterdir()) == [log_dir]


def test_destination_not_empty_is_a_usage_error(tmp_path, realkafka):
    dst = tmp_path / "dst"
    dst.mkdir()
    (dst / "keep.txt").write_text("mine")
    for extra in ([], ["--dry-run"]):
        result = reindex(realkafka / "v2-none-0", dst, *extra)
        assert result.code == 2 and "not empty" in result.err
    assert [p.name for p in dst.iterdir()] == ["keep.txt"]
    assert reindex(realkafka / "v2-none-0", realkafka / "v2-none-0" / "inside").code == 2


def corrupt_copy(tmp_path: Path, realkafka: Path, name: str) -> tuple[Path, Path, int, int]:
    """A copy of a corpus partition with one byte of a later segment's middle batch flipped (inside
    the CRC-covered part): (directory, the segment, batch position, batch last offset)."""
    src = tmp_path / name
    shutil.copytree(realkafka / name, src)
    log = sorted(src.glob("*.log"))[-3]
    log.chmod(0o644)
    headers = frames(log)
    victim = headers[len(headers) // 2]
    data = bytearray(log.read_bytes())
    data[victim.position + victim.size - 1] ^= 0xFF
    log.write_bytes(bytes(data))
    return src, log, victim.position, victim.last_offset


def test_bad_data_exits_65_and_publishes_nothing(tmp_path, realkafka):
    src, log, position, _offset = corrupt_copy(tmp_path, realkafka, "v2-none-0")
    before = tree_state(src)
    result = reindex(src, tmp_path / "out")
    assert result.code == 65
    assert str(log) in result.err and f"position {position}" in result.err
    assert len(result.err.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v2-none-0"]  # no output, no staging left
    assert tree_state(src) == before


def test_bad_data_on_object_storage_publishes_nothing(tmp_path, realkafka):
    src, _log, _position, _offset = corrupt_copy(tmp_path, realkafka, "v1-gzip-0")
    fs = fsspec.filesystem("memory")
    dst = f"/kfmt-test-bad-{os.getpid()}"
    try:
        result = reindex(src, f"memory://{dst}")
        assert result.code == 65, result.err
        assert not fs.exists(dst) or not fs.find(dst)
    finally:
        if fs.exists(dst):
            fs.rm(dst, recursive=True)


# --- the content digest -------------------------------------------------------------------------

maybe_bytes = st.none() | st.binary(max_size=8)
records_strategy = st.lists(st.tuples(st.integers(-1, 2**40), maybe_bytes, maybe_bytes,
                                      st.lists(st.tuples(st.binary(max_size=4), maybe_bytes), max_size=3)),
                            max_size=20)


def as_records(rows, first_offset=0):
    return make_records(list(range(first_offset, first_offset + len(rows))), [r[0] for r in rows],
                        [r[1] for r in rows], [r[2] for r in rows], [r[3] for r in rows])


def digest_of(*batches) -> str:
    d = ContentDigest()
    for b in batches:
        d.update(b)
    return d.hexdigest()


@settings(max_examples=100, deadline=None)
@given(rows=records_strategy, cut=st.integers(0, 20))
def test_digest_ignores_batching_and_sees_every_field(rows, cut):
    whole = as_records(rows)
    assert digest_of(whole) == digest_of(whole.slice(0, cut), whole.slice(cut))
    assert digest_of(whole) != digest_of(as_records(rows, first_offset=1)) or not rows
    for i, (ts, key, value, headers) in enumerate(rows):
        changed = [
            (ts + 1, key, value, headers),
            (ts, (key or b"") + b"\0", value, headers),
            (ts, value, key, headers) if key != value else (ts, key, value, headers + [(b"", None)]),
            (ts, key, value, headers + [(b"k", b"")]),
            (ts, key, value, [(k, None if v is not None else b"") for k, v in headers] or [(b"", b"")]),
        ]
        for row in changed:
            other = rows[:i] + [row] + rows[i + 1:]
            assert digest_of(as_records(other)) != digest_of(whole), (rows[i], row)
