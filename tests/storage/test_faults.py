"""Faults under load (docs/reliability.md, "Faults under load"): every command that writes, run
through a fault-injecting proxy in front of the real S3 test server (tests/support/faultproxy.py) and
into a local file system that fills up (a tmpfs mounted with a small size), either finishes with
exactly what a fault-free run writes or fails with one line naming what failed and where, leaving
nothing a reader would take for output and nothing staged; every retry is bounded and logged on
stderr and in the report. Two runs racing on one destination refuse cleanly, locally and on S3.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from support.cli import run_kfmt
from support.faultproxy import Fault, FaultProxy
from support.log_dirs import make_log_dir

from kfmt.errors import UsageError
from kfmt.partition.layout import find_partitions
from kfmt.pipelines.task_hold import HOLD_ENV, RELEASE
from kfmt.storage.manifest import MANIFEST, PENDING_DIR
from kfmt.storage.store import open_storage
from kfmt.transforms.archive.generations import GENERATIONS_DIR
from kfmt.transforms.report import REPORT_NAME

pytestmark = [pytest.mark.timeout(600)]

PARTITIONS = ["v1-gzip-0", "txn-v2-none-0"]
INPROCESS = ["--master", "inprocess", "--no-progress"]
NOW = ["--now", "1800000000000"]
# command -> its arguments after SRC DST; "restore" reads the archive the fixture writes
COMMANDS = {
    "reindex": NOW,
    "salvage": NOW,
    "upgrade": [*NOW, *INPROCESS],
    "resegment": ["--segment-bytes", "20000", "--kafka-version", "3.9", *NOW, *INPROCESS],
    "recompress": ["--compression", "lz4", *NOW, *INPROCESS],
    "compact": [*NOW, *INPROCESS],
    "retain": ["--retention-bytes", "40000", *NOW, *INPROCESS],
    "export": INPROCESS,
    "archive": INPROCESS,
    "restore": INPROCESS,
}
# files that name the run (its id, its time, its retries): compared without their content
BOOKKEEPING = {REPORT_NAME, "_kfmt-report.json", MANIFEST}
ERROR = re.compile(r"^kfmt: error: .+$")


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory) -> Path:
    return make_log_dir(tmp_path_factory.mktemp("src") / "kafka-logs", PARTITIONS)


@pytest.fixture(scope="module")
def local_archive(log_dir, tmp_path_factory) -> Path:
    url = tmp_path_factory.mktemp("archived") / "archive"
    assert run_kfmt("archive", log_dir, url, *INPROCESS).code == 0
    return url


@pytest.fixture
def proxy(s3_server):
    with FaultProxy(s3_server.endpoint_url) as p:
        yield p


def through(s3_server, proxy) -> list[str]:
    """The storage options that send kfmt through the proxy."""
    out = []
    for key, value in dict(s3_server.storage_options, endpoint_url=proxy.url).items():
        out += ["--storage-option", f"{key}={value}"]
    return out


def args_for(command: str, src, dst, options: list[str]) -> list[str]:
    return [command, str(src), str(dst), *COMMANDS[command], *options]


def content(storage, root: str) -> dict:
    """What an output holds, file by file (size, bytes), without the files that name the run, the
    claims and upload records, and an archive's generation manifests."""
    out = {}
    for info in storage.walk(root):
        rel = info.path[len(root) + 1:]
        parts = rel.split("/")
        if parts[-1] in BOOKKEEPING or PENDING_DIR in parts or GENERATIONS_DIR in parts:
            continue
        out[rel] = bytes(storage.read(info.path))
    return out


def report_of(storage, root: str, command: str) -> dict:
    name = "_kfmt-report.json" if command == "export" else REPORT_NAME
    return json.loads(bytes(storage.read(storage.join(root, name))))


def retries_said(err: str) -> list[str]:
    return [line[len("kfmt: warning: "):] for line in err.splitlines()
            if line.startswith("kfmt: warning: ") and "retrying, attempt" in line]


def assert_one_line_failure(result, *words: str) -> str:
    """Exit 1 and one error line (warnings before it aside), naming `words`; never a traceback."""
    assert result.code == 1, result.err
    errors = [line for line in result.err.splitlines() if not line.startswith("kfmt: warning: ")]
    assert len(errors) == 1 and ERROR.match(errors[0]), result.err
    assert "Traceback" not in result.err and "internal error" not in result.err
    for word in words:
        assert word in errors[0], errors[0]
    return errors[0]


