"""kfmt archive run again and again over a log directory that changes between runs the way a broker
changes it (docs/archive.md "Generations"): batches appended to the active segment, segments rolled,
the oldest deleted by retention (UnifiedLog's `.deleted` rename, the log-start-offset-checkpoint
raised), a compacted partition's first segments rewritten by the cleaner (LogCleaner: `.cleaned`,
`.swap`, same base offset, other bytes). Every generation is restored and read back with
kafka-python's record parser (an independent reader) and checked against the records the source
held when that generation was made: rolled segments, the retention-deleted ones the archive keeps,
the active segment up to its last complete batch with --include-active. Also: a re-run with nothing
new writes nothing (local, memory:// and the S3 test server), runs SIGKILLed at several points leave
the previous generation restorable and the next run resumes, a segment deleted while a run reads it
is skipped with one warning, and the pool and Spark engines."""
from __future__ import annotations

import base64
import hashlib
import json
import os
import signal
import struct
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords
from support.cli import run_kfmt

from kfmt.storage.manifest import MANIFEST
from kfmt.storage.store import open_storage

BASE_TS = 1_700_000_000_000


def batch_bytes(records: list[tuple[int, bytes, bytes]]) -> bytes:
    """One v2 batch (kafka-python's encoder) holding (offset, key, value) records."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    base = records[0][0]
    for offset, key, value in records:
        builder.append(offset - base, timestamp=BASE_TS + offset, key=key, value=value, headers=[])
    data = bytearray(builder.build())
    data[0:8] = struct.pack(">q", base)  # the base offset is not covered by the CRC
    return bytes(data)


def read_records(log: Path) -> list[tuple[int, bytes, bytes]]:
    records = MemoryRecords(log.read_bytes())
    out = []
    while records.has_next():
        batch = records.next_batch()
        if batch is None:
            break
        out += [(r.offset, r.key, r.value) for r in batch]
    return out


class Broker:
    """A log directory changed as a broker changes it on disk (the file operations of Kafka's
    LogSegment, UnifiedLog and LogCleaner, in process: the archive runs between the steps)."""

    def __init__(self, root: Path):
        self.root = root
        root.mkdir(parents=True)
        (root / "meta.properties").write_text("version=1\nnode.id=1\ncluster.id=5Lfo0R_sQbODnu2-4u0iOw\n"
                                              "directory.id=6Qz3zG9mS5y0bYkqPQXQ3g\n")
        self.next = {}
        self.log_start = {}
        self.mtime = 1_700_000_000
        for name in ("orders-0", "users-0"):
            (root / name).mkdir()
            topic_id = base64.urlsafe_b64encode(hashlib.md5(name.encode()).digest()).decode()[:22]
            (root / name / "partition.metadata").write_text(f"version: 0\ntopic_id: {topic_id}\n")
            self.next[name] = 0
            self.log_start[name] = 0
            self._new_segment(name, 0)
        self._checkpoint()

    def segments(self, name: str) -> list[Path]:
        return sorted((self.root / name).glob("*.log"))

    def _new_segment(self, name: str, base: int) -> None:
        for suffix in ("log", "index", "timeindex"):
            (self.root / name / f"{base:020d}.{suffix}").touch()
        self._touch(self.root / name / f"{base:020d}.log")

    def _touch(self, path: Path) -> None:
        self.mtime += 1  # distinct, increasing modification times (the quick check sees each change)
        os.utime(path, (self.mtime, self.mtime))

    def _checkpoint(self) -> None:
        lines = [f"{name[:-2]} 0 {offset}" for name, offset in sorted(self.log_start.items())]
        tmp = self.root / "log-start-offset-checkpoint.tmp"
        tmp.write_text("0\n%d\n%s\n" % (len(lines), "\n".join(lines)))
        tmp.rename(self.root / "log-start-offset-checkpoint")

    def append(self, name: str, count: int, keys: int | None = None) -> None:
        """A batch of `count` records appended to the active segment (keys cycle when `keys`)."""
        first = self.next[name]
        records = [(o, f"k{o % keys if keys else o}".encode(), f"{name}-{o}".encode())
                   for o in range(first, first + count)]
        log = self.segments(name)[-1]
        with open(log, "ab") as f:
            f.write(batch_bytes(records))
        self._touch(log)
        self.next[name] = first + count

    def torn_append(self, name: str) -> None:
        """Half a batch: what a reader sees while the broker is writing one."""
        data = batch_bytes([(self.next[name], b"torn", b"torn")])
        log = self.segments(name)[-1]
        with open(log, "ab") as f:
            f.write(data[:len(data) // 2])
        self._touch(log)

    def finish_torn(self, name: str) -> None:
        """The broker finishes the batch it was writing."""
        data = batch_bytes([(self.next[name], b"torn", b"torn")])
        log = self.segments(name)[-1]
        with open(log, "ab") as f:
            f.write(data[len(data) // 2:])
        self._touch(log)
        self.next[name] += 1

    def roll(self, name: str) -> None:
        self._new_segment(name, self.next[name])

    def delete_oldest(self, name: str) -> None:
        """Retention: the log start offset moves to the next segment, the old files are renamed
        `.deleted` and removed (UnifiedLog.deleteSegments, LocalLog)."""
        oldest, following = self.segments(name)[:2]
        self.log_start[name] = int(following.stem)
        self._checkpoint()
        for path in sorted((self.root / name).glob(f"{oldest.stem}.*")):
            deleted = path.with_name(path.name + ".deleted")
            path.rename(deleted)
            deleted.unlink()

    def clean(self, name: str, group: int) -> None:
        """LogCleaner: the first `group` segments rewritten as one with the latest record per key
        (of the segments up to the active one), written `.cleaned`, renamed `.swap`, the old segments
        renamed `.deleted`, the swap renamed into place; its mtime the group's last one's."""
        segments = self.segments(name)
        dirty = [r for log in segments[:-1] for r in read_records(log)]
        latest = {key: offset for offset, key, _value in dirty}
        olds = segments[:group]
        kept = [r for log in olds for r in read_records(log) if latest[r[1]] == r[0]]
        base = olds[0].stem
        cleaned = self.root / name / f"{base}.log.cleaned"
        cleaned.write_bytes(b"".join(batch_bytes([r]) for r in kept))
        mtime = olds[-1].stat().st_mtime
        swap = cleaned.with_name(f"{base}.log.swap")
        cleaned.rename(swap)
        for old in olds:
            for path in sorted(old.parent.glob(f"{old.stem}.*")):
                if not path.name.endswith((".swap",)):
                    path.rename(path.with_name(path.name + ".deleted"))
                    path.with_name(path.name + ".deleted").unlink()
        final = self.root / name / f"{base}.log"
        swap.rename(final)
        for suffix in ("index", "timeindex"):
            (self.root / name / f"{base}.{suffix}").touch()
        os.utime(final, (mtime, mtime))

    def rolled(self, name: str, include_active: bool = False) -> dict[int, list]:
        """base offset -> records of the segments an archive run takes now."""
        segments = self.segments(name) if include_active else self.segments(name)[:-1]
        return {int(log.stem): read_records(log) for log in segments}


class Expected:
    """What each generation must hold, kept from the broker's state at each run: per partition the
    segments archived by base offset (the latest version of each), those retention removed from
    the source staying unless --prune."""

    def __init__(self):
        self.archived: dict[str, dict[int, list]] = {}
        self.log_start: dict[str, int] = {}

    def run(self, broker: Broker, include_active: bool = False, prune: bool = False) -> dict:
        state = {}
        for name in ("orders-0", "users-0"):
            taken = broker.rolled(name, include_active)
            source = [int(log.stem) for log in broker.segments(name)]
            held = self.archived.get(name, {})
            merged = {b: held[b] for b in held if b in source}  # kept: the active one left out now
            if not prune:
                merged.update({b: held[b] for b in held if b < source[0]})  # retention removed
            merged.update(taken)
            self.archived[name] = merged
            start = broker.log_start[name]
            self.log_start[name] = start if prune or name not in self.log_start else min(
                self.log_start[name], start)
            state[name] = ([r for b in sorted(merged) for r in merged[b]], self.log_start[name])
        return state


def archive(src, url, *args):
    """The Broker model is a running broker's directory without its `.lock` (the lock a broker
    holds is tests/transforms/test_archive_active.py's): --exclude-active says what the lock would."""
    if "--include-active" not in args:
        args = ("--exclude-active", *args)
    return run_kfmt("archive", src, url, "--master", "inprocess", "--no-progress", "--format", "json", *args)


