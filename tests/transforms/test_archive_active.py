"""Issue 28, point 1: `kfmt archive` knows whether a broker is running on SRC.

Kafka keeps two brokers off one log directory by locking its `.lock` file while it runs
(LogManager.lockLogDirs); kfmt looks at that lock (never taking it) and at the clean-shutdown
marker. With no broker there, each partition's last segment is just its newest data and is
archived whole; on a running broker it is left for the next run, and the run says which offsets.

Checked against independent truth: the Java consumer's records of the real-broker corpus (a log
directory of a broker stopped cleanly, and a bare copy of it), and the live writer's record of what
it wrote (stopped cleanly, killed, and running), locally and on the S3 test server. The lock is
held by another process, as a broker holds it (a process's own locks are invisible to it).
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.cli import run_kfmt
from support.corpus import REALKAFKA
from support.corpus_truth import consumer_records
from support.live_writer import LiveWriter

# a mix of formats, codecs, a compacted log with empty segments and a transactional one
CORPUS = ["v0-none-0", "v1-gzip-0", "v2-zstd-0", "compact-v2-none-0", "txn-v2-none-0"]
LOGDIR_FILES = ["meta.properties", "log-start-offset-checkpoint", "recovery-point-offset-checkpoint",
                "replication-offset-checkpoint", "cleaner-offset-checkpoint"]


def corpus_log_dir(root: Path, kind: str) -> Path:
    """The corpus partitions as a log directory: as a stopped broker leaves it (`.lock` unlocked,
    `.kafka_cleanshutdown`), or a bare copy of the partitions (`copy`)."""
    logs = root / "logs"
    for name in CORPUS:
        shutil.copytree(REALKAFKA / name, logs / name)
    if kind == "stopped":
        for name in LOGDIR_FILES:
            shutil.copy(REALKAFKA / "_logdir-root" / name, logs / name)
        (logs / ".lock").touch()
        (logs / ".kafka_cleanshutdown").touch()
    return logs


def kfmt(*args) -> dict:
    result = run_kfmt(*args, "--master", "inprocess", "--no-progress", "--format", "json")
    assert result.code == 0, result.err
    return json.loads(result.out)


def cat(path: Path) -> dict[str, list[dict]]:
    result = run_kfmt("cat", path, "--format", "json")
    assert result.code == 0, result.err
    out: dict[str, list[dict]] = {}
    for record in map(json.loads, result.lines):
        out.setdefault(f"{record.pop('topic')}-{record.pop('partition')}", []).append(record)
    return out


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in run_kfmt("cat", path, "--format", "json").lines]


def round_trip(logs: Path, url: str, opts: list[str], restored: Path) -> dict:
    report = kfmt("archive", logs, url, *opts)
    kfmt("restore", url, restored, *opts)
    assert run_kfmt("verify", restored, "--deep").code == 0
    return report


@pytest.mark.parametrize("kind", ["stopped", "copy"])
def test_a_stopped_brokers_directory_and_a_copy_round_trip_every_record(kind, tmp_path):
    logs = corpus_log_dir(tmp_path, kind)
    report = round_trip(logs, str(tmp_path / "archive"), [], tmp_path / "restored")
    assert report["active_segments"]["included"] is True, report["active_segments"]
    assert report["active_segments"]["left"] == []
    for name in CORPUS:
        # every record the Java consumer read from the broker, in the restored partition
        assert lines(tmp_path / "restored" / name) == list(consumer_records(name)), name
        assert lines(tmp_path / "restored" / name) == lines(logs / name), name


@pytest.mark.s3
def test_a_stopped_brokers_directory_round_trips_every_record_through_s3(tmp_path, s3_server, s3_url):
    logs = corpus_log_dir(tmp_path, "stopped")
    report = round_trip(logs, s3_url, s3_server.cli_options(), tmp_path / "restored")
    assert report["active_segments"]["included"] is True
    for name in CORPUS:
        assert lines(tmp_path / "restored" / name) == list(consumer_records(name)), name


@pytest.mark.s3
def test_a_log_directory_on_object_storage_is_a_copy(tmp_path, s3_server, s3_url):
    """SRC on S3 (a copy uploaded as it was, `.lock` included): its active segments are archived."""
    logs = corpus_log_dir(tmp_path, "stopped")
    opts = s3_server.cli_options()
    source = f"{s3_url}/logs"
    from kfmt.storage.store import open_storage

    storage, root = open_storage(source, dict(o.split("=", 1) for o in opts[1::2]))
    for path in logs.rglob("*"):
        if path.is_file():
            stream = storage.open_write(storage.join(root, *path.relative_to(logs).parts))
            stream.write(path.read_bytes())
            stream.close()
    report = round_trip(source, f"{s3_url}/archive", opts, tmp_path / "restored")
    assert report["active_segments"]["included"] is True
    assert "not on local disk" in report["active_segments"]["why"]
    for name in CORPUS:
        assert lines(tmp_path / "restored" / name) == list(consumer_records(name)), name


def writer_records(writer: LiveWriter, tp) -> dict[int, tuple]:
    return {o: (r.timestamp, r.key, r.value) for o, r in writer.truth()[tp].records.items()}


def restored_records(path: Path) -> dict[int, tuple]:
    import base64
    import hashlib

    def sha(b64):
        return None if b64 is None else hashlib.sha256(base64.b64decode(b64)).hexdigest()

    return {r["offset"]: (r["timestamp"], sha(r["key"]), sha(r["value"])) for r in lines(path)}


@pytest.mark.parametrize("ending", ["clean", "killed"])
def test_a_live_writer_stopped_or_killed_is_archived_whole(ending, tmp_path):
    """The writer's partitions after a clean stop (marker written, lock released) and after a
    SIGKILL (no marker; the kernel released the lock): every record it wrote from the log start on
    is in the restored archive, the newest segment's included."""
    logs, tp = tmp_path / "logs", ("live", 0)
    writer = LiveWriter(logs, [tp], seed=28, retain_segments=4, step_seconds=0.002).start()
    writer.wait_for(rolls=5, deleted=1)
    if ending == "clean":
        writer.stop()
    else:
        writer.kill()
    assert (logs / ".kafka_cleanshutdown").exists() == (ending == "clean")
    report = round_trip(logs, str(tmp_path / "archive"), [], tmp_path / "restored")
    assert report["active_segments"]["included"] is True, report["active_segments"]
    assert "no process holds the lock" in report["active_segments"]["why"]
    written = writer_records(writer, tp)
    restored = restored_records(tmp_path / "restored" / "live-0")
    # the log start offset: the checkpoint's (a writer killed after moving it and before renaming
    # the segments below it leaves them on disk, and Kafka deletes them: UnifiedLog.deleteSegments),
    # else the oldest segment's base
    checkpoint = (logs / "log-start-offset-checkpoint").read_text().splitlines()[2:]
    start = max([min(int(p.name[:20]) for p in (logs / "live-0").glob("*.log"))]
                + [int(line.split()[2]) for line in checkpoint if line.split()[:2] == ["live", "0"]])
    # what the writer wrote from the log start on, to its last batch (a killed writer's records
    # are in its truth only once on disk)
    assert restored == {o: v for o, v in written.items() if o >= start}
    assert max(restored) == max(written)