def assert_nothing_a_reader_trusts(storage, root: str, command: str) -> None:
    """After a failed run: no manifest (no output), and what a killed or failed archive left is
    refused by readers as unfinished; anything else is gone or no more than a claim of a run whose
    process is gone."""
    files = [f.path[len(root) + 1:] for f in storage.walk(root)] if storage.exists(root) else []
    assert MANIFEST not in files
    if command == "archive" and files:
        with pytest.raises(UsageError, match="unfinished"):
            find_partitions(storage, root)


# --- S3 -------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def s3_archive(s3_server, log_dir) -> str:
    url = s3_server.url(f"faults-archive-{uuid.uuid4().hex[:8]}")
    result = run_kfmt("archive", log_dir, url, *INPROCESS, *s3_server.cli_options())
    assert result.code == 0, result.err
    return url


@pytest.fixture(scope="module")
def s3_references(s3_server, log_dir, s3_archive) -> dict:
    """Each command's fault-free output (written to S3 directly, without the proxy)."""
    storage, base = open_storage(s3_server.url(f"faults-reference-{uuid.uuid4().hex[:8]}"),
                                 s3_server.storage_options)
    out = {}
    for command in COMMANDS:
        src = s3_archive if command == "restore" else log_dir
        dst = storage.url_of(storage.join(base, command))
        result = run_kfmt(*args_for(command, src, dst, s3_server.cli_options()))
        assert result.code == 0, result.err
        out[command] = content(storage, storage.join(base, command))
    return out


def transient_faults(command: str) -> list[Fault]:
    """Faults a retry mends, at points every command reaches: a write refused with 503 SlowDown, a
    write whose reply is lost after the server stored it, a listing answered with 500, and for
    restore (whose S3 side is its source) an object's body cut short and a reply that stalls."""
    if command == "restore":
        return [Fault("truncate", method="GET", key=r"\.log$", nth=2, after_bytes=100),
                Fault("status", method="GET", key=r"\.log$", nth=4, status=503, code="SlowDown"),
                Fault("stall", method="GET", key=r"\.log$", nth=6, seconds=1.0, after_bytes=10),
                Fault("status", method="GET", key="list-type", nth=2, status=500, code="InternalError")]
    return [Fault("status", method="PUT", nth=2, status=503, code="SlowDown"),
            Fault("reset", method="PUT", nth=4, upstream=True),
            Fault("status", method="PUT", nth=5, status=500, code="InternalError"),
            Fault("status", method="GET", key="list-type", nth=3, status=500, code="InternalError")]


@pytest.mark.s3
@pytest.mark.parametrize("command", list(COMMANDS))
def test_transient_s3_faults_are_retried_logged_and_leave_the_output_of_a_fault_free_run(
        command, s3_server, proxy, log_dir, s3_archive, s3_references, s3_url, tmp_path):
    faults = [proxy.add(f) for f in transient_faults(command)]
    options = through(s3_server, proxy)
    if command == "restore":
        storage, dst = open_storage(str(tmp_path / "out"))
        result = run_kfmt(*args_for(command, s3_archive, dst, options))
    else:
        storage, dst = open_storage(s3_url, s3_server.storage_options)
        result = run_kfmt(*args_for(command, log_dir, s3_url, options))
    assert result.code == 0, result.err
    assert all(f.fired for f in faults), [(f, f.matched) for f in faults]
    assert content(storage, dst) == s3_references[command]
    said = retries_said(result.err)
    assert said, result.err  # 503, 500 and cut-short replies are retried and each retry is said
    assert all(re.search(r"attempt [23] of 3$", line) for line in said), said
    # the report lists the retries made before it was written, as stderr said them
    retries = report_of(storage, dst, command)["retries"]
    assert retries and retries == said[:len(retries)], (retries, said)


@pytest.mark.s3
def test_retries_in_worker_processes_are_said_by_the_driver(s3_server, proxy, log_dir, s3_references, s3_url):
    """On the pool the retries happen in worker processes: each is said once, on the driver's stderr
    and in the report, and the output is the fault-free one."""
    faults = [proxy.add(Fault("status", method="PUT", key=r"\.log$", nth=n, status=503, code="SlowDown"))
              for n in (1, 3)]
    args = [a for a in args_for("upgrade", log_dir, s3_url, through(s3_server, proxy)) if a != "inprocess"]
    args[args.index("--master") + 1:args.index("--master") + 1] = ["local-pool[2]"]
    result = run_kfmt(*args)
    assert result.code == 0, result.err
    assert all(f.fired for f in faults)
    said = retries_said(result.err)
    assert len(said) == 2 and all("PutObject" in line and "HTTP 503 SlowDown" in line for line in said), said
    storage, dst = open_storage(s3_url, s3_server.storage_options)
    assert sorted(report_of(storage, dst, "upgrade")["retries"]) == sorted(said)
    assert content(storage, dst) == s3_references["upgrade"]


