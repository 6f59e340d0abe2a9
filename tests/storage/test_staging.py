"""Staged, atomic output (kfmt.storage.staging) and readers honouring manifests (kfmt.storage.manifest, kfmt.partition.layout),
on local disk and memory://; the same against a real S3 server is in test_s3.py.

The kill tests run a real writer in a subprocess, SIGKILL it part-way and check what is left: nothing
a reader takes for output, the source byte-for-byte and mtime-for-mtime unchanged, and a re-run that
succeeds."""
from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
import uuid
from concurrent.futures import ProcessPoolExecutor

import pytest
from support.consumer_truth import consumer_truth, records_of
from support.corpus import REALKAFKA
from support.kafka_dirs import empty_partition
from support.trees import run_writer, tree_state

from kfmt.errors import KfmtError, UsageError
from kfmt.partition.layout import find_partitions
from kfmt.storage.manifest import MANIFEST, PENDING_DIR, check_tree, load_manifest
from kfmt.storage.runs import new_run_id
from kfmt.storage.staging import StagedOutput, StagingTarget
from kfmt.storage.store import open_storage


@pytest.fixture
def source_copy(tmp_path):
    """A private copy of a corpus partition with distinct .log mtimes (the corpus stays untouched)."""
    src = tmp_path / "src" / "v2-none-0"
    shutil.copytree(REALKAFKA / "v2-none-0", src)
    for i, name in enumerate(sorted(os.listdir(src))):
        ns = (1_600_000_000_000 + 60_000 * i) * 1_000_000
        os.utime(src / name, ns=(ns, ns))
    return src


@pytest.fixture(params=["local", "memory"])
def store(request, tmp_path):
    if request.param == "local":
        storage, path = open_storage(str(tmp_path / "out"))
        storage.makedirs(path)
        yield storage, path
        return
    storage, path = open_storage(f"memory:///kfmt-staging/{uuid.uuid4().hex}")
    yield storage, path
    storage.remove_tree(path)


# --- publication ---

