"""Durability on local disk: a published output survives a crash of the machine, not only of the
process. No test can pull the power, so this checks the rule that guarantees it (plugins/storage/
local.py): every file and directory of a staged output, whichever process wrote it, has been fsynced
before the rename that publishes it; a failed fsync publishes nothing; and a file written outside a
staging area is fsynced before its write returns, as before. The kills of test_crash_safety.py
check the rest (what a dying process leaves)."""
from __future__ import annotations

import errno
import os
import pickle
from concurrent.futures import ProcessPoolExecutor

import pytest

from kfmt.storage.staging import StagedOutput
from kfmt.storage.store import open_storage


@pytest.fixture
def journal(monkeypatch):
    """Every fsync (by the path of its descriptor) and rename made in this process, in order."""
    events: list[tuple[str, str]] = []
    fsync, rename = os.fsync, os.rename

    def recorded_fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        return fsync(fd)

    def recorded_rename(src, dst, *args, **kwargs):
        events.append(("rename", os.fspath(src)))
        return rename(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "fsync", recorded_fsync)
    monkeypatch.setattr(os, "rename", recorded_rename)
    return events


def _write_from_worker(target, rel, data):
    files = target.files()
    return files.write(rel, data)


def _tree(root: str) -> set[str]:
    found = set()
    for dirpath, _dirs, files in os.walk(root):
        found.add(dirpath)
        found.update(os.path.join(dirpath, f) for f in files)
    return found


def test_every_staged_file_and_directory_is_fsynced_before_the_publishing_rename(tmp_path, journal):
    storage, dst = open_storage(str(tmp_path / "out"))
    out = StagedOutput(storage, dst)
    out.write("p-0/00000000000000000000.log", b"x" * 5000, mtime_ms=1_600_000_000_000)
    with out.open("p-0/00000000000000000000.index") as stream:
        stream.write(b"i" * 8)
    target = pickle.loads(pickle.dumps(out.target()))
    with ProcessPoolExecutor(1) as pool:  # written by another process, as the pool's workers do
        out.adopt([pool.submit(_write_from_worker, target, "p-1/leader-epoch-checkpoint", b"0\n0\n").result()])
    staged = _tree(out.root) - {os.path.join(out.root, "_kfmt_staging.json")}
    # written, not yet synced: a file's fsync waits for the one sync before publication
    assert not {path for kind, path in journal if kind == "fsync"} & staged
    out.commit()
    published = next(i for i, (kind, path) in enumerate(journal) if kind == "rename" and path == out.root)
    synced = {path for kind, path in journal[:published] if kind == "fsync"}
    assert staged and staged <= synced, sorted(staged - synced)
    # and the rename itself is made durable: the parent directory is fsynced after it
    assert ("fsync", str(tmp_path)) in journal[published:]
    assert sorted(os.listdir(dst)) == ["p-0", "p-1"]


def test_a_failed_fsync_publishes_nothing(tmp_path, monkeypatch):
    storage, dst = open_storage(str(tmp_path / "out"))
    out = StagedOutput(storage, dst)
    for i in range(40):
        out.write(f"p-{i % 3}/file-{i}", b"data %d" % i)
    fsync = os.fsync

    def failing(fd):
        if os.readlink(f"/proc/self/fd/{fd}").endswith("/file-17"):
            raise OSError(errno.EIO, "Input/output error")
        return fsync(fd)

    monkeypatch.setattr(os, "fsync", failing)
    with pytest.raises(OSError) as failure:
        out.commit()
    assert failure.value.errno == errno.EIO
    assert not os.path.exists(dst)
    assert os.listdir(tmp_path) == []  # the staging directory is gone too


def test_a_file_written_outside_a_staging_area_is_fsynced_before_the_write_returns(tmp_path, journal):
    storage, root = open_storage(str(tmp_path))
    path = storage.join(root, "a", "b", "plain.json")
    storage.write(path, b"{}")
    assert ("fsync", path) in journal
    with storage.open_write(storage.join(root, "streamed")) as stream:
        stream.write(b"z" * 10)
    assert ("fsync", storage.join(root, "streamed")) in journal