def outage(command: str) -> Fault:
    """An S3 service that stops answering part-way: every request of a kind from some point on."""
    if command == "restore":
        return Fault("status", method="GET", key=r"\.log$", nth=3, times=0, status=503, code="SlowDown")
    return Fault("status", method="PUT", nth=4, times=0, status=503, code="SlowDown")


@pytest.mark.s3
@pytest.mark.parametrize("command", list(COMMANDS))
def test_an_s3_outage_fails_in_one_line_after_bounded_retries_and_a_rerun_completes(
        command, s3_server, proxy, log_dir, s3_archive, s3_references, s3_url, tmp_path):
    proxy.add(outage(command))
    options = through(s3_server, proxy)
    if command == "restore":
        storage, dst = open_storage(str(tmp_path / "out"))
        src = s3_archive
    else:
        storage, dst = open_storage(s3_url, s3_server.storage_options)
        src = log_dir
    started = time.monotonic()
    result = run_kfmt(*args_for(command, src, storage.url_of(dst), options))
    assert time.monotonic() - started < 60
    line = assert_one_line_failure(result, "HTTP 503 SlowDown", "gave up after 3 attempts",
                                   f"S3 endpoint {proxy.url}")
    assert re.search(r"s3://\S+", line), line  # names the object
    # bounded: each request at most 3 attempts; the first failed task stops the others
    failing = [e for e in proxy.log if e.fault]
    per_request = {}
    for e in failing:
        per_request[e.target] = per_request.get(e.target, 0) + 1
    assert max(per_request.values()) <= 3, per_request
    assert len(retries_said(result.err)) == sum(n - 1 for n in per_request.values())
    if command == "restore":
        assert not (tmp_path / "out").exists() and os.listdir(tmp_path) == []
    else:
        assert_nothing_a_reader_trusts(storage, dst, command)
    proxy.heal()  # the service is back
    result = run_kfmt(*args_for(command, src, storage.url_of(dst), options))
    assert result.code == 0, result.err
    assert content(storage, dst) == s3_references[command]
    pending = storage.join(dst, PENDING_DIR)  # no claim left (S3 may keep the emptied prefix)
    assert not storage.exists(pending) or storage.walk(pending) == []


@pytest.mark.s3
def test_an_s3_endpoint_that_resets_every_connection_fails_in_one_line(s3_server, proxy, log_dir, s3_url):
    proxy.add(Fault("reset", method="PUT", nth=3, times=0))
    result = run_kfmt(*args_for("upgrade", log_dir, s3_url, through(s3_server, proxy)))
    assert_one_line_failure(result, f"cannot reach S3 endpoint {proxy.url}", "connection")
    storage, dst = open_storage(s3_url, s3_server.storage_options)
    assert_nothing_a_reader_trusts(storage, dst, "upgrade")


# --- a local file system that fills up --------------------------------------------------------------

def _mount(mountpoint: Path, size_bytes: int) -> str | None:
    """Mount a tmpfs of `size_bytes` (None, or why it cannot be done here)."""
    if os.geteuid() != 0:
        return "mounting a small file system needs root"
    mountpoint.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_bytes},mode=0755", "kfmt-enospc",
                           str(mountpoint)], capture_output=True, text=True)
    return None if done.returncode == 0 else f"cannot mount a tmpfs here: {done.stderr.strip()}"


@pytest.fixture
def small_fs(tmp_path):
    """A function that mounts a tmpfs of a given size at tmp_path/mnt (remounting to resize it),
    unmounted after the test."""
    mountpoint = tmp_path / "mnt"
    mounted = []

    def mount(size_bytes: int) -> Path:
        if mounted:
            subprocess.run(["mount", "-o", f"remount,size={size_bytes}", str(mountpoint)], check=True)
            return mountpoint
        why = _mount(mountpoint, size_bytes)
        if why is not None:
            pytest.skip(why)
        mounted.append(mountpoint)
        return mountpoint

    yield mount
    for m in mounted:
        subprocess.run(["umount", "-l", str(m)], check=False)


