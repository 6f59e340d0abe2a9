"""Running kfmt's units of work (a segment, a partition, a planned output segment) in parallel.

`run_tasks(fn, tasks)` maps a picklable function over picklable task descriptions and returns the
results in task order, on the engine kfmt.pipelines.engine chose for the command: in this process
one after another (no JVM, no workers), on threads of this process or a pool of local worker
processes (kfmt.pipelines.pool), or on Spark, one Spark task per unit. Tasks open storage
themselves from StorageSpec values and write through a StagedOutput's picklable target; results
stay small (file records, counts, digests).

Errors keep their meaning across the executor boundary: a kfmt error raised by a task (bad data, a
usage problem) is caught there and raised again on the driver as the same kind of error, so the CLI
still prints one line and exits 65 or 2; anything else is a failure of the job. The pool and Spark
carry errors back the same way (TaskFailure), so an error means the same whatever ran the task.

A job on a cluster that has no executors (none accepted it, or all were lost) would wait forever:
the watcher (kfmt.pipelines.watch) cancels it after KFMT_SPARK_EXECUTOR_WAIT seconds without one.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable, Sequence

from kfmt.errors import EXIT_USAGE, DataError, EngineError, KfmtError, UsageError
from kfmt.pipelines.engine import INPROCESS, THREADS, Engine, choose_engine
from kfmt.pipelines.task_hold import hold_directory
from kfmt.pipelines.watch import collect_watched
from kfmt.pipelines.watch import progress_bar as _progress
from kfmt.storage.retries import retry_log

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
    Spark's cloudpickle takes it as it is). Returns (index, result, the storage retries logged while
    it ran): a worker process logs them quietly, the driver says them (kfmt.storage.retries)."""

    fn: Callable
    hold: str | None = None  # a test's barrier directory (kfmt.pipelines.task_hold), None in production
    driver: int = field(default_factory=os.getpid)

    def __call__(self, indexed):
        index, task = indexed
        if os.getpid() != self.driver:
            retry_log.echo = False
        mark = retry_log.mark()
        try:
            result = self.fn(task)
        except KfmtError as err:
            return index, TaskFailure.of(err), retry_log.since(mark)
        if self.hold is not None:
            from kfmt.pipelines.task_hold import hold

            hold(self.hold, index)
        return index, result, retry_log.since(mark)


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
        results = _run_in_process(call, tasks, description, progress)
    elif engine.engine == THREADS:
        from kfmt.pipelines.pool import run_on_threads

        results = run_on_threads(call, list(enumerate(tasks)), engine.workers,
                                 _progress(range(len(tasks)), description, progress), _failed)
    elif engine.engine == "pool":
        from kfmt.pipelines.pool import run_on_pool

        results = run_on_pool(call, list(enumerate(tasks)), engine.workers, description,
                              _progress(range(len(tasks)), description, progress), _failed)
    else:
        results = _run_on_spark(call, list(tasks), engine.spark_master, description, progress)
    results = sorted(results, key=lambda r: r[0])
    for _index, _result, retries in results:
        retry_log.adopt(retries)
    ordered = [result for _index, result, _retries in results]
    for result in ordered:
        if isinstance(result, TaskFailure):
            result.raise_again()
    return ordered


def _failed(outcome) -> bool:
    """Whether a task's (index, result, retries) is a runtime failure (storage gone, full, refusing):
    the tasks after it would meet it too, each after its own retries, so they are not started. Bad
    data in one task says nothing about the others: they run on (an archive keeps their uploads for
    the next run)."""
    return isinstance(outcome[1], TaskFailure) and outcome[1].kind == "failure"


def _run_in_process(call, tasks, description: str, progress: bool) -> list:
    results = []
    for indexed in enumerate(_progress(tasks, description, progress)):
        results.append(call(indexed))
        if _failed(results[-1]):
            break
    return results


# an unresolved `auto` (a caller that did not measure its input) lands between the thresholds: the pool
_UNKNOWN_SIZE = (256 << 20)


def _run_on_spark(call, tasks, master, description, progress):
    from kfmt.pipelines.session import spark_session

    sc = spark_session(master, scheduler_only=True).sparkContext
    rdd = sc.parallelize(list(enumerate(tasks)), numSlices=len(tasks)).map(call)
    try:
        return collect_watched(sc, rdd, len(tasks), description, progress)
    except EngineError:
        raise
    except Exception as err:  # a failure that is not a kfmt error: report it in one line
        raise EngineError(f"the Spark job failed: {_root_cause(err)}") from None


def _root_cause(err: Exception) -> str:
    """The Python exception line out of a Spark error's long text."""
    text = str(err)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in reversed(lines):
        if line.split(":", 1)[0].endswith(("Error", "Exception")) and not line.startswith(("org.", "java.", "py4j")):
            return line
    return lines[0] if lines else type(err).__name__
