"""Errors a person understands (issue 14, point 5): every storage and engine failure ends in one line
on stderr naming what failed and where, with the documented exit code (1 runtime, 2 usage), within
60 seconds, never a traceback or an "internal error".

Each case runs the real `kfmt` command in a subprocess against a real failure: a real S3 server
(SeaweedFS, tests/s3server.py) with a missing bucket or refused credentials, an endpoint nothing
listens on, a server stopped while kfmt reads from it; files root may not read (kfmt run without the
capabilities that let root read anything: test_hostile_inputs.kfmt_unprivileged); a real standalone
Spark master started from pyspark's own scripts, first without workers, then stopped.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest
from support.corpus import REALKAFKA
from support.privileges import AS_UNPRIVILEGED
from support.s3server import SeaweedServer
from support.tools import weed as weed_binary

from kfmt.storage.store import open_storage

PARTITION = "compact-v1-gzip-0"  # small: 146 records
MANY_SEGMENTS = "v2-none-0"  # 29 segments
LIMIT_S = 60  # the promise: a failure is reported within a minute


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def kfmt(*args, env: dict | None = None, unprivileged: bool = False, timeout: float = 90):
    """Run the kfmt command; (CompletedProcess, seconds it took)."""
    prefix = ["-c", AS_UNPRIVILEGED] if unprivileged else ["-m", "kfmt"]
    started = time.monotonic()
    result = subprocess.run([sys.executable, *prefix, *map(str, args)], capture_output=True, text=True,
                            timeout=timeout, env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL)
    return result, time.monotonic() - started


RETRY_LINE = re.compile(r"^kfmt: warning: .+; retrying, attempt [23] of 3$")


def one_error_line(run, code: int, *named: str, secret: str | None = None) -> str:
    """The single `kfmt: error:` line of a failed run, checked: exit code, nothing else on stderr
    but the retries (each said in a line of its own, at most 3 attempts: kfmt.storage.retries), no
    traceback, no internal error, every `named` string in it, in time, no credential."""
    result, seconds = run
    retries = [line for line in result.stderr.splitlines() if RETRY_LINE.match(line)]
    lines = [line for line in result.stderr.splitlines() if line not in retries]
    assert result.returncode == code, result.stderr
    assert len(lines) == 1, result.stderr
    assert all(not line.endswith(("attempt 4 of 3", "of 4")) for line in retries), retries
    [line] = lines
    assert line.startswith("kfmt: error: "), line
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    for text in named:
        assert text in line, (text, line)
    if secret is not None:
        assert secret not in result.stderr and secret not in result.stdout
    assert seconds < LIMIT_S, seconds
    return line


def s3_options(endpoint_url: str, key: str, secret: str) -> list[str]:
    return ["--storage-option", f"endpoint_url={endpoint_url}", "--storage-option", f"key={key}",
            "--storage-option", f"secret={secret}"]


# --- a PATH with no partitions: exit 2 for every command that takes one ---

PATH_COMMANDS = [("cat",), ("info",), ("verify",), ("export", "DST"), ("upgrade", "DST"),
                 ("resegment", "DST", "--segment-bytes", "1048576"), ("recompress", "DST", "--compression", "gzip"),
                 ("reindex", "DST"), ("compact", "DST"), ("retain", "DST"), ("salvage", "DST"),
                 ("archive", "DST")]


@pytest.mark.parametrize("command", PATH_COMMANDS, ids=[c[0] for c in PATH_COMMANDS])
def test_a_directory_without_partitions_is_a_usage_error_for_every_command(tmp_path, command):
    src = tmp_path / "not-a-log-dir"
    for name in ("lost+found", "backup", "notes"):  # directories, none named <topic>-<partition>
        (src / name).mkdir(parents=True)
    dst = tmp_path / "out"
    args = [str(dst) if a == "DST" else a for a in command[1:]]
    if command[0] not in ("cat", "info", "verify", "salvage", "reindex", "archive"):
        args += ["--master", "inprocess"]
    one_error_line(kfmt(command[0], src, *args), 2, str(src), "no Kafka file here")
    assert not dst.exists()


def test_an_empty_directory_and_a_missing_path_are_usage_errors(tmp_path):
    (tmp_path / "empty").mkdir()
    one_error_line(kfmt("verify", tmp_path / "empty"), 2, str(tmp_path / "empty"), "no Kafka file here")
    one_error_line(kfmt("cat", tmp_path / "missing"), 2, str(tmp_path / "missing"), "no such file or directory")


def test_a_selection_that_matches_nothing_is_a_usage_error(tmp_path):
    one_error_line(kfmt("cat", REALKAFKA / PARTITION, "--partition", "7"), 2, "no partition directories match")


@pytest.mark.parametrize("command", ["cat", "info", "verify", "reindex", "export", "upgrade"])
def test_every_command_refuses_a_topic_that_matches_nothing(tmp_path, command):
    """A typo in --topic must not look like a clean, empty success (exit 0) to a script."""
    logs = tmp_path / "logs"
    shutil.copytree(REALKAFKA / PARTITION, logs / PARTITION)
    args = [command, logs, "--topic", "no-such-topic*"]
    if command in ("reindex", "export", "upgrade"):
        args.append(tmp_path / "out")
    result = kfmt(*args)
    one_error_line(result, 2, "no partition directories match topic 'no-such-topic*'")
    assert not (tmp_path / "out").exists()


# --- local permissions (root ignores file modes: kfmt runs without CAP_DAC_OVERRIDE here) ---

def test_a_source_that_may_not_be_listed_is_one_line(tmp_path):
    part = tmp_path / PARTITION
    shutil.copytree(REALKAFKA / PARTITION, part)
    part.chmod(0)
    try:
        one_error_line(kfmt("verify", part, unprivileged=True), 1, f"{part}: permission denied")
    finally:
        part.chmod(0o755)


def test_a_destination_that_may_not_be_written_is_one_line(tmp_path):
    parent = tmp_path / "read-only"
    parent.mkdir()
    parent.chmod(0o555)
    try:
        dst = parent / "out"
        one_error_line(kfmt("upgrade", REALKAFKA / PARTITION, dst, "--master", "inprocess", unprivileged=True),
                       1, str(parent), "permission denied")
        assert not dst.exists()
    finally:
        parent.chmod(0o755)


def test_a_destination_below_a_regular_file_is_one_line(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    one_error_line(kfmt("upgrade", REALKAFKA / PARTITION, blocker / "out", "--master", "inprocess"), 1,
                   str(blocker), "not a directory")


# --- S3 ---

@pytest.fixture
def uploaded(s3_server, s3_url):
    """PARTITION uploaded to the test bucket as plain objects; its s3:// URL."""
    storage, root = open_storage(s3_url, s3_server.storage_options)
    for f in sorted((REALKAFKA / PARTITION).iterdir()):
        storage.write(storage.join(root, PARTITION, f.name), f.read_bytes())
    return f"{s3_url}/{PARTITION}"