def restored_state(url, dst: Path, generation: int | None, *opts) -> dict:
    args = ["--generation", generation] if generation is not None else []
    result = run_kfmt("restore", url, dst, "--master", "inprocess", "--no-progress", *args, *opts)
    assert result.code == 0, result.err
    verify = run_kfmt("verify", dst, "--deep")
    assert verify.code == 0, verify.out + verify.err
    starts = {}
    checkpoint = dst / "log-start-offset-checkpoint"
    if checkpoint.exists():
        for line in checkpoint.read_text().splitlines()[2:]:
            topic, _partition, offset = line.split()
            starts[f"{topic}-0"] = int(offset)
    return {name: ([r for log in sorted((dst / name).glob("*.log")) for r in read_records(log)],
                   starts.get(name, 0))
            for name in ("orders-0", "users-0")}


def object_state(url: str, options: dict | None = None) -> dict:
    storage, path = open_storage(url, options)
    if not storage.exists(path):
        return {}
    return {f.path: (f.size, f.mtime_ms, hashlib.sha256(bytes(storage.read(f.path))).hexdigest())
            for f in storage.walk(path)}


@pytest.fixture(params=["local", "memory"])
def url(request, tmp_path):
    if request.param == "local":
        yield str(tmp_path / "archive")
        return
    url = f"memory:///kfmt-incremental-test/{uuid.uuid4().hex}"
    yield url
    storage, path = open_storage(url)
    storage.remove_tree(path)