@pytest.fixture(scope="module")
def local_references(log_dir, local_archive, tmp_path_factory) -> dict:
    base = tmp_path_factory.mktemp("reference")
    out = {}
    for command in COMMANDS:
        src = local_archive if command == "restore" else log_dir
        result = run_kfmt(*args_for(command, src, base / command, []))
        assert result.code == 0, result.err
        storage, root = open_storage(str(base / command))
        files = content(storage, root)
        # what the output takes on a tmpfs: whole pages per file
        pages = sum(-(-f.stat().st_size // 4096) for f in (base / command).rglob("*") if f.is_file())
        out[command] = (files, pages * 4096)
    return out


@pytest.mark.parametrize("fill", [0.25, 0.75], ids=["early", "late"])
@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_destination_that_fills_up_fails_in_one_line_and_leaves_nothing(
        command, fill, log_dir, local_archive, local_references, small_fs):
    reference, needs = local_references[command]
    mnt = small_fs(max(4096, int(needs * fill) // 4096 * 4096))
    dst = mnt / "out"
    src = local_archive if command == "restore" else log_dir
    result = run_kfmt(*args_for(command, src, dst, []))
    assert_one_line_failure(result, "no space left on device", str(mnt))
    left = os.listdir(mnt)
    if command == "archive":  # what it uploaded stays for the next run: nothing a reader takes
        assert left in ([], ["out"])
        storage, root = open_storage(str(dst))
        assert_nothing_a_reader_trusts(storage, root, command)
    else:
        assert left == [], left  # no destination, no staging directory
    small_fs(needs * 2 + (1 << 20))  # room again: the same command completes
    result = run_kfmt(*args_for(command, src, dst, []))
    assert result.code == 0, result.err
    assert content(*open_storage(str(dst))) == reference
    assert os.listdir(mnt) == ["out"]


# --- two runs racing on one destination --------------------------------------------------------------

RACERS = {"archive": "archive", "restore": "restore", "export-append": "export"}


def _racer_args(racer: str, src: Path, archive: str, dst: str, options: list[str]) -> list[str]:
    if racer == "archive":
        return ["archive", str(src), dst, *INPROCESS, *options]
    if racer == "restore":
        return ["restore", archive, dst, *INPROCESS, *options]
    return ["export", str(src), dst, "--append", *INPROCESS, *options]


@pytest.mark.parametrize("where", ["local", "s3"])
@pytest.mark.parametrize("racer", list(RACERS))
def test_two_runs_racing_on_one_destination(racer, where, request, log_dir, local_archive, tmp_path):
    """The first run is held at the task barrier (kfmt.pipelines.task_hold) once its tasks wrote;
    the second one, started then, refuses in one line (exit 2) and leaves the first one's work alone;
    the first then publishes what a run alone publishes."""
    if where == "s3":
        s3_server = request.getfixturevalue("s3_server")
        options = s3_server.cli_options()
        dst = s3_server.url(f"race-{racer}-{uuid.uuid4().hex[:8]}")
        archive = request.getfixturevalue("s3_archive")
    else:
        options, dst, archive = [], str(tmp_path / "out"), str(local_archive)
    src = log_dir
    if racer == "export-append":  # an export to add to: the source without its last segments
        src = tmp_path / "grown"
        cut = make_log_dir(tmp_path / "cut", PARTITIONS)
        for part in PARTITIONS:
            for log in sorted((cut / part).glob("*.log"))[-2:]:
                for companion in (cut / part).glob(log.stem + ".*"):
                    companion.unlink()
        assert run_kfmt("export", cut, dst, *INPROCESS, *options).code == 0
        make_log_dir(src, PARTITIONS)
    hold = tmp_path / "hold"
    (hold / RACERS[racer]).mkdir(parents=True)
    env = dict(os.environ, **{HOLD_ENV: str(hold)})
    first = subprocess.Popen([sys.executable, "-m", "kfmt", *_racer_args(racer, src, archive, dst, options)],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not any(n.startswith("attempt-") for n in os.listdir(hold / RACERS[racer])):
            assert first.poll() is None and time.monotonic() < deadline, first.communicate()
            time.sleep(0.05)
        second = run_kfmt(*_racer_args(racer, src, archive, dst, options))
        assert second.code == 2, second.err
        assert second.err.count("\n") == 1 and f"another kfmt run (pid {first.pid}" in second.err, second.err
    finally:
        (hold / RACERS[racer] / RELEASE).touch()
        out, err = first.communicate(timeout=300)
    assert first.returncode == 0, err
    # the first run's output is whole: a third run finds nothing new to add, or refuses a published DST
    third = run_kfmt(*_racer_args(racer, src, archive, dst, options))
    if racer == "restore":
        assert third.code == 2 and ("not empty" in third.err or "published" in third.err), third.err
    else:
        assert third.code == 0, third.err
