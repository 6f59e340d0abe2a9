"""kfmt archive / kfmt restore (docs/archive.md): the whole corpus as one log directory through a real
S3 server (SeaweedFS) and back, checked against what the Java consumer read, against the broker's
own rebuilt companion files and against kfmt reindex; an archive SIGKILLed half-way and resumed with
damaged objects; damaged archives refused on restore; memory:// and local URLs for the fast cases;
--dry-run; one run on Spark."""
from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from support.cli import run_kfmt
from support.consumer_truth import consumer_truth, records_of
from support.corpus import REAL_DIRS, REALKAFKA
from support.log_dirs import make_log_dir
from support.reindex_truth import companions, entries_truth, index_interval, rebuild_now_ms, truth_digest

from kfmt.partition.layout import find_partitions
from kfmt.storage.manifest import MANIFEST, PENDING_DIR, load_manifest
from kfmt.storage.store import open_storage
from kfmt.transforms.archive.archive_format import STATE_DIR, UPLOADS_DIR
from kfmt.transforms.report import REPORT_NAME

# Topics whose index.interval.bytes is not the default (topic-configs.txt): restored apart.
SMALL_INTERVAL = "v[012]-none"
NOW = rebuild_now_ms("txn-v2-none-0") if REAL_DIRS else 0  # reproduces every rebuild (test_reindex)


@pytest.fixture(scope="module")
def corpus_log_dir(tmp_path_factory) -> Path:
    """Every corpus partition in one log directory (read only by the tests that share it)."""
    return make_log_dir(tmp_path_factory.mktemp("corpus") / "kafka-logs", REAL_DIRS)


@pytest.fixture(scope="module")
def corpus_reindexed(corpus_log_dir, tmp_path_factory) -> Path:
    """kfmt reindex of the corpus log directory with the same options as the restores below."""
    out = tmp_path_factory.mktemp("reindexed") / "out"
    result = run_kfmt("reindex", corpus_log_dir, out, "--now", NOW, "--no-progress")
    assert result.code == 0, result.err
    return out


def archive(src, url, *args):
    """An archive of a stopped broker's directory: every segment, the last (active) one included."""
    return run_kfmt("archive", src, url, "--master", "inprocess", "--no-progress", "--include-active", *args)


def restore(url, dst, *args):
    return run_kfmt("restore", url, dst, "--master", "inprocess", "--no-progress", "--now", NOW, *args)


