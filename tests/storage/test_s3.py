"""Partition directories on a real S3-compatible server (SeaweedFS on 127.0.0.1, tests/support/s3server.py):
read a corpus partition uploaded there, write one through StagedOutput and PartitionWriter, read it
back; `kfmt cat` on s3:// URLs; a run killed mid-write; a second run into the same destination."""
from __future__ import annotations

import gzip
import json
import os
import shutil

import pytest
from support.cli import run_kfmt
from support.consumer_truth import consumer_truth, records_of
from support.corpus import REALKAFKA
from support.trees import run_writer, tree_state

from kfmt.errors import UsageError
from kfmt.partition.layout import find_partitions
from kfmt.partition.reader import PartitionReader
from kfmt.storage.manifest import MANIFEST, PENDING_DIR, load_manifest
from kfmt.storage.staging import StagedOutput
from kfmt.storage.store import open_storage
from kfmt.write.planner import RollPolicy
from kfmt.write.segment_writer import source_entries
from kfmt.write.writer import PartitionWriter

pytestmark = pytest.mark.s3
NAME = "txn-v2-none-0"  # transactional: .txnindex, control batches, snapshots, leader epochs


def upload(local_dir, storage, dst, *, staged: bool):
    """Copy a local partition directory to object storage: through StagedOutput (a kfmt output:
    manifest, mtimes kept) or as plain objects (as `aws s3 sync` would)."""
    names = sorted(os.listdir(local_dir))
    if not staged:
        for name in names:
            storage.write(storage.join(dst, name), (local_dir / name).read_bytes())
        return
    with StagedOutput(storage, dst) as out:
        for name in names:
            out.write(name, (local_dir / name).read_bytes(),
                      mtime_ms=os.stat(local_dir / name).st_mtime_ns // 1_000_000)


def object_state(storage, path) -> dict:
    return {f.path: (f.size, bytes(storage.read(f.path))) for f in storage.walk(path)}


@pytest.fixture
def local_source(tmp_path):
    src = tmp_path / NAME
    shutil.copytree(REALKAFKA / NAME, src)
    for i, name in enumerate(sorted(os.listdir(src))):
        ns = (1_650_000_000_000 + 1000 * i) * 1_000_000
        os.utime(src / name, ns=(ns, ns))
    return src


@pytest.mark.parametrize("staged", [False, True], ids=["plain-upload", "kfmt-upload"])
def test_read_a_partition_from_s3_and_write_one_back(s3_server, s3_url, local_source, tmp_path, staged):
    storage, root = open_storage(s3_url, s3_server.storage_options)
    src_path = storage.join(root, "src", NAME)
    upload(local_source, storage, src_path, staged=staged)
    [src] = find_partitions(storage, src_path)
    assert records_of(src) == consumer_truth(NAME)
    log_mtimes = {s.base_offset: s.log.mtime_ms for s in src.segments}
    if staged:  # mtimes travelled in the manifest
        assert log_mtimes == {s: os.stat(local_source / f"{s:020d}.log").st_mtime_ns // 1_000_000
                              for s in log_mtimes}

    dst = storage.join(root, "out")
    policy = RollPolicy(segment_bytes=8192)
    with StagedOutput(storage, dst) as out:
        with PartitionWriter(out, NAME, policy, source=src, now_ms=1_795_000_000_000) as writer:
            for seg, header, entry in source_entries(PartitionReader(src)):
                writer.append(header, entry, mtime_ms=seg.log.mtime_ms)
    [part] = find_partitions(storage, dst)
    assert records_of(part) == consumer_truth(NAME)
    assert part.manifest_problems == []
    assert {s.base_offset: s.log.mtime_ms for s in part.segments} == log_mtimes
    manifest = load_manifest(storage, dst)
    assert sorted(manifest.files) == sorted(f"{NAME}/{n}" for n in part.files)
    assert not storage.walk(storage.join(dst, PENDING_DIR))

    # the same bytes as the same write to local disk
    local_storage, local_path = open_storage(str(tmp_path / "local-out"))
    [local_src] = find_partitions(*open_storage(str(local_source)))
    with StagedOutput(local_storage, local_path) as out:
        with PartitionWriter(out, NAME, policy, source=local_src, now_ms=1_795_000_000_000) as writer:
            for seg, header, entry in source_entries(PartitionReader(local_src)):
                writer.append(header, entry)
    for name, info in part.files.items():
        assert bytes(storage.read(info.path)) == (tmp_path / "local-out" / NAME / name).read_bytes(), name


def test_kfmt_cat_reads_s3_urls(s3_server, s3_url, local_source):
    storage, root = open_storage(s3_url, s3_server.storage_options)
    upload(local_source, storage, storage.join(root, NAME), staged=True)
    result = run_kfmt("cat", f"{s3_url}/{NAME}", "--format", "json", *s3_server.cli_options())
    assert result.code == 0, result.err
    with gzip.open(REALKAFKA / f"{NAME}.truth" / "records.jsonl.gz", "rt") as f:
        assert [json.loads(line) for line in result.lines] == [json.loads(line) for line in f]


def test_a_killed_run_leaves_nothing_a_reader_takes_for_output(s3_server, s3_url, local_source):
    storage, root = open_storage(s3_url, s3_server.storage_options)
    src_url = f"{s3_url}/src/{NAME}"
    upload(local_source, storage, storage.join(root, "src", NAME), staged=True)
    before_s3, before_local = object_state(storage, storage.join(root, "src")), tree_state(local_source)
    dst_url = f"{s3_url}/logs/{NAME}"
    run_writer(src_url, dst_url, s3_server.storage_options, pause_after=30, kill=True)

    dst = storage.join(root, "logs", NAME)
    assert any(f.name.endswith(".log") for f in storage.walk(dst))  # it was killed mid-write
    for path in (dst, storage.join(root, "logs")):  # the partition, or the log dir holding it
        with pytest.raises(UsageError, match="unfinished kfmt output"):
            find_partitions(storage, path)
    result = run_kfmt("cat", dst_url, *s3_server.cli_options())
    assert result.code == 2 and "unfinished kfmt output" in result.err and not result.out
    assert object_state(storage, storage.join(root, "src")) == before_s3
    assert tree_state(local_source) == before_local

    done = run_writer(src_url, dst_url, s3_server.storage_options)
    assert done.returncode == 0 and done.stdout.strip() == "DONE", done.stderr
    [part] = find_partitions(storage, dst)
    assert records_of(part) == consumer_truth(NAME)
    assert part.manifest_problems == []  # the dead run's objects were removed, not just hidden
    assert sorted(f.name for f in storage.walk(dst)) == sorted(list(part.files) + [MANIFEST])
    assert {s.base_offset: s.log.mtime_ms for s in part.segments} == {
        int(n[:20]): os.stat(local_source / n).st_mtime_ns // 1_000_000
        for n in os.listdir(local_source) if n.endswith(".log")}
    assert object_state(storage, storage.join(root, "src")) == before_s3

    again = run_writer(src_url, dst_url, s3_server.storage_options)
    assert again.returncode == 2
    assert again.stderr == f"kfmt: error: {dst_url}: the destination holds a published kfmt output\n"


def test_objects_added_to_a_published_output_are_ignored_and_reported(s3_server, s3_url, local_source):
    storage, root = open_storage(s3_url, s3_server.storage_options)
    dst = storage.join(root, NAME)
    upload(local_source, storage, dst, staged=True)
    storage.write(storage.join(dst, "00000000000000099999.log"), b"\0" * 100)
    [part] = find_partitions(storage, dst)
    assert 99999 not in [s.base_offset for s in part.segments]
    assert part.manifest_problems == [f"00000000000000099999.log: not listed in {MANIFEST} (ignored)"]
    assert records_of(part) == consumer_truth(NAME)