def test_generations_follow_a_broker_on_disk(url, tmp_path):
    follow_a_broker(url, {}, [], tmp_path)


@pytest.mark.s3
def test_generations_follow_a_broker_on_disk_on_s3(s3_server, s3_url, tmp_path):
    follow_a_broker(s3_url, s3_server.storage_options, s3_server.cli_options(), tmp_path)


def follow_a_broker(url, options, opts, tmp_path):
    broker, expected, generations = Broker(tmp_path / "logs"), Expected(), {}
    src = broker.root
    for _ in range(3):
        broker.append("orders-0", 5)
        broker.append("users-0", 4, keys=3)
        broker.roll("orders-0")
        broker.roll("users-0")
    broker.append("orders-0", 2)

    def run(*args, **model):
        result = archive(src, url, *args, *opts)
        assert result.code == 0, result.err
        report = json.loads(result.out)
        assert "state" not in report, report
        generations[report["generation"]] = expected.run(broker, **model)
        assert restored_state(url, tmp_path / f"now-{report['generation']}", None, *opts) == \
            generations[report["generation"]]
        return report

    first = run()
    assert first["generation"] == 1
    assert first["totals"]["output_records"] == 15 + 12  # the active segments left out

    # Appended, rolled, appended: the new rolled segments are uploaded, nothing else is read.
    broker.append("orders-0", 3)
    broker.roll("orders-0")
    broker.append("orders-0", 1)
    before = object_state(url, options)
    second = run()
    new_segment = broker.segments("orders-0")[-2]
    assert second["generation"] == 2 and second["previous_generation"] == 1
    assert second["transfer"]["files"]["uploaded"] == 1  # the new segment; the checkpoints are the same
    assert second["transfer"]["bytes_uploaded"] == new_segment.stat().st_size
    # Only new files at their own paths (and the run's report elsewhere): readable in place.
    cat = run_kfmt("cat", url, "--format", "json", *opts)
    assert cat.code == 0 and len(cat.lines) == first["totals"]["output_records"] + 5, cat.err
    written = {k for k in object_state(url, options) if k not in before}
    assert {Path(k).name for k in written} == {new_segment.name, "00000002.json",
                                               *[Path(k).name for k in written if "kfmt-report" in k]}

    # Nothing new: nothing is written, no generation.
    before = object_state(url, options)
    result = archive(src, url, *opts)
    assert result.code == 0
    doc = json.loads(result.out)
    assert doc == {"command": "archive", "destination": doc["destination"], "state": "unchanged",
                   "generation": 2, "active_segments": doc["active_segments"], "lost": []}
    assert doc["active_segments"]["left"] == [{"partition": "orders-0", "from": 20, "to": 21, "offsets": 1}]
    assert object_state(url, options) == before

    # Retention deletes the oldest orders segment; the cleaner rewrites users' first two.
    deleted = broker.segments("orders-0")[0].read_bytes()
    broker.delete_oldest("orders-0")
    old_users = broker.segments("users-0")[0].read_bytes()
    broker.clean("users-0", 2)
    assert broker.segments("users-0")[0].read_bytes() != old_users
    third = run()
    assert third["generation"] == 3
    # The cleaned segment only: the archive's log-start-offset-checkpoint stays at 0 (it holds the
    # deleted segment), so it is the object generation 1 has.
    assert third["transfer"]["files"]["uploaded"] == 1
    state = generations[3]
    assert state["orders-0"][1] == 0 and state["orders-0"][0][0][0] == 0  # the deleted segment is kept
    storage, path = open_storage(url, options)
    assert bytes(storage.read(storage.join(path, "orders-0", "00000000000000000000.log"))) == deleted
    # Read in place, the archive would show the old version at users-0's path: readers refuse.
    result = run_kfmt("cat", url, *opts)
    assert result.code == 2 and "kfmt restore" in result.err and "users-0/0" in result.err

    # The active segment, with a torn batch being written: archived up to its last complete batch.
    broker.append("orders-0", 2)
    broker.torn_append("orders-0")
    fourth = run("--include-active", include_active=True)
    assert any("last complete entry" in note for note in fourth["notes"])
    active = broker.segments("orders-0")[-1]
    assert generations[4]["orders-0"][0][-1][0] == broker.next["orders-0"] - 1
    # ... replaced once it has grown and rolled.
    broker.finish_torn("orders-0")
    broker.roll("orders-0")
    broker.append("orders-0", 1)
    run()
    assert read_records(active)[-1][1] == b"torn"
    assert generations[5]["orders-0"][0][-1][1] == b"torn"

    # --prune follows the source's log start: the deleted segment leaves the new generation only.
    sixth = run("--prune", prune=True)
    assert generations[6]["orders-0"][1] == broker.log_start["orders-0"] > 0
    # Nothing but the log-start-offset-checkpoint (now the broker's, byte for byte) is uploaded.
    checkpoint = (broker.root / "log-start-offset-checkpoint").read_bytes()
    assert sixth["transfer"]["bytes_uploaded"] == len(checkpoint)

    # Every generation restores as it was made (and passes kfmt verify), the latest by default.
    for number, state in generations.items():
        assert restored_state(url, tmp_path / f"gen-{number}", number, *opts) == state, number
    listed = run_kfmt("restore", url, "--list-generations", "--format", "json", *opts)
    assert listed.code == 0, listed.err
    rows = [json.loads(line) for line in listed.lines]
    assert [r["generation"] for r in rows] == list(generations) and rows[-1]["latest"]
    result = run_kfmt("restore", url, tmp_path / "none", "--generation", 7, *opts)
    assert result.code == 2 and "no generation 7" in result.err and not (tmp_path / "none").exists()


