"""The Spark session kfmt's jobs run on: embedded local[*] by default, a cluster with --master.

Settings these machines require (reference/environment-notes.md): the workers run this interpreter
unless PYSPARK_PYTHON says otherwise (kfmt is shipped to workers that lack it: worker_check), Spark
binds 127.0.0.1 only when all its executors are on this machine (on_loopback), and the UI (which
listens on all interfaces) is off. docs/cluster.md says how to run on clusters.

Failures to start are one-line kfmt errors (EngineError), quickly: a standalone master that does not
answer is found by connecting to it first, because Spark's StandaloneAppClient would retry its
registration for a minute and then leave a stopped context behind. The JVM's stderr passes through a
filter that drops the one line every run prints ("WARNING: Using incubator modules"), so that a
failing command still prints one line.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

from kfmt.errors import EngineError

LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")
#: how long a connection to a standalone master may take before it counts as unreachable
MASTER_CONNECT_TIMEOUT_S = 5
#: how long a standalone master may take to register kfmt's application once the JVM runs (the
#: SparkContext's own start included: on a loaded two-core machine that alone took over 30 s), and
#: below the minute after which Spark's client gives up and leaves a stopped context behind;
#: KFMT_SPARK_REGISTRATION_WAIT overrides it
REGISTRATION_TIMEOUT_S = 55
#: lines the JVM prints on every start that say nothing to a kfmt user
_JVM_NOISE = ("WARNING: Using incubator modules",)
#: the driver JVM's options when it only schedules kfmt's tasks (run_tasks: the records stay in the
#: Python workers, the JVM moves small pickled tasks and results). HotSpot's optimizing compiler (C2)
#: then spends more CPU compiling Spark's start and scheduling paths than its code saves: on the
#: 2-core machine the quick compiler alone (C1) cut the whole process's CPU by 2.6 s for a job of two
#: trivial tasks and by about 4 s for a 2 GB resegment (docs/cluster.md). Queries of the kafka-log
#: data source turn Arrow batches into rows in the JVM, where C2 pays: their sessions keep the default.
SCHEDULER_JVM_OPTIONS = ("-XX:TieredStopAtLevel=1",)

_session = None


def spark_session(master: str | None = None, app_name: str = "kfmt", *, scheduler_only: bool = False):
    """The shared SparkSession (created on first use). `scheduler_only`: created for kfmt's tasks
    (kfmt.pipelines.runner), whose records never enter the JVM: its driver JVM gets
    SCHEDULER_JVM_OPTIONS. A session that exists already is returned as it is."""
    global _session
    if _session is not None:
        return _session
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    master = master or _site_spark_master()
    loopback = on_loopback(master)
    if loopback:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    check_master_reachable(master)
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

    conf = SparkConf().setAppName(app_name).setMaster(master)
    if loopback:  # executors on other machines must reach the driver: only here is 127.0.0.1 right
        conf.set("spark.driver.host", "127.0.0.1").set("spark.driver.bindAddress", "127.0.0.1")
    conf = (conf.set("spark.ui.enabled", "false")
            .set("spark.ui.showConsoleProgress", "false")
            .set("spark.sql.execution.arrow.pyspark.enabled", "true")
            .set("spark.python.worker.reuse", "true")
            .set("spark.driver.extraJavaOptions", " ".join(driver_java_options(scheduler_only)))
            .set("spark.executor.extraJavaOptions", f"-Dlog4j2.configurationFile={LOG4J_CONFIG}"))
    try:
        _launch_filtered_gateway(conf)
        _session = _create(SparkSession.builder.config(conf=conf), master)
    except EngineError:
        raise
    except Exception as err:
        raise EngineError(f"cannot start Spark on master {master}: {spark_error_line(err)}") from None
    if needs_worker_check(master):
        from kfmt.pipelines.worker_check import check_workers_import_kfmt

        try:
            check_workers_import_kfmt(_session)
        except BaseException:
            stop_session()
            raise
    return _session


def driver_java_options(scheduler_only: bool) -> list[str]:
    """The driver JVM's options (in local mode the executors' too: they run in the driver's JVM)."""
    return [f"-Dlog4j2.configurationFile={LOG4J_CONFIG}", *(SCHEDULER_JVM_OPTIONS if scheduler_only else ())]


def on_loopback(master: str) -> bool:
    """Whether every executor of `master` runs on this machine: local[...], or a standalone master
    on a loopback address (the test cluster). Then the driver binds 127.0.0.1 only; for any other
    master (a remote standalone master, yarn, k8s://) Spark's own choice (SPARK_LOCAL_IP, or the
    host's address) stands, because executors elsewhere must connect back to the driver."""
    if master.startswith("local"):
        return True
    if not master.startswith("spark://"):
        return False
    hosts = [a.strip().rpartition(":")[0].strip("[]") for a in master[len("spark://"):].split(",")]
    return all(h in ("127.0.0.1", "localhost", "::1") for h in hosts)


