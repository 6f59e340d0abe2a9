"""fsspec storage: `kfmt cat` and `kfmt info` on memory:// copies of the corpus give exactly what they
give on the local originals (partition directories and a log directory), seeks included, and bad
data is reported against the memory:// URL.

memory:// is process-global, so the CLI runs in this process (run_kfmt).
"""
from __future__ import annotations

import json
import shutil
import struct
import uuid

import fsspec
import pytest
from support.cli import run_kfmt
from support.corpus import REAL_DIRS, REALKAFKA
from support.corpus_truth import consumer_records, kafka_listing

LOGDIR_PARTITIONS = ["v2-none-0", "v1-gzip-0", "txn-v2-none-0", "compact-v2-none-0"]


def upload(fs, local, remote: str) -> None:
    for p in local.iterdir():
        if p.is_file():
            fs.pipe_file(f"{remote}/{p.name}", p.read_bytes())


@pytest.fixture(scope="module")
def memory_root():
    """memory://<unique>/ holding every corpus partition, and a log directory `logdir/`."""
    fs = fsspec.filesystem("memory")
    root = f"/kfmt-{uuid.uuid4().hex[:8]}"
    for name in REAL_DIRS:
        upload(fs, REALKAFKA / name, f"{root}/{name}")
    for name in LOGDIR_PARTITIONS:
        upload(fs, REALKAFKA / name, f"{root}/logdir/{name}")
    upload(fs, REALKAFKA / "_logdir-root", f"{root}/logdir")
    yield f"memory://{root.lstrip('/')}"
    fs.rm(root, recursive=True)


@pytest.fixture(scope="module")
def local_logdir(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("local") / "logdir"
    logdir.mkdir()
    for name in LOGDIR_PARTITIONS:
        shutil.copytree(REALKAFKA / name, logdir / name)
    for p in (REALKAFKA / "_logdir-root").iterdir():
        shutil.copy(p, logdir / p.name)
    return logdir


def same_output(local, remote, *args) -> str:
    """Run a command on both paths; both succeed with the same stdout and nothing on stderr."""
    a = run_kfmt(*args[:1], local, *args[1:])
    b = run_kfmt(*args[:1], remote, *args[1:])
    assert (a.code, a.err) == (0, ""), a.err
    assert (b.code, b.err) == (0, ""), b.err
    assert a.out == b.out
    return a.out


def without_paths(out: str) -> list:
    objs = [json.loads(line) for line in out.splitlines()]
    flat = [o for obj in objs for o in (obj if isinstance(obj, list) else [obj])]
    for o in flat:
        o.pop("path", None)
    return flat


@pytest.mark.parametrize("name", REAL_DIRS)
def test_cat_on_memory_equals_cat_on_local(memory_root, name):
    local, remote = REALKAFKA / name, f"{memory_root}/{name}"
    out = same_output(local, remote, "cat", "--format", "json")
    assert [json.loads(line) for line in out.splitlines()] == list(consumer_records(name))
    same_output(local, remote, "cat")  # text form too
    records = consumer_records(name)
    middle = records[len(records) // 2]
    same_output(local, remote, "cat", "--from-offset", middle["offset"], "--format", "json")
    same_output(local, remote, "cat", "--from-timestamp", middle["timestamp"], "--max-records", 20)


@pytest.mark.parametrize("name", REAL_DIRS)
def test_info_on_memory_equals_info_on_local(memory_root, name):
    local, remote = REALKAFKA / name, f"{memory_root}/{name}"
    same_output(local, remote, "info")
    a, b = run_kfmt("info", local, "--format", "json"), run_kfmt("info", remote, "--format", "json")
    assert a.code == b.code == 0
    assert without_paths(a.out) == without_paths(b.out)  # "path" names the location itself


def test_read_committed_on_memory(memory_root):
    name = "txn-v2-none-0"
    out = same_output(REALKAFKA / name, f"{memory_root}/{name}", "cat", "--isolation", "read_committed",
                      "--format", "json")
    assert [json.loads(line) for line in out.splitlines()] == list(consumer_records(name, "records.read_committed"))


def test_log_directory_on_memory_equals_local(memory_root, local_logdir):
    remote = f"{memory_root}/logdir"
    out = same_output(local_logdir, remote, "cat", "--format", "json")
    seen = {(o["topic"], o["partition"]) for o in map(json.loads, out.splitlines())}
    assert seen == {(n[:-2], 0) for n in LOGDIR_PARTITIONS}
    same_output(local_logdir, remote, "cat", "--topic", "v*", "--from-offset", 250, "--max-records", 5)
    same_output(local_logdir, remote, "cat", "--topic", "txn-*", "--isolation", "read_committed")
    same_output(local_logdir, remote, "info")
    a, b = run_kfmt("info", local_logdir, "--format", "json"), run_kfmt("info", remote, "--format", "json")
    assert without_paths(a.out) == without_paths(b.out)


def test_bad_data_on_memory_names_the_memory_url(memory_root):
    fs = fsspec.filesystem("memory")
    name = "v2-gzip-0"
    remote = f"{memory_root}/bad-{name}"
    upload(fs, REALKAFKA / name, remote.replace("memory://", "/"))
    entry = kafka_listing(name)[3]
    path = f"{remote.replace('memory://', '/')}/{entry.file}"
    data = bytearray(fs.cat_file(path))
    struct.pack_into(">i", data, entry.position + 8, 3)  # an impossible entry size
    fs.pipe_file(path, bytes(data))
    result = run_kfmt("cat", remote)
    assert result.code == 65 and len(result.err.strip().splitlines()) == 1
    assert entry.file in result.err and f"position {entry.position}, offset {entry.offset}" in result.err
    assert "memory://" in result.err