def test_a_segment_deleted_while_the_run_reads_is_skipped_with_one_warning(url, tmp_path, monkeypatch):
    import kfmt.transforms.archive.read_task as read_task

    broker = Broker(tmp_path / "logs")
    for _ in range(3):
        broker.append("orders-0", 4)
        broker.roll("orders-0")
    broker.append("users-0", 2)
    broker.roll("users-0")
    assert archive(broker.root, url).code == 0  # generation 1 holds orders 0, 4, 8
    broker.append("orders-0", 4)
    broker.roll("orders-0")
    broker.append("orders-0", 4)
    broker.roll("orders-0")
    real = read_task.archive_files
    gone = [broker.segments("orders-0")[-3], broker.segments("orders-0")[0]]  # new (12), archived (0)

    def broker_deletes_first(task):
        for log in gone:
            if any(f.path == str(log) for f in task.files) and log.exists():
                log.unlink()  # between the run's listing and its reading
        return real(task)

    monkeypatch.setattr(read_task, "archive_files", broker_deletes_first)
    os.utime(gone[1], (broker.mtime + 5,) * 2)  # so that the run reads it again (it has changed)
    result = archive(broker.root, url)
    assert result.code == 0, result.err
    warned = [line for line in result.err.splitlines() if "gone before it could be read" in line]
    assert len(warned) == 2 and all(str(g) in "\n".join(warned) for g in gone), result.err
    assert "Traceback" not in result.err
    report = json.loads(result.out)
    [orders] = [p for p in report["outputs"] if p["path"].endswith("orders-0")]
    # Segment 12 never got archived: absent; segment 0 keeps the version generation 1 holds.
    state = restored_state(url, tmp_path / "dst", None)
    offsets = [r[0] for r in state["orders-0"][0]]
    assert offsets == [*range(0, 12), *range(16, 20)] and orders["records"] == 16


