"""Running kfmt's units of work (a segment, a partition, a planned output segment) in parallel.

`run_tasks(fn, tasks)` maps a picklable function over picklable task descriptions and returns the
results in task order, on the engine kfmt.pipelines.engine chose for the command: in this process
one after another (no JVM, no workers), on a pool of local worker processes (kfmt.pipelines.pool),
or on Spark, one Spark task per unit. Tasks open storage themselves from StorageSpec values and
write through a StagedOutput's picklable target; results stay small (file records, counts,
digests).

Errors keep their meaning across the executor boundary: a kfmt error raised by a task (bad data, a
usage problem) is caught there and raised again on the driver as the same kind of error, so the CLI
still prints one line and exits 65 or 2; anything else is a failure of the job. The pool and Spark
carry errors back the same way (TaskFailure), so an error means the same whatever ran the task.

A job on a cluster that has no executors (none accepted it, or all were lost) would wait forever:
the watcher cancels it after KFMT_SPARK_EXECUTOR_WAIT seconds without one (EXECUTOR_WAIT_S).
"""
from __future__ import annotations

import os
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Callable, Sequence

from kfmt.errors import EXIT_USAGE, DataError, EngineError, KfmtError, UsageError
from kfmt.pipelines.engine import INPROCESS, Engine, choose_engine
from kfmt.pipelines.task_hold import hold_directory

#: seconds a cluster job may go without any executor before it is cancelled
EXECUTOR_WAIT_S = 45


@dataclass(frozen=True)
class TaskFailure:
    """A kfmt error raised by a task, carried back to the driver."""

    kind: str  # "data" | "usage" | "failure"
    message: str
    file: str | None = None
    position: int | None = None
    offset: int | None = None

    @classmethod
    def of(cls, err: KfmtError) -> "TaskFailure":
        if isinstance(err, DataError):
            return cls("data", err.message, err.file, err.position, err.offset)
        # by exit code: a missing bucket (StorageNotFound) is a usage error without being a UsageError
        return cls("usage" if err.exit_code == EXIT_USAGE else "failure", str(err))

    def raise_again(self):
        if self.kind == "data":
            raise DataError(self.message, file=self.file, position=self.position, offset=self.offset)
        raise (UsageError if self.kind == "usage" else KfmtError)(self.message)


@dataclass(frozen=True)
class _Guarded:
    """fn(task) with a kfmt error turned into a TaskFailure (picklable by reference for the pool;
    Spark's cloudpickle takes it as it is)."""

    fn: Callable
    hold: str | None = None  # a test's barrier directory (kfmt.pipelines.task_hold), None in production

    def __call__(self, indexed):
        index, task = indexed
        try:
            result = self.fn(task)
        except KfmtError as err:
            return index, TaskFailure.of(err)
        if self.hold is not None:
            from kfmt.pipelines.task_hold import hold

            hold(self.hold, index)
        return index, result


def run_tasks(fn: Callable, tasks: Sequence, *, master: "str | Engine | None" = None, description: str = "",
              progress: bool = True) -> list:
    """fn(task) for every task, in parallel; results in task order. Raises the first task's kfmt error.

    `master`: the Engine the command chose (kfmt.pipelines.engine.choose_engine), or a --master
    value; `auto` (or nothing) without a known input size runs on the pool."""
    if not tasks:
        return []
    engine = master if isinstance(master, Engine) else choose_engine(master, _UNKNOWN_SIZE)
    call = _Guarded(fn, hold_directory(description))
    if engine.engine == INPROCESS:
        results = [call((i, t)) for i, t in enumerate(_progress(tasks, description, progress))]
    elif engine.engine == "pool":
        from kfmt.pipelines.pool import run_on_pool

        results = run_on_pool(call, list(enumerate(tasks)), engine.workers, description,
                              _progress(range(len(tasks)), description, progress))
    else:
        results = _run_on_spark(call, list(tasks), engine.spark_master, description, progress)
    ordered = [r for _, r in sorted(results, key=lambda r: r[0])]
    for result in ordered:
        if isinstance(result, TaskFailure):
            result.raise_again()
    return ordered