def test_nothing_is_visible_before_commit_and_everything_after(store):
    storage, root = store
    dst = storage.join(root, "t-0")
    out = StagedOutput(storage, dst)
    out.write("00000000000000000000.log", b"")
    out.write("partition.metadata", b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ")
    if storage.atomic_rename:
        assert not storage.exists(dst)
    else:
        with pytest.raises(UsageError, match="unfinished kfmt output"):
            find_partitions(storage, dst)
    out.commit()
    [part] = find_partitions(storage, dst)
    assert sorted(part.files) == ["00000000000000000000.log", "partition.metadata"]
    assert part.manifest_problems == []
    assert [i.name for i in storage.listdir(root)] == ["t-0"]  # no staging leftovers


def test_failure_leaves_no_destination_and_no_leftovers(store):
    storage, root = store
    dst = storage.join(root, "t-0")
    with pytest.raises(ZeroDivisionError):
        with StagedOutput(storage, dst) as out:
            out.write("a.log", b"1")
            with out.open("big.log") as stream:
                stream.write(b"2" * 1000)
                1 / 0
    assert storage.walk(root) == []
    assert not storage.exists(dst)


def test_destination_must_not_exist_or_be_empty(store):
    storage, root = store
    dst = storage.join(root, "t-0")
    storage.write(storage.join(dst, "user-file"), b"precious")
    with pytest.raises(UsageError) as err:
        StagedOutput(storage, dst)
    assert err.value.exit_code == 2 and "not empty" in str(err.value) and "t-0" in str(err.value)
    assert bytes(storage.read(storage.join(dst, "user-file"))) == b"precious"
    assert storage.walk(root) == [storage.info(storage.join(dst, "user-file"))]
    file_dst = storage.join(root, "a-file")
    storage.write(file_dst, b"x")
    with pytest.raises(UsageError, match="not a directory"):
        StagedOutput(storage, file_dst)


def test_an_empty_destination_directory_is_accepted(store):
    storage, root = store
    dst = storage.join(root, "empty")
    storage.makedirs(dst)
    with StagedOutput(storage, dst) as out:
        out.write("f", b"data")
    assert bytes(storage.read(storage.join(dst, "f"))) == b"data"


def test_a_second_run_into_the_same_destination_refuses(store):
    storage, root = store
    dst = storage.join(root, "t-0")
    with StagedOutput(storage, dst) as out:
        out.write("f", b"first")
    with pytest.raises(UsageError) as err:
        StagedOutput(storage, dst)
    assert err.value.exit_code == 2
    assert bytes(storage.read(storage.join(dst, "f"))) == b"first"


def test_a_concurrent_run_refuses_while_the_first_is_alive(store):
    storage, root = store
    dst = storage.join(root, "t-0")
    first = StagedOutput(storage, dst)
    first.write("f", b"first")
    with pytest.raises(UsageError, match=f"another kfmt run \\(pid {os.getpid()}"):
        StagedOutput(storage, dst)
    first.commit()
    assert bytes(storage.read(storage.join(dst, "f"))) == b"first"
    assert [i.name for i in storage.listdir(root)] == ["t-0"]


def test_local_publication_refuses_a_destination_that_appeared_meanwhile(tmp_path):
    storage, root = open_storage(str(tmp_path))
    dst = storage.join(root, "t-0")
    out = StagedOutput(storage, dst)
    out.write("f", b"mine")
    storage.write(storage.join(dst, "theirs"), b"someone else's")
    with pytest.raises(UsageError, match="created by someone else"):
        out.commit()
    assert os.listdir(dst) == ["theirs"]
    assert sorted(os.listdir(root)) == ["t-0"]


def test_leftovers_of_a_dead_run_are_removed_by_the_next_run(store):
    storage, root = store
    dst = storage.join(root, "t-0")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    out = StagedOutput(storage, dst)
    out.write("00000000000000000007.log", b"half")  # named as Kafka names segments: a partition
    owner = dict(out._owner, pid=int(dead))  # as if that (now dead) process had started the run
    if storage.atomic_rename:
        storage.write(storage.join(out.root, "_kfmt_staging.json"), json.dumps(owner).encode())
    else:
        storage.write(out._claim, json.dumps(owner).encode())
    with StagedOutput(storage, dst) as again:
        again.write("00000000000000000000.log", b"whole")
    [part] = find_partitions(storage, dst)
    assert sorted(part.files) == ["00000000000000000000.log"]
    assert [i.name for i in storage.listdir(root)] == ["t-0"]
    segment = storage.join(dst, "00000000000000000000.log")
    assert sorted(f.path for f in storage.walk(root)) == sorted([segment] + (
        [] if storage.atomic_rename else [storage.join(dst, MANIFEST)]))


def test_a_run_on_another_machine_is_never_taken_for_dead(tmp_path):
    storage, root = open_storage("memory:///kfmt-staging/" + uuid.uuid4().hex)
    dst = storage.join(root, "t-0")
    storage.write(storage.join(dst, PENDING_DIR, new_run_id() + ".json"),
                  json.dumps({"pid": 1, "host": "elsewhere.example", "started_ms": 0}).encode())
    with pytest.raises(UsageError, match="on elsewhere.example"):
        StagedOutput(storage, dst)
    storage.remove_tree(root)


def test_commit_refuses_open_streams_and_unrecorded_files(store):
    storage, root = store
    out = StagedOutput(storage, storage.join(root, "a"))
    stream = out.open("seg.log")
    stream.write(b"123")
    with pytest.raises(KfmtError, match="still being written: seg.log"):
        out.commit()
    out = StagedOutput(storage, storage.join(root, "b"))
    out.write("known", b"k")
    storage.write(out.path("unknown"), b"u")  # bypasses the record
    with pytest.raises(KfmtError, match="differ from what was recorded.*unknown"):
        out.commit()
    assert storage.walk(root) == []


def test_relative_paths_stay_inside_and_off_reserved_names(store):
    storage, root = store
    with StagedOutput(storage, storage.join(root, "o")) as out:
        for bad in ["../escape", "/abs", "a//b", "a/./b", "", MANIFEST, f"{PENDING_DIR}/x", "x\\y"]:
            with pytest.raises(UsageError):
                out.write(bad, b"no")
        out.write("ok/nested/file", b"yes")
    assert [f.path for f in storage.walk(storage.join(root, "o")) if not f.name.startswith("_")] == [
        storage.join(root, "o", "ok", "nested", "file")]


def test_mtimes_come_back_locally_and_through_the_manifest(store):
    storage, root = store
    dst = storage.join(root, "t-0")
    with StagedOutput(storage, dst) as out:
        out.write("00000000000000000000.log", b"a", mtime_ms=1_111_111_111_111)
        with out.open("00000000000000000001.log", mtime_ms=1_222_222_222_222) as stream:
            stream.write(b"b")
        out.write("00000000000000000002.log", b"c")
        out.set_mtime("00000000000000000002.log", 1_333_333_333_333)
    [part] = find_partitions(storage, dst)
    assert [s.log.mtime_ms for s in part.segments] == [1_111_111_111_111, 1_222_222_222_222,
                                                        1_333_333_333_333]
    if not storage.atomic_rename:
        assert {rel: r.mtime_ms for rel, r in load_manifest(storage, dst).files.items()} == {
            "00000000000000000000.log": 1_111_111_111_111, "00000000000000000001.log": 1_222_222_222_222,
            "00000000000000000002.log": 1_333_333_333_333}


def _write_from_worker(target: StagingTarget, rel: str, payload: bytes):
    files = target.files()
    with files.open(rel) as stream:
        stream.write(payload)
    return files.records[rel]


def test_parallel_workers_write_through_a_picklable_target(tmp_path):
    storage, root = open_storage(str(tmp_path / "par"))
    with StagedOutput(storage, root) as out:
        target = pickle.loads(pickle.dumps(out.target()))
        with ProcessPoolExecutor(2) as pool:
            records = list(pool.map(_write_from_worker, [target] * 3, ["p-0/a", "p-0/b", "p-1/c"],
                                    [b"A" * 10, b"B" * 20, b"C" * 30]))
        out.adopt(records)
    assert {os.path.relpath(f.path, root): f.size for f in storage.walk(root)} == {
        "p-0/a": 10, "p-0/b": 20, "p-1/c": 30}


# --- readers honour the manifest ---

def _published_log_dir(storage, root):
    dst = storage.join(root, "logdir")
    with StagedOutput(storage, dst) as out:
        for p in ("t-0", "t-1"):
            out.write(f"{p}/00000000000000000000.log", b"")
            out.write(f"{p}/00000000000000000000.index", b"")
    return dst


def test_layout_lists_only_what_the_manifest_names_and_reports_the_rest():
    storage, root = open_storage(f"memory:///kfmt-manifest/{uuid.uuid4().hex}")
    dst = _published_log_dir(storage, root)
    storage.write(storage.join(dst, "t-0", "00000000000000000099.log"), b"stray")  # not published
    storage.write(storage.join(dst, "t-0", "00000000000000000000.index"), b"12345678")  # changed
    storage.remove(storage.join(dst, "t-1", "00000000000000000000.index"))  # lost
    storage.write(storage.join(dst, "t-9", "00000000000000000000.log"), b"")  # a whole stray partition
    parts = {p.name: p for p in find_partitions(storage, dst)}
    assert sorted(parts) == ["t-0", "t-1"]
    assert [s.base_offset for s in parts["t-0"].segments] == [0]
    assert parts["t-0"].segments[0].index is None
    assert parts["t-0"].manifest_problems == [
        f"00000000000000000000.index: 8 bytes, but {MANIFEST} lists 0 (ignored)",
        f"00000000000000000099.log: not listed in {MANIFEST} (ignored)"]
    assert parts["t-1"].manifest_problems == [f"00000000000000000000.index: listed in {MANIFEST} but missing"]
    # read one partition at a time, the parent's manifest still governs
    [t0] = find_partitions(storage, storage.join(dst, "t-0"))
    assert t0.manifest_problems == parts["t-0"].manifest_problems
    assert check_tree(storage, load_manifest(storage, dst)) == [
        f"t-0/00000000000000000000.index: 8 bytes, but {MANIFEST} lists 0 (ignored)",
        f"t-0/00000000000000000099.log: not listed in {MANIFEST} (ignored)",
        f"t-1/00000000000000000000.index: listed in {MANIFEST} but missing",
        f"t-9/00000000000000000000.log: not listed in {MANIFEST} (ignored)"]
    storage.remove_tree(root)


def test_a_partition_listed_by_the_manifest_but_gone_is_reported():
    storage, root = open_storage(f"memory:///kfmt-manifest/{uuid.uuid4().hex}")
    dst = _published_log_dir(storage, root)
    storage.remove_tree(storage.join(dst, "t-1"))
    parts = {p.name: p for p in find_partitions(storage, dst)}
    assert parts["t-1"].segments == []
    assert parts["t-1"].manifest_problems == [
        f"00000000000000000000.index: listed in {MANIFEST} but missing",
        f"00000000000000000000.log: listed in {MANIFEST} but missing"]
    storage.remove_tree(root)


def test_an_unreadable_manifest_is_bad_data_naming_the_file():
    storage, root = open_storage(f"memory:///kfmt-manifest/{uuid.uuid4().hex}")
    dst = _published_log_dir(storage, root)
    storage.write(storage.join(dst, MANIFEST), b"{not json")
    with pytest.raises(KfmtError) as err:
        find_partitions(storage, dst)
    assert err.value.exit_code == 65 and MANIFEST in str(err.value)
    storage.remove_tree(root)


# --- killed runs (local disk; S3 in test_s3.py) ---

def test_a_killed_run_leaves_no_output_and_the_source_untouched_and_a_rerun_succeeds(tmp_path, source_copy):
    before = tree_state(source_copy.parent)
    logdir = tmp_path / "logs"
    logdir.mkdir()
    empty_partition(logdir / "other-0")  # a partition already there, beside the destination
    dst = logdir / "v2-none-0"
    run_writer(str(source_copy), str(dst), pause_after=40, kill=True)
    assert not dst.exists()
    leftovers = [n for n in os.listdir(logdir) if n != "other-0"]
    assert len(leftovers) == 1 and leftovers[0].startswith("v2-none-0.") and leftovers[0].endswith("-delete")
    assert any(n.endswith(".log") for n in os.listdir(logdir / leftovers[0]))  # it was mid-write
    storage, path = open_storage(str(logdir))
    assert [p.name for p in find_partitions(storage, path)] == ["other-0"]
    assert tree_state(source_copy.parent) == before

    done = run_writer(str(source_copy), str(dst))
    assert done.returncode == 0 and done.stdout.strip() == "DONE", done.stderr
    assert sorted(os.listdir(logdir)) == ["other-0", "v2-none-0"]  # the leftover is gone
    [part] = find_partitions(storage, str(dst))
    assert records_of(part) == consumer_truth("v2-none-0")
    assert {s.base_offset: s.log.mtime_ms for s in part.segments} == {
        int(n[:20]): os.stat(source_copy / n).st_mtime_ns // 1_000_000
        for n in os.listdir(source_copy) if n.endswith(".log")}
    assert tree_state(source_copy.parent) == before

    again = run_writer(str(source_copy), str(dst))
    assert again.returncode == 2
    assert again.stderr == f"kfmt: error: {dst}: the destination exists and is not empty\n"