def log_files(root: Path) -> dict[str, tuple[str, int]]:
    """relative path -> (SHA-256, mtime in ms) of every .log below a directory."""
    return {str(p.relative_to(root)): (hashlib.sha256(p.read_bytes()).hexdigest(),
                                       p.stat().st_mtime_ns // 1_000_000)
            for p in sorted(root.rglob("*.log"))}


def assert_restored_equals_source(restored: Path, source: Path, reindexed: Path, names) -> None:
    """Records as the Java consumer read them, .log bytes and mtimes as in SRC, companion files as
    kfmt reindex builds them, the other files as SRC's (checkpoints as reindex keeps them)."""
    assert log_files(restored) == log_files(source)
    for name in names:
        [part] = find_partitions(*open_storage(str(restored / name)))
        assert records_of(part) == consumer_truth(name), name
        assert companions(restored / name) == companions(reindexed / name), name
        assert (restored / name / "partition.metadata").read_bytes() == \
            (source / name / "partition.metadata").read_bytes()
    for f in ["meta.properties", "recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
              "replication-offset-checkpoint", "cleaner-offset-checkpoint"]:
        assert (restored / f).read_bytes() == (reindexed / f).read_bytes(), f
    assert not (restored / MANIFEST).exists() and not (restored / PENDING_DIR).exists()


def truth_facts(name: str) -> dict:
    """What the archive section must say of a partition, from the broker's and consumer's truth."""
    rows = consumer_truth(name)
    stamps = [r[1] for r in rows if r[1] >= 0]
    offsets = (REALKAFKA / f"{name}.truth" / "offsets.txt").read_text().split()
    records, digest = truth_digest(name)
    return {"records": records, "content_digest": digest, "first_offset": rows[0][0],
            "next_offset": int(offsets[-1].rsplit(":", 1)[1]),
            "min_timestamp": min(stamps, default=None), "max_timestamp": max(stamps, default=None),
            "segments": len(list((REALKAFKA / name).glob("*.log")))}


# --- the whole corpus through S3 ---

@pytest.mark.s3
def test_the_corpus_through_s3_and_back(s3_server, s3_url, corpus_log_dir, corpus_reindexed, tmp_path):
    opts = s3_server.cli_options()
    result = archive(corpus_log_dir, s3_url, "--format", "json", "--deep", *opts)
    assert result.code == 0, result.err
    report = json.loads(result.out)
    assert report["transfer"]["files"]["uploaded"] == len(report["files"])
    storage, path = open_storage(s3_url, s3_server.storage_options)
    manifest = load_manifest(storage, path)
    # What the archive holds: segments and the files recovery cannot derive, nothing else.
    stored = {rel for rel in manifest.files if rel != REPORT_NAME}
    expected = {str(p.relative_to(corpus_log_dir)) for p in corpus_log_dir.rglob("*")
                if p.suffix == ".log" or p.name in ("partition.metadata", "leader-epoch-checkpoint")}
    expected |= {p.name for p in (REALKAFKA / "_logdir-root").iterdir()}
    assert stored == expected
    # Its section describes every partition as the broker and the Java consumer saw it.
    section = {p["dir"]: p for p in manifest.sections["archive"]["partitions"]}
    assert sorted(section) == REAL_DIRS
    for name in REAL_DIRS:
        facts = truth_facts(name)
        assert {k: section[name][k] for k in facts} == facts, name
    for rel in stored:  # sizes, checksums and mtimes of what was archived are SRC's
        src = corpus_log_dir / rel
        if rel.endswith("-checkpoint") and "/" not in rel:
            continue  # offset checkpoints keep only the archived partitions' lines
        assert manifest.files[rel].sha256 == hashlib.sha256(src.read_bytes()).hexdigest()
        assert manifest.files[rel].mtime_ms == src.stat().st_mtime_ns // 1_000_000

    dst = tmp_path / "restored"
    result = restore(s3_url, dst, "--format", "json", *opts)
    assert result.code == 0, result.err
    assert_restored_equals_source(dst, corpus_log_dir, corpus_reindexed, REAL_DIRS)
    restored_report = json.loads((dst / REPORT_NAME).read_text())
    assert restored_report == json.loads(result.out)
    for before, after in zip(restored_report["inputs"], restored_report["outputs"]):
        name = after["path"].rsplit("/", 1)[1]
        assert before["content_digest"] == after["content_digest"] == truth_digest(name)[1]
    assert restored_report["totals"]["content_unchanged"] is True
    # The broker's own rebuild (default index.interval.bytes) ...
    for name in REAL_DIRS:
        rebuilt = REALKAFKA / f"{name}.truth" / "rebuilt"
        if rebuilt.is_dir() and index_interval(name) == 4096:
            assert companions(dst / name) == companions(rebuilt), name
    # ... and, restored apart with their own interval, the topics that had another one.
    small = tmp_path / "small"
    result = restore(s3_url, small, "--topic", SMALL_INTERVAL, "--index-interval-bytes", 1024, *opts)
    assert result.code == 0, result.err
    assert sorted(p.name for p in small.iterdir() if p.is_dir()) == ["v0-none-0", "v1-none-0", "v2-none-0"]
    for name in ["v0-none-0", "v1-none-0", "v2-none-0"]:
        assert companions(small / name) == companions(REALKAFKA / f"{name}.truth" / "rebuilt"), name


def test_the_corpus_archived_and_restored_with_the_check_of_a_copy(corpus_log_dir, corpus_reindexed, tmp_path):
    """The default check (kfmt.format.copied_runs): the section holds the entries kafka-dump-log
    lists, digested by their bytes, the records their headers count and the wrappers apart; a restore
    checks the same and gives the same directory as one of a --deep archive, and with --deep the
    records as the Java consumer read them."""
    url = tmp_path / "archive"
    result = archive(corpus_log_dir, url)
    assert result.code == 0, result.err
    section = {p["dir"]: p for p in load_manifest(*open_storage(str(url))).sections["archive"]["partitions"]}
    for name in REAL_DIRS:
        records, wrappers, digest = entries_truth(name)
        assert (section[name]["records"], section[name]["uncounted_wrappers"], section[name]["entries_digest"],
                section[name]["content_digest"], section[name]["min_timestamp"]) == (records, wrappers, digest,
                                                                                      None, None), name
    dst = tmp_path / "restored"
    result = restore(url, dst, "--format", "json")
    assert result.code == 0, result.err
    assert_restored_equals_source(dst, corpus_log_dir, corpus_reindexed, REAL_DIRS)
    report = json.loads(result.out)
    assert report["totals"]["content_unchanged"] is True
    assert [p["entries_digest"] for p in report["inputs"]] == [entries_truth(p["path"].rsplit("/", 1)[1])[2]
                                                               for p in report["outputs"]]
    deep = restore(url, tmp_path / "deep", "--deep", "--format", "json")
    assert deep.code == 0, deep.err
    assert [p["content_digest"] for p in json.loads(deep.out)["outputs"]] == \
        [truth_digest(p["path"].rsplit("/", 1)[1])[1] for p in json.loads(deep.out)["outputs"]]


KILL_AFTER_UPLOADS = 60


@pytest.mark.s3
def test_an_archive_killed_half_way_resumes_and_uploads_again_what_was_damaged(
        s3_server, s3_url, corpus_log_dir, corpus_reindexed, tmp_path):
    storage, path = open_storage(s3_url, s3_server.storage_options)
    uploads = storage.join(path, PENDING_DIR, STATE_DIR, UPLOADS_DIR)
    args = [sys.executable, "-m", "kfmt", "archive", str(corpus_log_dir), s3_url, "--master",
            "inprocess", "--no-progress", "--include-active", *s3_server.cli_options()]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            if storage.isdir(uploads) and len(storage.walk(uploads)) >= KILL_AFTER_UPLOADS:
                os.kill(proc.pid, signal.SIGKILL)
                break
            time.sleep(0.05)
    finally:
        if proc.poll() is None and time.monotonic() >= deadline:
            proc.kill()
        proc.wait(timeout=60)
        err = proc.stderr.read().decode()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL, f"the archive was not killed half-way: {err}"
    assert not storage.exists(storage.join(path, MANIFEST))

    # Readers and restore refuse the unfinished archive.
    opts = s3_server.cli_options()
    result = run_kfmt("cat", s3_url, "--max-records", "1", *opts)
    assert result.code == 2 and "unfinished" in result.err
    result = restore(s3_url, tmp_path / "early", *opts)
    assert result.code == 2 and "unfinished archive" in result.err and "kfmt archive" in result.err
    assert not (tmp_path / "early").exists()

    # Damage three uploaded segments: one truncated, one deleted, one with a byte changed.
    recorded = sorted(f.path[len(uploads) + 1:-len(".json")] for f in storage.walk(uploads))
    assert KILL_AFTER_UPLOADS <= len(recorded) < len(log_files(corpus_log_dir))
    segments = [rel for rel in recorded if rel.endswith(".log")]
    truncated, deleted, changed = segments[1], segments[len(segments) // 2], segments[-1]
    obj = lambda rel: storage.join(path, rel)  # noqa: E731
    storage.write(obj(truncated), bytes(storage.read(obj(truncated)))[:-100])
    storage.remove(obj(deleted))
    data = bytearray(storage.read(obj(changed)))
    data[len(data) // 2] ^= 0x01
    storage.write(obj(changed), bytes(data))
    damaged = {truncated, deleted, changed}
    intact = {rel: storage.info(obj(rel)).mtime_ms for rel in recorded if rel not in damaged}
    time.sleep(1.1)  # S3 modification times have whole seconds: a rewrite would show

    result = archive(corpus_log_dir, s3_url, "--format", "json", *opts)
    assert result.code == 0, result.err
    transfer = json.loads(result.out)["transfer"]
    assert transfer["files"]["verified"] == len(intact)
    assert transfer["reuploaded"] == sorted(damaged)
    assert {rel: storage.info(obj(rel)).mtime_ms for rel in intact} == intact  # not uploaded again
    assert not storage.exists(storage.join(path, PENDING_DIR, STATE_DIR, "plan.json"))

    dst = tmp_path / "restored"
    result = restore(s3_url, dst, *opts)
    assert result.code == 0, result.err
    assert_restored_equals_source(dst, corpus_log_dir, corpus_reindexed, REAL_DIRS)


@pytest.mark.s3
def test_a_damaged_object_on_s3_fails_the_restore_and_publishes_nothing(s3_server, s3_url, tmp_path):
    src = make_log_dir(tmp_path / "logs", ["v1-gzip-0"])
    opts = s3_server.cli_options()
    assert archive(src, s3_url, *opts).code == 0
    storage, path = open_storage(s3_url, s3_server.storage_options)
    rel = "v1-gzip-0/00000000000000000000.log"
    data = bytearray(storage.read(storage.join(path, rel)))
    data[100] ^= 0x10
    storage.write(storage.join(path, rel), bytes(data))
    result = restore(s3_url, tmp_path / "dst", *opts)
    assert result.code == 65
    assert f"{s3_url}/{rel}" in result.err and "SHA-256" in result.err and "damaged" in result.err
    assert not (tmp_path / "dst").exists() and os.listdir(tmp_path) == ["logs"]


# --- fast cases: memory:// and local URLs ---

@pytest.fixture(params=["local", "memory"])
def archive_url(request, tmp_path):
    if request.param == "local":
        yield str(tmp_path / "archive")
        return
    url = f"memory:///kfmt-archive-test/{uuid.uuid4().hex}"
    yield url
    storage, path = open_storage(url)
    storage.remove_tree(path)


def object_state(url: str) -> dict:
    storage, path = open_storage(url)
    if not storage.exists(path):
        return {}
    return {f.path: hashlib.sha256(bytes(storage.read(f.path))).hexdigest() for f in storage.walk(path)}


def test_a_partition_directory_round_trips(archive_url, tmp_path, realkafka):
    src = make_log_dir(tmp_path / "logs", ["txn-v2-none-0"]) / "txn-v2-none-0"
    assert archive(src, archive_url).code == 0
    dst = tmp_path / "dst"
    result = restore(archive_url, dst)
    assert result.code == 0, result.err
    assert log_files(dst) == log_files(src)
    assert companions(dst) == companions(realkafka / "txn-v2-none-0.truth" / "rebuilt")
    [part] = find_partitions(*open_storage(str(dst)))
    assert records_of(part) == consumer_truth("txn-v2-none-0")
    # kfmt reads the archive itself through its manifest, the mtimes included.
    [archived] = find_partitions(*open_storage(archive_url))
    assert {s.log.name: s.log.mtime_ms for s in archived.segments} == \
        {name: mtime for name, (_sha, mtime) in log_files(src).items()}


def test_a_rerun_with_nothing_new_writes_nothing_and_a_new_mtime_is_a_new_generation(archive_url, tmp_path):
    src = make_log_dir(tmp_path / "logs", ["v2-gzip-0", "v0-lz4-0"])
    assert archive(src, archive_url).code == 0
    before = object_state(archive_url)
    result = archive(src, archive_url)
    assert result.code == 0 and "nothing new since generation 1" in result.out
    assert object_state(archive_url) == before
    result = restore(f"{archive_url}/v2-gzip-0", tmp_path / "dst")
    assert result.code == 2 and "with --topic/--partition" in result.err
    log = src / "v2-gzip-0" / "00000000000000000000.log"
    os.utime(log, ns=(10**18, 10**18))  # same bytes, another modification time: recorded, not uploaded
    result = archive(src, archive_url, "--format", "json")
    assert result.code == 0, result.err
    report = json.loads(result.out)
    assert report["generation"] == 2 and report["transfer"]["files"]["archived"] == 1
    assert report["transfer"]["files"]["uploaded"] == 0
    assert report["transfer"]["bytes_uploaded"] == 0
    storage, path = open_storage(archive_url)
    assert load_manifest(storage, path).files["v2-gzip-0/00000000000000000000.log"].mtime_ms == 10**12
    # A run over fewer partitions keeps the others as the archive has them.
    result = archive(src, archive_url, "--topic", "v2-*", "--format", "json")
    assert result.code == 0 and json.loads(result.out)["state"] == "unchanged"


def test_a_failed_archive_publishes_nothing_and_the_next_run_resumes(archive_url, tmp_path):
    src = make_log_dir(tmp_path / "logs", ["v2-none-0", "compact-v1-gzip-0"])
    bad = src / "v2-none-0" / "00000000000000000097.log"
    good = bad.read_bytes()
    damaged = bytearray(good)
    damaged[200] ^= 0xFF
    bad.write_bytes(damaged)
    os.utime(bad, ns=(1_650_000_000_000_000_000,) * 2)
    result = archive(src, archive_url)
    assert result.code == 65 and str(bad) in result.err
    # Nothing is published: readers and restore refuse.
    assert run_kfmt("cat", archive_url).code == 2
    result = restore(archive_url, tmp_path / "dst")
    assert result.code == 2 and "unfinished archive" in result.err
    # A file whose content changed since the failed run uploaded it is uploaded again.
    metadata = src / "compact-v1-gzip-0" / "partition.metadata"
    original = metadata.read_bytes()
    metadata.write_bytes(original[:-1] + (b"A" if original[-1:] != b"A" else b"B"))
    bad.write_bytes(good)
    # Fixed: the re-run verifies every file uploaded before and uploads the rest: the segment that
    # failed, the changed file and the log-directory files (put once every partition is archived).
    result = archive(src, archive_url, "--format", "json")
    assert result.code == 0, result.err
    report = json.loads(result.out)
    log_dir_files = [rel for rel in report["files"] if "/" not in rel]
    assert len(log_dir_files) == 5
    assert report["transfer"]["files"]["uploaded"] == 1 + 1 + 5
    assert report["transfer"]["files"]["verified"] == len(report["files"]) - 7
    assert report["totals"]["content_unchanged"] is True
    dst = tmp_path / "dst"
    result = restore(archive_url, dst)
    assert result.code == 0, result.err
    assert log_files(dst) == log_files(src)
    assert (dst / "compact-v1-gzip-0" / "partition.metadata").read_bytes() == metadata.read_bytes()
    for name in ["v2-none-0", "compact-v1-gzip-0"]:
        [part] = find_partitions(*open_storage(str(dst / name)))
        assert records_of(part) == consumer_truth(name)


def test_damaged_archives_fail_the_restore_and_publish_nothing(archive_url, tmp_path):
    src = make_log_dir(tmp_path / "logs", ["v2-lz4-0"])
    assert archive(src, archive_url).code == 0
    storage, path = open_storage(archive_url)
    seg = storage.join(path, "v2-lz4-0", "00000000000000000000.log")
    original = bytes(storage.read(seg))
    cases = {"SHA-256": original[:50] + bytes([original[50] ^ 1]) + original[51:],
             "lists": original[:-1], "missing": None}
    for words, content in cases.items():
        if content is None:
            storage.remove(seg)
        else:
            storage.write(seg, content)
        result = restore(archive_url, tmp_path / "dst")
        assert result.code == 65, result.err
        assert words in result.err and "00000000000000000000.log" in result.err
        assert not (tmp_path / "dst").exists()
        assert sorted(os.listdir(tmp_path)) == (["archive", "logs"] if "://" not in archive_url
                                                else ["logs"])
    # A damaged leader-epoch-checkpoint (read whole, like every file) is caught as well.
    storage.write(seg, original)
    epochs = storage.join(path, "v2-lz4-0", "leader-epoch-checkpoint")
    storage.write(epochs, bytes(storage.read(epochs)).replace(b"0 0", b"1 0"))
    result = restore(archive_url, tmp_path / "dst")
    assert result.code == 65 and "leader-epoch-checkpoint" in result.err and "SHA-256" in result.err


def test_an_archive_of_another_digest_definition_is_refused(archive_url, tmp_path):
    src = make_log_dir(tmp_path / "logs", ["v2-none-0"])
    assert archive(src, archive_url).code == 0
    storage, path = open_storage(archive_url)
    manifest = storage.join(path, MANIFEST)
    doc = json.loads(bytes(storage.read(manifest)))
    doc["archive"]["content_digest_version"] = 3
    storage.write(manifest, json.dumps(doc).encode())
    result = restore(archive_url, tmp_path / "dst")
    assert result.code == 65, result.err
    assert "content digest version 3" in result.err and len(result.err.strip().splitlines()) == 1
    assert not (tmp_path / "dst").exists()

def test_dry_runs_write_nothing(archive_url, tmp_path):
    src = make_log_dir(tmp_path / "logs", ["v1-snappy-0", "v2-zstd-0"])
    result = archive(src, archive_url, "--dry-run")
    assert result.code == 0, result.err
    assert "a new archive" in result.out and "v2-zstd-0 -> v2-zstd-0/: 11 segment(s)" in result.out
    assert "not stored: 11 .index, 11 .snapshot, 11 .timeindex" in result.out
    assert object_state(archive_url) == {}
    assert archive(src, archive_url).code == 0
    before = object_state(archive_url)
    result = run_kfmt("restore", archive_url, tmp_path / "dst", "--dry-run", "--format", "json")
    assert result.code == 0, result.err
    plan = json.loads(result.out)
    assert [p["name"] for p in plan["partitions"]] == ["v1-snappy-0", "v2-zstd-0"]
    assert not (tmp_path / "dst").exists() and object_state(archive_url) == before
    result = archive(src, archive_url, "--dry-run")
    assert result.code == 0 and "0 file(s), 0 bytes to read" in result.out


def test_what_is_not_a_published_archive_is_refused(archive_url, tmp_path, realkafka):
    dst = tmp_path / "dst"
    result = restore(archive_url, dst)
    assert result.code == 2 and "no such archive" in result.err
    result = run_kfmt("reindex", realkafka / "v2-snappy-0", archive_url, "--no-progress")
    assert result.code == 0, result.err
    if "://" in archive_url:  # on object storage a reindex output has a manifest, but no archive section
        result = restore(archive_url, dst)
        assert result.code == 2 and "not an archive" in result.err
        result = archive(realkafka / "v2-snappy-0", archive_url)
        assert result.code == 2 and "not an archive" in result.err
    else:
        result = restore(archive_url, dst)
        assert result.code == 2 and "not a kfmt archive" in result.err
    assert not dst.exists()


def test_a_live_archive_run_is_not_disturbed(archive_url, tmp_path):
    from kfmt.transforms.archive.destination import ArchiveDestination

    src = make_log_dir(tmp_path / "logs", ["v0-gzip-0"])
    storage, path = open_storage(archive_url)
    running = ArchiveDestination(storage, path)
    running.start()  # this process's claim: alive
    result = archive(src, archive_url)
    assert result.code == 2 and "another kfmt run" in result.err
    result = restore(archive_url, tmp_path / "dst")
    assert result.code == 2 and "unfinished archive" in result.err
    running.stop()  # stopped: it no longer blocks
    result = archive(src, archive_url)
    assert result.code == 0, result.err
    assert not storage.exists(storage.join(path, PENDING_DIR))


# --- Spark ---

@pytest.mark.spark
def test_archive_and_restore_on_spark(tmp_path, realkafka):
    src = make_log_dir(tmp_path / "logs", ["txn-v2-none-0", "compact-v2-none-0", "v1-lz4-0"])
    url = tmp_path / "archive"
    result = run_kfmt("archive", src, url, "--no-progress", "--include-active")
    assert result.code == 0, result.err
    dst = tmp_path / "dst"
    result = run_kfmt("restore", url, dst, "--no-progress", "--now", NOW)
    assert result.code == 0, result.err
    assert log_files(dst) == log_files(src)
    for name in ["txn-v2-none-0", "compact-v2-none-0", "v1-lz4-0"]:
        assert companions(dst / name) == companions(realkafka / f"{name}.truth" / "rebuilt"), name