def test_s3_bounds_leave_what_the_user_set():
    """kfmt bounds botocore's waits only where the user said nothing (read back from s3fs itself)."""
    pytest.importorskip("s3fs")
    user = {"connect_timeout": 30, "retries": {"max_attempts": 7, "mode": "adaptive"}}
    storage, _ = open_storage("s3://bucket/x", {"endpoint_url": "http://127.0.0.1:1", "key": "k",
                                                "secret": "s", "config_kwargs": user})
    assert storage.fs.config_kwargs["connect_timeout"] == 30
    assert storage.fs.config_kwargs["retries"] == {"max_attempts": 7, "mode": "adaptive"}
    assert storage.fs.config_kwargs["read_timeout"] < 60  # not set by the user: bounded
    storage, _ = open_storage("s3://bucket/x", {"endpoint_url": "http://127.0.0.1:1", "key": "k", "secret": "s"})
    assert storage.fs.config_kwargs["connect_timeout"] < 60
    assert user == {"connect_timeout": 30, "retries": {"max_attempts": 7, "mode": "adaptive"}}  # not mutated


@pytest.mark.s3
def test_an_s3_endpoint_nothing_listens_on(tmp_path):
    endpoint = f"http://127.0.0.1:{free_port()}"
    options = s3_options(endpoint, "kfmt-key", "kfmt-very-secret")
    one_error_line(kfmt("cat", "s3://bucket/logs", *options), 1,
                   f"cannot reach S3 endpoint {endpoint}: connection refused", "s3://bucket/logs",
                   secret="kfmt-very-secret")


@pytest.mark.s3
def test_an_s3_destination_nothing_listens_on(tmp_path):
    endpoint = f"http://127.0.0.1:{free_port()}"
    options = [o.replace("--storage-option", "--dst-storage-option")
               for o in s3_options(endpoint, "kfmt-key", "kfmt-very-secret")]
    one_error_line(kfmt("upgrade", REALKAFKA / PARTITION, "s3://bucket/out", "--master", "inprocess", *options),
                   1, f"cannot reach S3 endpoint {endpoint}: connection refused", secret="kfmt-very-secret")


@pytest.mark.s3
def test_an_s3_bucket_that_does_not_exist(s3_server):
    options = s3_options(s3_server.endpoint_url, s3_server.key, s3_server.secret)
    one_error_line(kfmt("info", "s3://no-such-bucket/logs", *options), 2,
                   "s3://no-such-bucket: no such bucket", s3_server.endpoint_url, secret=s3_server.secret)


@pytest.mark.s3
def test_an_s3_destination_bucket_that_does_not_exist(s3_server):
    options = s3_options(s3_server.endpoint_url, s3_server.key, s3_server.secret)
    one_error_line(kfmt("upgrade", REALKAFKA / PARTITION, "s3://no-such-bucket/out", "--master", "inprocess",
                        *options), 2, "s3://no-such-bucket: no such bucket", secret=s3_server.secret)