def needs_worker_check(master: str, env: dict | None = None) -> bool:
    """Whether Spark's Python workers may lack kfmt: on a cluster (their machines' interpreter), or
    locally when PYSPARK_PYTHON names another interpreter than this one. Asking costs one tiny job."""
    env = os.environ if env is None else env
    if not master.startswith("local"):
        return True
    return os.path.abspath(env.get("PYSPARK_PYTHON", sys.executable)) != os.path.abspath(sys.executable)


def _create(builder, master: str):
    """builder.getOrCreate(), bounded for a standalone master: Spark's context waits for the master
    to register the application (StandaloneSchedulerBackend), and a peer that accepts connections
    without answering as a master holds it for three 20 s attempts. The call is left running in a
    daemon thread after REGISTRATION_TIMEOUT_S (or KFMT_SPARK_REGISTRATION_WAIT); the JVM goes when
    this process exits."""
    if not master.startswith("spark://"):
        return builder.getOrCreate()
    outcome: list = []

    def create():
        try:
            outcome.append(builder.getOrCreate())
        except BaseException as err:  # handed to the waiting thread
            outcome.append(err)

    thread = threading.Thread(target=create, daemon=True, name="kfmt-spark-start")
    thread.start()
    try:
        wait_s = float(os.environ.get("KFMT_SPARK_REGISTRATION_WAIT", REGISTRATION_TIMEOUT_S))
    except ValueError:
        wait_s = REGISTRATION_TIMEOUT_S
    thread.join(wait_s)
    if not outcome:
        raise EngineError(f"cannot start Spark on master {master}: the application was not registered "
                          f"within {wait_s:g} s (is a Spark master listening there?)")
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    return outcome[0]


def stop_session() -> None:
    global _session
    if _session is not None:
        _session.stop()
        _session = None


def check_master_reachable(master: str) -> None:
    """For spark://host:port[,host:port...]: an EngineError unless one of the masters accepts a
    connection. Other masters (local, yarn, k8s) are not checked here."""
    if not master.startswith("spark://"):
        return
    reasons = []
    for address in master[len("spark://"):].split(","):
        host, _, port = address.strip().rpartition(":")
        try:
            with socket.create_connection((host or "127.0.0.1", int(port)), MASTER_CONNECT_TIMEOUT_S):
                return
        except ValueError:
            raise EngineError(f"{master}: not a Spark master URL (spark://HOST:PORT)") from None
        except ConnectionRefusedError:
            reasons.append("connection refused")
        except socket.timeout:
            reasons.append(f"no answer within {MASTER_CONNECT_TIMEOUT_S} s")
        except OSError as err:
            reasons.append((err.strerror or str(err)).lower())
    raise EngineError(f"cannot reach Spark master {master}: {', '.join(dict.fromkeys(reasons))}")


def _launch_filtered_gateway(conf) -> None:
    """Start the JVM as pyspark would, its stderr passed on line by line minus _JVM_NOISE."""
    from pyspark import SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ:
        return  # a JVM is running already (an earlier session, or pyspark's own shell)
    gateway = launch_gateway(conf, popen_kwargs={"stderr": subprocess.PIPE})
    process = getattr(gateway, "proc", None)
    if process is not None and process.stderr is not None:
        threading.Thread(target=_pass_stderr, args=(process.stderr,), daemon=True,
                         name="kfmt-jvm-stderr").start()
    SparkContext._gateway = gateway
    SparkContext._jvm = gateway.jvm


def _pass_stderr(stream) -> None:
    """To file descriptor 2, where the JVM wrote before (sys.stderr may be replaced, by a test's
    capture say). Never stops draining: a JVM blocked on a full stderr pipe would hang the job."""
    for line in iter(stream.readline, b""):
        if line.decode(errors="replace").startswith(_JVM_NOISE):
            continue
        try:
            os.write(2, line)
        except OSError:
            pass


def spark_error_line(err: BaseException) -> str:
    """One line out of a Spark error's long text: the innermost exception line that is not a stack
    frame, without Java class prefixes where a message follows."""
    text = str(err)
    lines = [line.strip() for line in text.replace("\\n", "\n").splitlines() if line.strip()]
    lines = [line.lstrip(": ") for line in lines if not line.startswith(("at ", "..."))]
    for line in lines:
        head, sep, message = line.partition(": ")
        if sep and head.rsplit(".", 1)[-1].endswith(("Exception", "Error")) and message:
            if not head.startswith("py4j") and "An error occurred while calling" not in line:
                return message
    return lines[0] if lines else type(err).__name__


def _site_spark_master() -> str:
    """KFMT_SPARK_MASTER when it names a Spark master, else local[*] (it may also say auto, pool or
    inprocess, which choose kfmt's engine, not Spark's: kfmt.pipelines.engine)."""
    from kfmt.pipelines.engine import choose_engine

    engine = choose_engine(None, 0)
    return engine.master if engine.engine == "spark" else "local[*]"