# an unresolved `auto` (a caller that did not measure its input) lands between the thresholds: the pool
_UNKNOWN_SIZE = (256 << 20)


def _progress(items, description, enabled):
    from tqdm import tqdm

    return tqdm(items, desc=description, unit="task", file=sys.stderr,
                disable=not enabled or not sys.stderr.isatty())


def _run_on_spark(call, tasks, master, description, progress):
    from kfmt.pipelines.session import spark_session

    sc = spark_session(master).sparkContext
    rdd = sc.parallelize(list(enumerate(tasks)), numSlices=len(tasks)).map(call)
    try:
        return collect_watched(sc, rdd, len(tasks), description, progress)
    except EngineError:
        raise
    except Exception as err:  # a failure that is not a kfmt error: report it in one line
        raise EngineError(f"the Spark job failed: {_root_cause(err)}") from None


def collect_watched(sc, rdd, total: int, description: str = "", progress: bool = False) -> list:
    """rdd.collect() as one job group, watched: a progress bar, and on a cluster an EngineError
    (one line) when the job has no executor for _executor_wait_s() (it would wait forever)."""
    group = f"kfmt-{uuid.uuid4().hex[:12]}"
    sc.setJobGroup(group, description or "kfmt", interruptOnCancel=True)
    done = threading.Event()
    stalled: list[str] = []  # why the watcher cancelled the job, if it did
    watcher = threading.Thread(target=_watch, args=(sc, group, total, description, progress, done,
                                                    stalled), daemon=True)
    watcher.start()
    try:
        return rdd.collect()
    except Exception:
        if stalled:
            raise EngineError(stalled[0]) from None
        raise
    finally:
        done.set()
        watcher.join()


def _executor_wait_s() -> float:
    try:
        return float(os.environ.get("KFMT_SPARK_EXECUTOR_WAIT", EXECUTOR_WAIT_S))
    except ValueError:
        return EXECUTOR_WAIT_S


def _executor_count(sc) -> int | None:
    """Executors registered with the driver (the driver itself not counted); None if unknown."""
    try:
        return len(sc._jsc.sc().statusTracker().getExecutorInfos()) - 1
    except Exception:
        return None


def _watch(sc, group, total, description, enabled, done, stalled):
    """Advance a progress bar from Spark's status tracker while the job runs; on a cluster, cancel
    the job when it has had no executor for _executor_wait_s()."""
    bar = _progress(range(total), description, enabled)
    tracker = sc.statusTracker()
    cluster = not sc.master.startswith("local")
    wait_s, executor_seen, most = _executor_wait_s(), time.monotonic(), 0
    while not done.wait(0.5):
        if cluster:
            count = _executor_count(sc)
            most = max(most, count or 0)
            if count is None or count > 0:
                executor_seen = time.monotonic()
            elif time.monotonic() - executor_seen > wait_s:
                stalled.append(_stalled_message(sc.master, most, wait_s))
                sc.cancelJobGroup(group)
                break
        finished = 0
        for job_id in tracker.getJobIdsForGroup(group):
            job = tracker.getJobInfo(job_id)
            for stage_id in (job.stageIds if job else []):
                stage = tracker.getStageInfo(stage_id)
                if stage:
                    finished += stage.numCompletedTasks
        bar.n = min(finished, total)
        bar.refresh()
    bar.n = total
    bar.close()


def _stalled_message(master: str, executors_seen: int, wait_s: float) -> str:
    if executors_seen:
        lost = "its executor" if executors_seen == 1 else f"all {executors_seen} of its executors"
        return (f"the Spark job cannot finish: it lost {lost} on master {master} and none came back "
                f"within {wait_s:g} s; job cancelled")
    return f"no Spark executor on master {master} accepted the job within {wait_s:g} s; job cancelled"


def _root_cause(err: Exception) -> str:
    """The Python exception line out of a Spark error's long text."""
    text = str(err)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in reversed(lines):
        if line.split(":", 1)[0].endswith(("Error", "Exception")) and not line.startswith(("org.", "java.", "py4j")):
            return line
    return lines[0] if lines else type(err).__name__
