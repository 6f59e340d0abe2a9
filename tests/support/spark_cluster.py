"""A real Spark standalone cluster for the tests: one master and two workers (one core, 1 GiB each),
separate JVMs started from the installed pyspark with `spark-class`, so that executors share no
memory with the driver and run their own Python workers.

Everything listens on 127.0.0.1 only: SPARK_LOCAL_IP also decides where the web UIs bind (they bind
every interface without it), and each listener gets an explicit free port. Logs and work directories
live under one temporary directory, removed at the end. The processes are started in their own
process group with a parent-death signal and stopped by PID, so they cannot outlive pytest.

    cluster = SparkCluster(python=sys.executable).start()
    ... kfmt upgrade SRC DST --master cluster.master_url ...
    cluster.stop()
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request

from support.s3server import _die_with_parent, _free_ports

START_TIMEOUT_S = 90  # the machines are shared: JVMs start slowly on a loaded one
MASTER = "org.apache.spark.deploy.master.Master"
WORKER = "org.apache.spark.deploy.worker.Worker"


class PortTaken(RuntimeError):
    """Another process holds a port chosen for the cluster."""


def spark_home() -> str:
    from pyspark.find_spark_home import _find_spark_home

    return _find_spark_home()


class SparkCluster:
    def __init__(self, python: str, workers: int = 2, worker_memory: str = "1g"):
        self.python = python
        self.worker_count = workers
        self.worker_memory = worker_memory
        self.root = tempfile.mkdtemp(prefix="kfmt-spark-cluster-")
        self.processes: list[subprocess.Popen] = []
        self.workers: dict[int, subprocess.Popen] = {}
        self.master_url = ""
        self.ports: list[int] = []

    # --- lifecycle ---
    def start(self, attempts: int = 3) -> "SparkCluster":
        """Start the cluster; on ports taken between choosing and binding them (the machine is
        shared), again with other ports."""
        for attempt in range(attempts):
            try:
                return self._start()
            except PortTaken:
                self.stop(remove=False)
                if attempt == attempts - 1:
                    raise RuntimeError(f"the Spark cluster found its ports taken {attempts} times:\n"
                                       f"{self.log_tail()}") from None
        return self

    def _start(self) -> "SparkCluster":
        shutil.rmtree(os.path.join(self.root, "logs"), ignore_errors=True)  # an earlier attempt's
        master_port, master_ui, *worker_ports = _free_ports(2 + 2 * self.worker_count)
        self.ports = [master_port, master_ui, *worker_ports]
        self.master_url = f"spark://127.0.0.1:{master_port}"
        self.master_ui = f"http://127.0.0.1:{master_ui}"
        try:
            self._launch("master", [MASTER, "--host", "127.0.0.1", "--port", str(master_port),
                                    "--webui-port", str(master_ui)])
            # A worker that connects before the master is leader is not registered, and retries
            # only 10 s later: start the workers once the master says it is ALIVE.
            self._wait_until(lambda: self.state().get("status") == "ALIVE", "the master to be ALIVE")
            self.start_workers()
        except PortTaken:
            raise
        except BaseException:
            self.stop()
            raise
        return self

    def start_workers(self) -> None:
        """Start the workers (again, after kill_workers) and wait until all are registered."""
        worker_ports = self.ports[2:]
        for n in range(self.worker_count):
            port, ui = worker_ports[2 * n], worker_ports[2 * n + 1]
            work = os.path.join(self.root, f"worker-{n}")
            os.makedirs(work, exist_ok=True)
            self.workers[n] = self._launch(f"worker-{n}", [
                WORKER, "--host", "127.0.0.1", "--port", str(port), "--cores", "1",
                "--memory", self.worker_memory, "--webui-port", str(ui), "--work-dir", work,
                self.master_url])
        self._wait_until(lambda: self.alive_workers() == self.worker_count,
                         f"{self.worker_count} workers to register")

    def kill_workers(self) -> None:
        """SIGKILL every worker's process group (the worker JVM, its executors and their Python
        workers), as a machine that goes away would; the master stays."""
        for n, process in list(self.workers.items()):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=15)
            self.processes.remove(process)
            del self.workers[n]

    def env(self) -> dict:
        """The environment of the cluster's JVMs (and of a driver that should use the cluster)."""
        env = dict(os.environ)
        env.update({"SPARK_HOME": spark_home(), "SPARK_LOCAL_IP": "127.0.0.1",
                    "SPARK_MASTER_HOST": "127.0.0.1", "SPARK_LOG_DIR": os.path.join(self.root, "logs"),
                    "SPARK_WORKER_DIR": os.path.join(self.root, "work"),
                    "SPARK_LOCAL_DIRS": os.path.join(self.root, "local"),
                    "PYSPARK_PYTHON": self.python, "PYSPARK_DRIVER_PYTHON": self.python,
                    # only what a test passes on purpose reaches the JVMs' command lines
                    # no REST submission server (it would take the fixed port 6066)
                    "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false", "SPARK_WORKER_OPTS": "",
                    # daemons that start fast: they do little work, so the JIT's top tier and a
                    # parallel collector only cost start-up time
                    # and a taken port fails the daemon instead of moving it to another one
                    "SPARK_DAEMON_JAVA_OPTS": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC "
                                              "-Dspark.port.maxRetries=0",
                    "SPARK_DAEMON_MEMORY": "256m"})
        return env

    def _launch(self, name: str, args: list[str]) -> subprocess.Popen:
        os.makedirs(os.path.join(self.root, "logs"), exist_ok=True)
        log = open(self.log_path(name), "ab")
        with log:
            self.processes.append(subprocess.Popen(
                [os.path.join(spark_home(), "bin", "spark-class"), *args], env=self.env(),
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self.root,
                start_new_session=True, preexec_fn=_die_with_parent))
        return self.processes[-1]

    def log_path(self, name: str) -> str:
        return os.path.join(self.root, "logs", f"{name}.log")

    def logs(self) -> str:
        """Every log the cluster wrote (its daemons' and the executors'), for assertions on content."""
        out = []
        for folder, _, files in os.walk(self.root):
            for name in files:
                if name.endswith((".log", "stdout", "stderr")):
                    with open(os.path.join(folder, name), errors="replace") as f:
                        out.append(f.read())
        return "\n".join(out)

    def state(self) -> dict:
        """The master's state (its web UI's /json), checked to be our master's."""
        with urllib.request.urlopen(f"{self.master_ui}/json", timeout=2) as response:
            body = response.read()
        try:
            state = json.loads(body)
        except ValueError:
            state = {}
        if state.get("url") != self.master_url:
            raise PortTaken(f"{self.master_ui} is not the UI of {self.master_url}")
        return state

    def alive_workers(self) -> int:
        return sum(1 for w in self.state().get("workers", []) if w.get("state") == "ALIVE")

    def _wait_until(self, ready, what: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        last_error = None
        while time.monotonic() < deadline:
            for process in self.processes:
                if process.poll() is not None:
                    if "BindException" in self.log_tail(200):
                        raise PortTaken("a Spark daemon found its port taken")
                    raise RuntimeError(f"a Spark daemon exited with code {process.returncode}:\n"
                                       f"{self.log_tail()}")
            try:
                if ready():
                    return
            except OSError as err:  # the master's UI is not up yet
                last_error = err
            time.sleep(0.1)
        raise RuntimeError(f"waited {START_TIMEOUT_S} s for {what} ({last_error!r}):\n{self.log_tail()}")

    def log_tail(self, lines: int = 20) -> str:
        out = []
        for name in ["master"] + [f"worker-{n}" for n in range(self.worker_count)]:
            with contextlib.suppress(OSError), open(self.log_path(name), errors="replace") as f:
                out.append(f"--- {name}\n" + "".join(f.readlines()[-lines:]))
        return "\n".join(out)

    def stop(self, remove: bool = True) -> None:
        """Workers first, then the master: SIGTERM to each daemon's process group (a worker's
        executors are its children), SIGKILL after 15 s."""
        processes, self.processes = self.processes, []
        self.workers = {}
        for process in reversed(processes):
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGTERM)
        for process in reversed(processes):
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=15)
        if remove:
            shutil.rmtree(self.root, ignore_errors=True)
