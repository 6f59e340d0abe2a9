"""Crash safety of every command that writes: each runs as a real process, is SIGKILLed part-way
(after it has written a few files, half of them, or all of them but before it could publish), and
afterwards the destination is absent or complete (never half-written), the source is untouched
(every byte and modification time), a re-run succeeds and removes what the killed runs left, and a
second run into the published destination refuses clearly.

Builds on tests/storage/test_staging.py, whose kill tests drive kfmt.storage.staging directly through a writer
script; here the commands themselves are killed, transforms with `--master inprocess` (the same work
without a JVM). "Complete" means file for file what an uninterrupted run of the same command writes
(the run's own report and manifest aside, which name the run); an archive that is not complete is
refused by every reader, as test_archive.py checks in more detail for an archive to S3.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.cli import run_kfmt
from support.log_dirs import make_log_dir
from support.trees import tree_state

from kfmt.errors import UsageError
from kfmt.partition.layout import find_partitions
from kfmt.storage.manifest import MANIFEST, PENDING_DIR
from kfmt.storage.staging import OWNER
from kfmt.storage.store import open_storage
from kfmt.transforms.archive.generations import GENERATIONS_DIR
from kfmt.transforms.report import REPORT_NAME

pytestmark = [pytest.mark.timeout(600)]

PARTITIONS = ["v0-none-0", "v1-gzip-0", "v2-none-0", "txn-v2-none-0"]
INPROCESS = ["--master", "inprocess"]
NOW = ["--now", "1800000000000"]  # the clock producer expiry and delete horizons are judged against
# command -> the arguments after SRC DST; "archive" writes an archive (DST is its URL), "restore"
# reads one (SRC is an archive)
COMMANDS = {
    "reindex": NOW,
    "salvage": NOW,
    "upgrade": [*NOW, *INPROCESS],
    "resegment": ["--segment-bytes", "20000", "--kafka-version", "3.9", *NOW, *INPROCESS],
    "recompress": ["--compression", "lz4", *NOW, *INPROCESS],
    "compact": [*NOW, *INPROCESS],
    "retain": ["--retention-bytes", "40000", *NOW, *INPROCESS],
    "archive": INPROCESS,
    "restore": INPROCESS,
}
# name the run: the only files two runs write differently (with an archive's generation manifests)
BOOKKEEPING = {REPORT_NAME, MANIFEST}


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory) -> Path:
    """Four corpus partitions as a broker's log directory; one entry of v2-none-0 damaged, so that
    salvage has something to drop (every other command then stops at it with exit 65: those read
    the undamaged partitions through --topic)."""
    root = make_log_dir(tmp_path_factory.mktemp("src") / "kafka-logs", PARTITIONS)
    log = root / "v2-none-0" / "00000000000000000081.log"
    data = bytearray(log.read_bytes())
    data[200] ^= 0x40
    log.write_bytes(bytes(data))
    return root


@pytest.fixture(scope="module")
def archive(log_dir, tmp_path_factory) -> Path:
    url = tmp_path_factory.mktemp("archived") / "archive"
    result = run_kfmt("archive", log_dir, url, "--topic", "v[01]-*", *INPROCESS)
    assert result.code == 0, result.err
    return url


def args_for(command: str, log_dir: Path, archive: Path, dst: Path) -> list[str]:
    if command == "restore":
        return ["restore", str(archive), str(dst), *COMMANDS[command]]
    narrow = [] if command == "salvage" else ["--topic", "v[01]-*" if command == "archive" else "*[!e]-0"]
    if command in ("reindex", "compact", "retain", "upgrade", "resegment", "recompress"):
        narrow = ["--topic", "[tv][!2]*"]  # v0-none, v1-gzip and txn-v2-none: everything undamaged
    return [command, str(log_dir), str(dst), *narrow, *COMMANDS[command]]


def files_below(path: Path) -> list[str]:
    """Files below `path`, also while a run renames or removes directories there."""
    return [name for _dir, _subdirs, names in os.walk(path) for name in names]


def content(path: Path) -> dict:
    """A written tree, file by file (size, SHA-256), without the files that name the run."""
    state = tree_state(path)
    return {name: (size, digest) for name, (size, digest, _mtime) in state.items()
            if Path(name).name not in BOOKKEEPING and PENDING_DIR not in Path(name).parts
            and GENERATIONS_DIR not in Path(name).parts}


def killed_run(args: list[str], watch: Path, after_files: int) -> int:
    """Run `kfmt ARGS` in a new process and SIGKILL it once `after_files` files exist below `watch`
    (DST's parent: staging directories and archives are written there). Returns its exit status
    (-SIGKILL when it was killed, 0 when it finished first)."""
    proc = subprocess.Popen([sys.executable, "-m", "kfmt", *args, "--no-progress"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            if len(files_below(watch)) >= after_files:
                os.kill(proc.pid, signal.SIGKILL)
                break
            time.sleep(0.005)
    finally:
        if proc.poll() is None and time.monotonic() >= deadline:
            proc.kill()
        proc.wait(timeout=60)
        err = proc.stderr.read().decode()
        proc.stderr.close()
    assert proc.returncode in (0, -signal.SIGKILL), err
    return proc.returncode


def assert_absent_or_complete(command: str, dst: Path, reference: dict) -> bool:
    """True when DST is complete, False when it is absent (or, for an archive, refused)."""
    if command == "archive":
        if not (dst / MANIFEST).exists():
            if dst.exists():  # an unfinished archive: no reader takes it for one
                with pytest.raises(UsageError, match="unfinished"):
                    find_partitions(*open_storage(str(dst)))
            return False
    elif not dst.exists():
        return False
    assert content(dst) == reference
    return True


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_killed_run_leaves_the_destination_absent_or_complete(command, log_dir, archive, tmp_path):
    source_before = tree_state(log_dir)
    archive_before = tree_state(archive)
    reference_dst = tmp_path / "reference" / "out"
    result = run_kfmt(*args_for(command, log_dir, archive, reference_dst))
    assert result.code == 0, result.err
    reference = content(reference_dst)
    total = len(files_below(reference_dst.parent))

    parent = tmp_path / "runs"
    parent.mkdir()
    dst = parent / "out"
    args = args_for(command, log_dir, archive, dst)
    killed, complete = 0, False
    for after in (2, max(3, total // 2), total):  # early, half-way, everything written but published
        if killed_run(args, parent, after) == -signal.SIGKILL:
            killed += 1
        complete = assert_absent_or_complete(command, dst, reference)
        assert tree_state(log_dir) == source_before and tree_state(archive) == archive_before
        if complete:  # it published before the kill landed
            break
    assert killed, f"{command} always finished before it could be killed"

    if not complete:
        result = run_kfmt(*args)  # the re-run succeeds, and removes what killed runs left
        assert result.code == 0, result.err
        assert assert_absent_or_complete(command, dst, reference)
        # What killed runs left is gone, except a staging directory a kill caught while publishing (its
        # owner file already removed): kfmt.storage.staging reclaims an owner-less one only once it is older
        # than OWNERLESS_GRACE_MS, since it may be a run just starting; readers and brokers skip it.
        for name in os.listdir(parent):
            assert name == "out" or (re.fullmatch(r"out\.[0-9a-f]{32}-delete", name)
                                     and not (parent / name / OWNER).exists()), name
    if command != "archive":
        assert run_kfmt("verify", dst, "--deep").code in (0, 65)  # readable as a whole (verify's own verdict aside)

    again = run_kfmt(*args)
    if command == "archive":  # an archive re-run with nothing new leaves it as it is
        assert again.code == 0 and "nothing new since generation 1" in again.out
    else:
        assert again.code == 2 and again.err == f"kfmt: error: {dst}: the destination exists and is not empty\n"
    assert content(dst) == reference
    assert tree_state(log_dir) == source_before and tree_state(archive) == archive_before