KILLER = textwrap.dedent("""
    import os, signal, sys
    import kfmt.transforms.archive.destination as destination
    point, count = sys.argv[1], int(sys.argv[2])
    seen = [0]

    def kill():
        os.kill(os.getpid(), signal.SIGKILL)

    if point == "upload":  # after `count` uploads (object and upload record written)
        put = destination.ArchiveWriter.put
        def counted(self, *args, **kwargs):
            result = put(self, *args, **kwargs)
            seen[0] += 1
            if seen[0] >= count:
                kill()
            return result
        destination.ArchiveWriter.put = counted
    elif point == "pointer":  # the generation's manifest written, the pointer not
        destination.ArchiveDestination._replace = lambda self, name, data: kill()
    elif point == "cleanup":  # the pointer written, the upload records and the claim not removed
        replace = destination.ArchiveDestination._replace
        def then_kill(self, name, data):
            replace(self, name, data)
            kill()
        destination.ArchiveDestination._replace = then_kill
    from kfmt.cli import main
    sys.exit(main(sys.argv[3:]))
""")


def killed(point: str, count: int, *args) -> int:
    proc = subprocess.run([sys.executable, "-c", KILLER, point, str(count), "archive", *map(str, args),
                           "--master", "inprocess", "--no-progress"], capture_output=True, timeout=300)
    return proc.returncode


def s3_or_local(request, tmp_path):
    if request.param == "local":
        return str(tmp_path / "archive"), {}, []
    server = request.getfixturevalue("s3_server")
    url = request.getfixturevalue("s3_url")
    return url, server.storage_options, server.cli_options()


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def durable_url(request, tmp_path):
    return s3_or_local(request, tmp_path)


@pytest.mark.parametrize("point,count", [("upload", 1), ("upload", 3), ("pointer", 0), ("cleanup", 0)])
def test_a_killed_run_leaves_the_previous_generation_and_the_next_run_resumes(durable_url, point, count,
                                                                            tmp_path):
    url, options, opts = durable_url
    broker, expected = Broker(tmp_path / "logs"), Expected()
    for _ in range(3):
        broker.append("orders-0", 4)
        broker.roll("orders-0")
        broker.append("users-0", 3, keys=2)
        broker.roll("users-0")
    assert archive(broker.root, url, *opts).code == 0
    first = expected.run(broker)
    for _ in range(3):
        broker.append("orders-0", 4)
        broker.roll("orders-0")
    broker.delete_oldest("orders-0")
    before = object_state(url, options)

    second = expected.run(broker)  # what generation 2 holds, whichever run publishes it

    assert killed(point, count, broker.root, url, *opts) == -signal.SIGKILL
    published = point == "cleanup"  # killed after the pointer: generation 2 is out
    if not published:  # the previous generation intact: the pointer and every object it lists
        after = object_state(url, options)
        assert {k: v for k, v in after.items() if k in before} == before
    assert restored_state(url, tmp_path / "after-kill", None, *opts) == (second if published else first)

    result = archive(broker.root, url, *opts)
    assert result.code == 0, result.err
    report = json.loads(result.out)
    assert report["generation"] == 2
    if published:
        assert report["state"] == "unchanged"
    else:
        files = report["transfer"]["files"]
        if point == "upload":  # what the killed run uploaded is verified, not uploaded again
            assert files["verified"] == count
        else:  # everything was uploaded before the kill
            assert files["uploaded"] == 0 and files["verified"] >= 3
    assert restored_state(url, tmp_path / "gen-2", 2, *opts) == second
    assert restored_state(url, tmp_path / "gen-1", 1, *opts) == first
    storage, path = open_storage(url, options)
    assert storage.exists(storage.join(path, MANIFEST))


@pytest.mark.s3
def test_nothing_new_uploads_nothing_on_s3(s3_server, s3_url, tmp_path):
    broker = Broker(tmp_path / "logs")
    for _ in range(2):
        broker.append("orders-0", 3)
        broker.roll("orders-0")
    opts = s3_server.cli_options()
    assert archive(broker.root, s3_url, *opts).code == 0
    before = object_state(s3_url, s3_server.storage_options)
    for _ in range(2):
        broker.append("orders-0", 1)  # the active segment grows: not archived by default
        result = archive(broker.root, s3_url, *opts)
        assert result.code == 0 and json.loads(result.out)["state"] == "unchanged", result.err
    assert object_state(s3_url, s3_server.storage_options) == before