def test_a_running_broker_keeps_its_active_segments_for_the_next_run(tmp_path):
    logs, tp = tmp_path / "logs", ("live", 0)
    with LiveWriter(logs, [tp, ("live", 1)], seed=29, step_seconds=0.002) as writer:
        writer.wait_for(rolls=4)
        writer.pause()  # the files as the broker leaves them between two requests
        listed = {p: sorted(int(f.name[:20]) for f in (logs / p).glob("*.log")) for p in ("live-0", "live-1")}
        text = run_kfmt("archive", logs, tmp_path / "archive", "--master", "inprocess", "--no-progress")
        assert text.code == 0, text.err
        truth = writer.truth()
        ends = {f"{t}-{n}": max(truth[(t, n)].records) + 1 for t, n in truth}
        report = json.loads((tmp_path / "archive" / "kfmt-report.json").read_text())
        forced = kfmt("archive", logs, tmp_path / "forced", "--include-active")
        writer.resume()
    active = report["active_segments"]
    assert active["included"] is False and "holds the lock on" in active["why"], active
    expected = [{"partition": p, "from": listed[p][-1], "to": ends[p], "offsets": ends[p] - listed[p][-1]}
                for p in ("live-0", "live-1") if ends[p] > listed[p][-1]]
    assert active["left"] == expected
    assert "left for the next run, the active segments of a running broker" in text.out
    for e in expected:
        assert f"{e['partition']} offsets {e['from']}..{e['to'] - 1}" in text.out
    # archived: every segment but the active one
    assert {p["path"].rsplit("/", 1)[-1]: p["next_offset"] for p in report["outputs"]} == \
        {p: listed[p][-1] for p in listed}
    # --include-active forces the active segments in, on a running broker too
    assert forced["active_segments"] == {"included": True, "why": "--include-active", "left": []}
    assert {p["path"].rsplit("/", 1)[-1]: p["next_offset"] for p in forced["outputs"]} == ends


def test_exclude_active_leaves_them_out_of_a_stopped_brokers_directory(tmp_path):
    logs = corpus_log_dir(tmp_path, "stopped")
    report = kfmt("archive", logs, tmp_path / "archive", "--exclude-active")
    left = {e["partition"]: (e["from"], e["to"]) for e in report["active_segments"]["left"]}
    assert report["active_segments"]["why"] == "--exclude-active"
    for name in CORPUS:
        last = max(int(p.name[:20]) for p in (logs / name).glob("*.log"))
        records = consumer_records(name)
        if records and records[-1]["offset"] >= last:
            assert left[name][0] == last, name
    usage = run_kfmt("archive", logs, tmp_path / "x", "--include-active", "--exclude-active")
    assert usage.code == 2


def test_a_lock_held_by_another_process_is_seen_without_taking_it(tmp_path):
    """kfmt.partition.broker asks the kernel (F_GETLK): the holder keeps its lock, the file is not
    changed, and once the holder is gone the directory is a stopped broker's."""
    from kfmt.partition.broker import broker_state
    from kfmt.storage.store import open_storage

    logs = tmp_path / "logs"
    logs.mkdir()
    lock = logs / ".lock"
    lock.touch()
    before = lock.stat()
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, sys, time\n"
        f"f = open({str(lock)!r}, 'r+'); fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
        "print('held', flush=True); sys.stdin.readline()")], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        storage, path = open_storage(str(logs))
        state = broker_state(storage, path)
        assert state.running and f"process {holder.pid} holds the lock" in state.why
    finally:
        holder.stdin.close()
        holder.wait(10)
    assert not broker_state(storage, path).running
    after = lock.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    assert sorted(p.name for p in logs.iterdir()) == [".lock"]
    # no .lock at all: nobody runs there; an unreadable one: the clean-shutdown marker decides
    lock.unlink()
    assert not broker_state(storage, path).running
