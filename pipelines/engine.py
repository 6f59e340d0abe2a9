"""Which engine runs a command's tasks: this process, a pool of local worker processes, or Spark.

`--master` takes, in order of precedence: the command line, then the KFMT_SPARK_MASTER environment
variable (a site default), then `auto`. Its values:

* `auto`: choose by the size of the input (`choose_engine`). Below POOL_THRESHOLD_BYTES the work
  runs in this process (starting worker processes would cost more than a tenth of the job); below
  spark_threshold_bytes() (2 GB per core) on a pool of local worker processes, one per core
  (kfmt.pipelines.pool), or on threads of this process, one per core, when the command says its
  work runs in kernels that release the GIL (`threads_suffice`); above it on embedded Spark
  `local[*]`. Both numbers were measured on the project's 2-core machine (docs/performance.md,
  "Which engine runs a job").
* `inprocess`: the tasks one after another in this process.
* `threads`, `local-threads[N]` (`local-threads[*]`: one per core): N threads of this process. They
  run tasks in parallel only while the tasks are in code that releases the GIL (kfmt's kernels,
  I/O, hashing, codecs); what runs in Python takes turns.
* `pool`, `local-pool[N]` (`local-pool[*]`: one per core): a pool of N local worker processes.
* anything else is a Spark master URL and keeps its Spark meaning: `local`, `local[N]`,
  `local[*]`, `spark://...`, `yarn`, `k8s://...`.

Storage that lives in this process (memory://) can only be read and written here, so `auto` runs
such jobs in process whatever their size.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Callable

from kfmt.errors import UsageError

AUTO = "auto"
INPROCESS = "inprocess"
THREADS = "threads"
POOL = "pool"
MASTER_ENV = "KFMT_SPARK_MASTER"

# Measured on the project's 2-core machine (docs/performance.md, "Which engine runs a job"): a job
# reads 30-50 MB/s per core (CPU time; upgrade of v1 and export the slow end, reindex the fast one).
# Spawned pool workers cost about 0.5 s each before their first task (they start in parallel); in
# process a job of B bytes takes B/r, on a pool of n workers about 0.5 s + B/(n*r): the pool pays off
# from about 2*0.5 s*r, some 40-60 MB.
POOL_THRESHOLD_BYTES = 64 << 20
# Spark's embedded session costs about 5 s (4-6 s on an idle machine) before its first task, and its
# tasks are no faster per core than the pool's. That start is at most a tenth of the job when the job
# runs 50 s or more on n cores: B >= 10 * 5 s * n * ~40 MB/s, about 2 GB per core.
SPARK_THRESHOLD_BYTES_PER_CORE = 2 << 30
# Threads start at no cost, so between the two thresholds they beat the pool for work that releases
# the GIL: the upgrade of 537 MB of uncompressed v1 (two partitions, 1.3M messages) spends about 85 %
# of its task time in kernels, pwrite and SHA-256 with the GIL released; on the pool its two workers
# cost 1 s of CPU to start, about as much as the conversion itself (docs/performance.md).


def spark_threshold_bytes(workers: int | None = None) -> int:
    """The input size from which `auto` starts Spark: it grows with the cores the pool would use."""
    return SPARK_THRESHOLD_BYTES_PER_CORE * (workers or cores())


_LOCAL_POOL = re.compile(r"local-pool(?:\[(\*|\d+)\])?")
_LOCAL_THREADS = re.compile(r"local-threads(?:\[(\*|\d+)\])?")
_LOCAL_SPARK = re.compile(r"local(?:\[(\*|\d+)(?:,\s*\d+)?\])?")


@dataclass(frozen=True)
class Engine:
    """The engine chosen for one command, and why (recorded in kfmt-report.json as "engine")."""

    engine: str  # "inprocess" | "threads" | "pool" | "spark"
    master: str  # what it was asked as: "auto", "inprocess", "threads", "pool", "local-pool[4]", a Spark URL
    workers: int | None  # threads, processes (pool), local cores (Spark local), None for a Spark cluster
    why: str

    def to_json(self) -> dict:
        return {"engine": self.engine, "master": self.master, "workers": self.workers, "why": self.why}

    def describe(self) -> str:
        """For the summary line: 'on a pool of 2 workers: input 120 MB below the 4 GB threshold for Spark'."""
        if self.engine == "pool":
            how = f"on a pool of {self.workers} worker{'s' if self.workers != 1 else ''}"
        elif self.engine == THREADS:
            how = f"on {self.workers} thread{'s' if self.workers != 1 else ''} in process"
        elif self.engine == "spark":
            how = f"on Spark {self.spark_master}"
        else:
            how = "in process"
        return f"{how}: {self.why}"

    @property
    def spark_master(self) -> str:
        return "local[*]" if self.master == AUTO else self.master


def cores() -> int:
    """The cores this process may run on (its CPU affinity, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def requested_master(master: str | None, env: dict | None = None) -> str:
    """--master if given, else KFMT_SPARK_MASTER if set (and not empty), else 'auto'."""
    if master:
        return master.strip()
    value = (os.environ if env is None else env).get(MASTER_ENV, "").strip()
    return value or AUTO


def choose_engine(master: str | None, input_bytes: int, *, process_local: bool = False,
                  threads_suffice: Callable[[], bool] | None = None, env: dict | None = None,
                  pool_threshold: int = POOL_THRESHOLD_BYTES, spark_threshold: int | None = None) -> Engine:
    """The engine for a job reading `input_bytes`. `process_local`: its storage lives in this process.
    `threads_suffice`: whether the job's work runs in code that releases the GIL, so that `auto` takes
    threads of this process instead of a pool of worker processes; asked only when that decides."""
    asked = requested_master(master, env)
    source = "--master" if master else f"{MASTER_ENV}"
    if asked == AUTO:
        return _auto(input_bytes, process_local, threads_suffice, pool_threshold,
                     spark_threshold or spark_threshold_bytes())
    if asked == INPROCESS:
        return Engine("inprocess", asked, 1, f"{source} {asked}")
    if asked == THREADS or _LOCAL_THREADS.fullmatch(asked):
        m = _LOCAL_THREADS.fullmatch(asked)
        n = int(m[1]) if m and m[1] not in (None, "*") else cores()
        if n < 1:
            raise UsageError(f"{source} {asked}: threads need at least one")
        return Engine(THREADS, asked, n, f"{source} {asked}")
    if asked == POOL or _LOCAL_POOL.fullmatch(asked):
        m = _LOCAL_POOL.fullmatch(asked)
        n = int(m[1]) if m and m[1] not in (None, "*") else cores()
        if n < 1:
            raise UsageError(f"{source} {asked}: a pool needs at least one worker")
        return Engine("pool", asked, n, f"{source} {asked}")
    m = _LOCAL_SPARK.fullmatch(asked)
    workers = (cores() if not m[1] or m[1] == "*" else int(m[1])) if m else None
    if m and not m[1]:
        workers = 1  # Spark's "local" is one thread
    return Engine("spark", asked, workers, f"{source} {asked}")


def _auto(input_bytes: int, process_local: bool, threads_suffice: Callable[[], bool] | None,
          pool_threshold: int, spark_threshold: int) -> Engine:
    size = human_bytes(input_bytes)
    if process_local:
        return Engine("inprocess", AUTO, 1, "memory:// storage lives in this process")
    if input_bytes < pool_threshold:
        return Engine("inprocess", AUTO, 1, f"input {size} below the {human_bytes(pool_threshold)} "
                                            f"threshold for a worker pool")
    if input_bytes < spark_threshold and threads_suffice is not None and threads_suffice():
        return Engine(THREADS, AUTO, cores(), f"input {size} below the {human_bytes(spark_threshold)} "
                                              f"threshold for Spark, its work in kernels that release the "
                                              f"GIL: threads, with no worker processes to start")
    if input_bytes < spark_threshold:
        return Engine("pool", AUTO, cores(), f"input {size} below the {human_bytes(spark_threshold)} "
                                             f"threshold for Spark")
    return Engine("spark", AUTO, cores(), f"input {size} at or above the {human_bytes(spark_threshold)} "
                                          f"threshold for Spark")


def is_process_local(*urls: str) -> bool:
    """Whether any of these storage URLs lives in this process only (fsspec's memory://)."""
    return any(str(u).startswith("memory://") for u in urls)


def human_bytes(n: int) -> str:
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= scale:
            value = n / scale
            return f"{value:.0f} {unit}" if value >= 10 or value == int(value) else f"{value:.1f} {unit}"
    return f"{n} bytes"


def engine_note(report: dict) -> str:
    """The end of a summary line: ', on a pool of 2 workers: input 120 MB below the 4 GB threshold
    for Spark' (nothing for a report without an engine)."""
    engine = report.get("engine")
    return f", {Engine(**engine).describe()}" if engine else ""