@pytest.mark.parametrize("master", ["local-pool[2]", pytest.param("local[1]", marks=pytest.mark.spark)])
def test_generations_on_the_pool_and_spark(master, tmp_path, monkeypatch):
    """Two generations on another engine; in the second, a segment the broker deletes after the run
    listed the directory is read by a worker process: skipped with a warning, not a failed job."""
    import kfmt.transforms.archive.upload as upload

    broker, expected = Broker(tmp_path / "logs"), Expected()
    url = tmp_path / "archive"
    for _ in range(3):
        broker.append("orders-0", 4)
        broker.roll("orders-0")
    plan_archive = upload.plan_archive
    gone: list[Path] = []

    def broker_deletes_after_listing(*args, **kwargs):
        plan = plan_archive(*args, **kwargs)
        if gone:
            gone[0].unlink()
        return plan

    monkeypatch.setattr(upload, "plan_archive", broker_deletes_after_listing)

    def run(number):
        result = run_kfmt("archive", broker.root, url, "--master", master, "--no-progress", "--format", "json")
        assert result.code == 0, result.err
        assert json.loads(result.out)["generation"] == number
        return result

    run(1)
    states = {1: expected.run(broker)}
    for _ in range(2):
        broker.append("orders-0", 4)
        broker.roll("orders-0")
    gone.append(broker.segments("orders-0")[-2])  # the newest rolled segment: deleted, never archived
    result = run(2)
    warned = [line for line in result.err.splitlines() if "gone before it could be read" in line]
    assert len(warned) == 1 and str(gone[0]) in warned[0] and "Traceback" not in result.err
    states[2] = expected.run(broker)  # the broker no longer holds it either
    assert [r[0] for r in states[2]["orders-0"][0]] == list(range(16))
    for number, state in states.items():
        assert restored_state(url, tmp_path / f"gen-{number}", number) == state


def test_an_archive_from_before_generations_is_generation_1_and_gets_a_second(tmp_path):
    """An archive whose manifest has a version-1 archive section (every file at its own path, no
    generation manifests) reads as generation 1; the next run adds generation 2 beside it."""
    broker, expected = Broker(tmp_path / "logs"), Expected()
    for _ in range(2):
        broker.append("orders-0", 3)
        broker.roll("orders-0")
    url = tmp_path / "archive"
    assert archive(broker.root, url).code == 0
    first = expected.run(broker)
    doc = json.loads((url / MANIFEST).read_text())
    section = doc["archive"]
    for key in ("generation", "previous_generation", "options", "files", "objects"):
        del section[key]
    section["version"] = 1
    (url / MANIFEST).write_text(json.dumps(doc))
    (url / "_kfmt_generations" / "00000001.json").unlink()
    (url / "_kfmt_generations").rmdir()
    assert restored_state(url, tmp_path / "old", None) == first

    broker.append("orders-0", 3)
    broker.roll("orders-0")
    result = archive(broker.root, url)
    assert result.code == 0, result.err
    report = json.loads(result.out)
    assert report["generation"] == 2 and report["transfer"]["files"]["uploaded"] == 1
    second = expected.run(broker)
    assert restored_state(url, tmp_path / "gen-1", 1) == first
    assert restored_state(url, tmp_path / "gen-2", 2) == second


def test_a_generation_published_by_another_run_meanwhile_is_not_overwritten(tmp_path, monkeypatch):
    import kfmt.transforms.archive.read_task as read_task

    broker = Broker(tmp_path / "logs")
    for _ in range(2):
        broker.append("orders-0", 3)
        broker.roll("orders-0")
    url = tmp_path / "archive"
    assert archive(broker.root, url).code == 0
    broker.append("orders-0", 3)
    broker.roll("orders-0")
    real = read_task.archive_files
    theirs = {}

    def another_run_publishes(task):
        if not theirs:  # stands in for a run on another host publishing generation 2
            doc = json.loads((url / MANIFEST).read_text())
            doc["archive"]["generation"], doc["run"] = 2, "f" * 32
            theirs["pointer"] = json.dumps(doc)
            (url / MANIFEST).write_text(theirs["pointer"])
        return real(task)

    monkeypatch.setattr(read_task, "archive_files", another_run_publishes)
    result = archive(broker.root, url)
    assert result.code == 2 and "generation 2 was published by another run" in result.err
    assert (url / MANIFEST).read_text() == theirs["pointer"]
    assert not (url / "_kfmt_generations" / "00000002.json").exists()
