"""Hostile inputs: what a damaged or tampered-with log directory may hold besides bad bytes (those are
test_bad_input.py's and the fuzzers'). Symbolic links leading out of a log directory (or nowhere),
files named like segments that are not files, names with `..`, blanks, control characters and
non-ASCII letters, thousands of partitions, files kfmt may not read.

What each must give: a clear error (one line, exit 1, 2 or 65) or a skip with a one-line warning on
stderr; never a hang (every command runs under a timeout), never a traceback, and nothing written
anywhere but DST (the whole scratch tree is compared before and after, DST excepted).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import stat
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from support.corpus import REALKAFKA
from support.corpus_truth import consumer_records, kafka_listing
from support.privileges import AS_UNPRIVILEGED

pytestmark = [pytest.mark.timeout(300)]

READERS = [("cat", "--format", "json"), ("info",), ("verify",)]
WRITERS = [("reindex",), ("salvage",), ("upgrade", "--master", "inprocess")]


def kfmt(*args, timeout: float = 120) -> subprocess.CompletedProcess:
    """`kfmt ARGS` as its own process: a hang fails the test instead of stalling the suite."""
    return subprocess.run([sys.executable, "-m", "kfmt", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout)


def clear(result, codes=(0, 65)) -> list[str]:
    """The stderr lines of a run that ended as allowed, each a kfmt warning or error line."""
    assert result.returncode in codes, (result.returncode, result.stderr)
    lines = result.stderr.splitlines()
    assert all(line.startswith(("kfmt: warning: ", "kfmt: error: ")) for line in lines), result.stderr
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    return lines


def warned(lines: list[str], path, what: str) -> bool:
    return any(line.startswith(f"kfmt: warning: {path}: {what}") for line in lines)


def records(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines()]


def truth(name: str, **where) -> list[dict]:
    return [dict(r, **where) for r in consumer_records(name)]


def scratch_state(scratch: Path, dst: Path) -> dict:
    """Every entry of the scratch tree but DST and what lies below it, without following links:
    files by size, SHA-256 and mtime, links by target, the rest by kind. kfmt stages beside DST and
    removes the staging when it publishes or fails: nothing else may change."""
    out = {}
    for dirpath, dirs, files in os.walk(scratch):
        for name in dirs + files:
            path = Path(dirpath) / name
            if path == dst or path.is_relative_to(dst):
                continue
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode):
                out[str(path)] = ("link", os.readlink(path))
            elif stat.S_ISREG(st.st_mode):
                out[str(path)] = ("file", st.st_size, hashlib.sha256(path.read_bytes()).hexdigest(), st.st_mtime_ns)
            else:
                out[str(path)] = (stat.S_IFMT(st.st_mode),)
    return out


def copy(name: str, dst: Path) -> Path:
    shutil.copytree(REALKAFKA / name, dst, copy_function=shutil.copyfile)
    return dst


# --- symbolic links ---

@pytest.fixture
def linked_log_dir(tmp_path) -> Path:
    """A log directory with one real partition, a partition directory that is a link to one
    elsewhere, and in the real partition: a segment linked to a file outside, a dangling link and a
    link to itself, each named like a segment."""
    outside = copy("v2-none-0", tmp_path / "elsewhere" / "v2-none-0")
    logs = tmp_path / "logs"
    part = copy("v1-gzip-0", logs / "v1-gzip-0")
    (logs / "linked-0").symlink_to(outside)
    (part / "00000000000000999990.log").symlink_to(outside / "00000000000000000000.log")
    (part / "00000000000000999991.log").symlink_to(tmp_path / "nowhere")
    (part / "00000000000000999992.log").symlink_to("00000000000000999992.log")
    return logs


@pytest.mark.parametrize("command", READERS + WRITERS, ids=lambda c: c[0])
def test_symbolic_links_out_of_a_log_directory_are_skipped_with_a_warning(tmp_path, linked_log_dir, command):
    logs = linked_log_dir
    dst = tmp_path / "out"
    before = scratch_state(tmp_path, dst)
    writes = command in WRITERS
    result = kfmt(command[0], logs, *([dst] if writes else []), *command[1:])
    lines = clear(result)
    assert warned(lines, logs / "linked-0", "a symbolic link leading out of its directory")
    part = logs / "v1-gzip-0"
    assert warned(lines, part / "00000000000000999990.log", "a symbolic link leading out of its directory")
    assert warned(lines, part / "00000000000000999991.log", "a symbolic link leading out of its directory")
    assert warned(lines, part / "00000000000000999992.log", "a symbolic link that leads nowhere")
    if command[0] == "cat":
        assert result.returncode == 0 and records(result.stdout) == truth("v1-gzip-0", topic="v1-gzip", partition=0)
    if writes:
        assert result.returncode == 0
        assert sorted(p.name for p in dst.iterdir() if p.is_dir()) == ["v1-gzip-0"]
        assert not any(p.is_symlink() for p in dst.rglob("*"))
        assert kfmt("verify", dst, "--deep").returncode == 0
    assert scratch_state(tmp_path, dst) == before  # the links' targets included


# --- files named like segments that are not ---

def test_files_named_like_segments_that_are_not_files_never_block_a_reader(tmp_path):
    part = copy("v0-none-0", tmp_path / "v0-none-0")
    (part / "00000000000000999990.log").mkdir()
    os.mkfifo(part / "00000000000000999991.log")  # reading it would wait for a writer forever
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(part / "00000000000000999992.log"))
    (part / "notes.log").write_text("not a segment")  # Kafka fails to parse its base offset
    (part / "00000000000000999993.index").mkdir()
    dst = tmp_path / "out"
    before = scratch_state(tmp_path, dst)
    try:
        for command in READERS + WRITERS:
            writes = command in WRITERS
            target = tmp_path / f"out-{command[0]}" if writes else None
            result = kfmt(command[0], part, *([target] if target else []), *command[1:])
            lines = clear(result)
            assert warned(lines, part / "00000000000000999991.log", "neither a regular file nor a directory")
            assert warned(lines, part / "00000000000000999992.log", "neither a regular file nor a directory")
            if command[0] == "cat":
                assert result.returncode == 0 and records(result.stdout) == truth("v0-none-0")
            if command[0] == "verify":  # the stray .log is a problem: Kafka could not load the partition
                assert result.returncode == 65 and "notes.log" in result.stdout
            if writes:
                assert result.returncode == 0, result.stderr
                assert not (target / "notes.log").exists() and kfmt("verify", target, "--deep").returncode == 0
                shutil.rmtree(target)
        dumped = kfmt("dump", part / "00000000000000999991.log")
        assert clear(dumped, codes=(1,))[-1] == (f"kfmt: error: {part / '00000000000000999991.log'}: "
                                                 f"not a regular file")
    finally:
        listener.close()
    assert scratch_state(tmp_path, dst) == before


@pytest.mark.parametrize("command", WRITERS)
def test_what_lies_next_to_dst_is_no_concern_of_a_transform(tmp_path, command):
    """DST's parent is listed only for the staging directories of killed runs; a socket or FIFO there
    (SeaweedFS leaves sockets in /tmp) is not data kfmt reads: no warning."""
    part = copy("v0-none-0", tmp_path / "in" / "v0-none-0")
    parent = tmp_path / "outputs"
    parent.mkdir()
    os.mkfifo(parent / "a-fifo")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(parent / "a-socket"))
    try:
        result = kfmt(command[0], part, parent / "out", *command[1:])
    finally:
        listener.close()
    assert clear(result, codes=(0,)) == []


# --- names ---

ODD_NAMES = ["..-0", "a..b-0", "t o p i c-0", "тема-0", "ctl\x01-0", "pct%41:x;y-0", "x" * 240 + "-0"]


def test_odd_names_are_read_and_written_under_their_own_names_and_nowhere_else(tmp_path):
    logs = tmp_path / "logs"
    for name in ODD_NAMES:
        copy("v2-zstd-0", logs / name)
    (logs / "new\nline-0").mkdir()  # not <topic>-<partition> to Kafka: '.' does not match a newline
    (logs / "lost+found").mkdir()
    dst = tmp_path / "out"
    before = scratch_state(tmp_path, dst)
    result = kfmt("cat", logs, "--format", "json")
    lines = clear(result)
    assert warned(lines, logs / "new\\nline-0", "not a partition directory")  # escaped: one line
    assert warned(lines, logs / "lost+found", "not a partition directory")
    got = records(result.stdout)
    assert sorted({(r["topic"], r["partition"]) for r in got}) == sorted((n[:-2], 0) for n in ODD_NAMES)
    assert len(got) == len(ODD_NAMES) * len(consumer_records("v2-zstd-0"))
    for command in WRITERS:
        out = tmp_path / f"out-{command[0]}"
        clear(kfmt(command[0], logs, out, *command[1:]), codes=(0,))
        assert sorted(p.name for p in out.iterdir() if p.is_dir()) == sorted(ODD_NAMES)
        assert kfmt("verify", out, "--deep").returncode == 0
        shutil.rmtree(out)
    assert scratch_state(tmp_path, dst) == before


def test_an_error_naming_a_control_character_stays_one_line(tmp_path):
    part = copy("v2-none-0", tmp_path / "bad\nname\x1b-0")
    log = part / "00000000000000000000.log"
    data = bytearray(log.read_bytes())
    struct.pack_into(">i", data, 8, 3)  # an impossible entry size
    log.write_bytes(bytes(data))
    [line] = clear(kfmt("cat", part), codes=(65,))
    assert line.startswith(f"kfmt: error: {tmp_path}/bad\\nname\\x1b-0/00000000000000000000.log, position 0")


# --- many partitions ---

def test_a_log_directory_with_thousands_of_partitions(tmp_path):
    """2000 partitions of one small segment each: every reader and salvage go through all of them, in
    time and memory that grow with the work, not with the number of open files."""
    first = (REALKAFKA / "v2-none-0" / "00000000000000000000.log").read_bytes()
    segment, pos = b"", 0
    while len(segment) < 150:  # the first few entries
        size = struct.unpack_from(">i", first, pos + 8)[0] + 12
        segment, pos = segment + first[pos:pos + size], pos + size
    logs = tmp_path / "logs"
    names = [f"topic.{i % 40}-{i // 40}" for i in range(2000)]
    for name in names:
        (logs / name).mkdir(parents=True)
        (logs / name / "00000000000000000000.log").write_bytes(segment)
    last = [e for e in kafka_listing("v2-none-0") if e.file == "00000000000000000000.log" and e.position < pos][-1]
    per_partition = [r for r in consumer_records("v2-none-0") if r["offset"] <= last.last_offset]
    result = kfmt("cat", logs, "--format", "json")
    clear(result, codes=(0,))
    got = records(result.stdout)
    assert len(got) == 2000 * len(per_partition)
    assert [{k: v for k, v in r.items() if k not in ("topic", "partition")} for r in got[:len(per_partition)]] \
        == per_partition
    info = kfmt("info", logs, "--format", "json")
    clear(info, codes=(0,))
    assert len(info.stdout.splitlines()) == 2000
    verified = kfmt("verify", logs, "--format", "json")
    clear(verified)
    assert json.loads(verified.stdout)["summary"]["partitions"] == 2000
    out = tmp_path / "out"
    clear(kfmt("salvage", logs, out, timeout=240), codes=(0,))
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == sorted(names)


# --- files kfmt may not read ---


def kfmt_unprivileged(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", AS_UNPRIVILEGED, *map(str, args)], capture_output=True,
                          text=True, timeout=120)


@pytest.fixture
def unreadable(tmp_path) -> Path:
    """A log directory where a segment, an index, partition.metadata, leader-epoch-checkpoint and
    meta.properties may not be read."""
    logs = tmp_path / "logs"
    part = copy("v2-lz4-0", logs / "v2-lz4-0")
    shutil.copyfile(REALKAFKA / "_logdir-root" / "meta.properties", logs / "meta.properties")
    denied = [part / "00000000000000000089.log", part / "00000000000000000089.index",
              part / "partition.metadata", part / "leader-epoch-checkpoint", logs / "meta.properties"]
    for path in denied:
        path.chmod(0)
    yield logs, denied
    for path in denied:
        path.chmod(0o644)


def test_unreadable_files_are_a_clear_error_for_readers_and_transforms(tmp_path, unreadable):
    logs, denied = unreadable
    dst = tmp_path / "out"
    before = scratch_state(tmp_path, dst)
    for command in [("cat",), ("info",), ("reindex", dst), ("upgrade", dst, "--master", "inprocess")]:
        [line] = clear(kfmt_unprivileged(command[0], logs, *command[1:]), codes=(1,))
        assert any(line.startswith(f"kfmt: error: {path}: permission denied") for path in denied), line
    assert not dst.exists()
    assert scratch_state(tmp_path, dst) == before


def test_salvage_skips_what_it_may_not_read_and_reports_it(tmp_path, unreadable):
    logs, _denied = unreadable
    dst = tmp_path / "out"
    result = kfmt_unprivileged("salvage", logs, dst, "--format", "json")
    clear(result, codes=(0,))
    report = json.loads(result.stdout)
    [part] = report["salvage"]["partitions"]
    [dropped] = part["dropped"]
    assert (dropped["kind"], dropped["file"]) == ("unreadable", str(logs / "v2-lz4-0" / "00000000000000000089.log"))
    following = min(int(p.name[:20]) for p in (logs / "v2-lz4-0").glob("*.log") if int(p.name[:20]) > 89)
    assert dropped["offsets"] == [{"first": 89, "last": following - 1}]
    notes = "\n".join(report["notes"])
    assert "partition.metadata not carried over" in notes and "meta.properties not carried over" in notes
    lost = {r["offset"] for r in consumer_records("v2-lz4-0") if 89 <= r["offset"] < following}
    result = kfmt("cat", dst / "v2-lz4-0", "--format", "json")
    assert records(result.stdout) == [r for r in truth("v2-lz4-0") if r["offset"] not in lost]
    assert kfmt("verify", dst, "--deep").returncode == 0