@pytest.mark.s3
@pytest.mark.parametrize("key", ["AKIAKFMTUNKNOWN", None], ids=["unknown-key", "wrong-secret"])
def test_s3_credentials_refused(s3_server, uploaded, key):
    options = s3_options(s3_server.endpoint_url, key or s3_server.key, "wrong-secret-value")
    line = one_error_line(kfmt("cat", uploaded, *options), 1, f"S3 endpoint {s3_server.endpoint_url} refused",
                          uploaded, secret="wrong-secret-value")
    # S3 answers a HEAD (kfmt's first request) with a bare 403; requests with a body name the cause
    assert "HTTP 403" in line or ("InvalidAccessKeyId" if key else "SignatureDoesNotMatch") in line, line
    if key:
        assert key not in line


@pytest.mark.s3
@pytest.mark.needs("weed")
def test_s3_stopped_while_kfmt_reads(tmp_path):
    """A server of its own, stopped by PID while `kfmt cat` is between segments (its stdout pipe is
    full): the next read fails, in one line naming the endpoint and the file."""
    server = SeaweedServer(weed_binary())
    try:
        endpoint = server.start()
        storage, root = open_storage(endpoint.url("stopped"), endpoint.storage_options)
        for f in sorted((REALKAFKA / MANY_SEGMENTS).iterdir()):
            storage.write(storage.join(root, MANY_SEGMENTS, f.name), f.read_bytes())
        started = time.monotonic()
        process = subprocess.Popen([sys.executable, "-m", "kfmt", "cat", endpoint.url("stopped", MANY_SEGMENTS),
                                    "--format", "json", *s3_options(endpoint.endpoint_url, endpoint.key,
                                                                    endpoint.secret)],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        try:
            assert process.stdout.readline()  # records flow: the first segment has been read
            time.sleep(1)  # kfmt fills the pipe and waits
            server.stop()
            out, err = process.communicate(timeout=90)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        seconds = time.monotonic() - started
        result = subprocess.CompletedProcess(process.args, process.returncode, out.decode(), err.decode())
        line = one_error_line((result, seconds), 1, f"cannot reach S3 endpoint {endpoint.endpoint_url}",
                              endpoint.url("stopped", MANY_SEGMENTS), secret=endpoint.secret)
        assert line.endswith(".log)") and result.stdout.count("\n") > 0, line  # a segment, mid-way
    finally:
        server.stop()


# --- Spark ---

def test_a_spark_master_nothing_listens_on(tmp_path):
    master = f"spark://127.0.0.1:{free_port()}"
    one_error_line(kfmt("upgrade", REALKAFKA / PARTITION, tmp_path / "out", "--master", master), 1,
                   f"cannot reach Spark master {master}: connection refused")
    assert not (tmp_path / "out").exists()


def spark_home() -> str:
    import pyspark

    return os.path.dirname(pyspark.__file__)


class StandaloneMaster:
    """A Spark standalone master from pyspark's own scripts, bound to 127.0.0.1, stopped by PID."""

    def __init__(self):
        self.workdir = tempfile.mkdtemp(prefix="kfmt-spark-master-")
        self.port, self.ui_port = free_port(), free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        env = {**os.environ, "SPARK_HOME": spark_home(), "SPARK_LOCAL_IP": "127.0.0.1",
               "SPARK_LOG_DIR": os.path.join(self.workdir, "logs"),
               "SPARK_WORKER_DIR": os.path.join(self.workdir, "work"),
               # no REST submission server: it would listen on the fixed port 6066
               "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false"}
        self.log = open(os.path.join(self.workdir, "master.log"), "wb")
        self.process = subprocess.Popen(
            [os.path.join(spark_home(), "bin", "spark-class"), "org.apache.spark.deploy.master.Master",
             "--host", "127.0.0.1", "--port", str(self.port), "--webui-port", str(self.ui_port)],
            env=env, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def wait_until_listening(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process.poll() is None, "the Spark master exited"
            try:
                socket.create_connection(("127.0.0.1", self.port), 1).close()
                return
            except OSError:
                time.sleep(0.3)
        raise AssertionError("the Spark master did not listen within a minute")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()
        shutil.rmtree(self.workdir, ignore_errors=True)


@pytest.mark.spark
def test_a_real_spark_master_without_executors_and_then_stopped(tmp_path):
    """A master with no workers: the job cannot get an executor and is cancelled (after the wait
    KFMT_SPARK_EXECUTOR_WAIT sets, 45 s by default); the same master stopped by its PID: refused."""
    master = StandaloneMaster()
    try:
        master.wait_until_listening()
        dst = tmp_path / "out"
        one_error_line(kfmt("upgrade", REALKAFKA / PARTITION, dst, "--master", master.url,
                            env={"KFMT_SPARK_EXECUTOR_WAIT": "5"}),
                       1, f"no Spark executor on master {master.url} accepted the job", "job cancelled")
        assert not dst.exists()
        master.stop()
        one_error_line(kfmt("upgrade", REALKAFKA / PARTITION, dst, "--master", master.url), 1,
                       f"cannot reach Spark master {master.url}: connection refused")
        assert not dst.exists()
    finally:
        master.stop()
