"""A pool of local worker processes running kfmt's tasks: the engine for inputs too small to pay for
Spark's start (kfmt.pipelines.engine), running the very task functions Spark runs. And the same tasks
on threads of this process (`run_on_threads`), for work that releases the GIL.

Why 'spawn': by the time a job starts, the driver has threads (numpy's BLAS pool, Arrow's pools,
tqdm's monitor); fork would copy their locks in whatever state they are, and a forkserver that
preloads kfmt would import numpy and start the same threads before forking. A spawned worker is a
fresh interpreter that imports what its tasks need (about half a second, paid once per worker: the
pool is kept for the rest of the process, as the Spark session is).

Workers ignore SIGINT: Ctrl-C reaches the driver (the terminal sends it to the whole process group),
which stops the workers and lets the CLI print its one line. A worker that dies (killed, out of
memory, a crash in a C extension) breaks the pool; the driver says so in one line and the next job
gets a new pool.
"""
from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
import types
from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager

from kfmt.errors import KfmtError
from kfmt.memory import keep_freed_memory

CONTEXT = "spawn"

_executor: ProcessPoolExecutor | None = None
_workers = 0


def _start_worker() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    keep_freed_memory()  # as the command line does for its own process (kfmt.memory)
    _end_with_the_driver()


def _end_with_the_driver() -> None:
    """A driver killed outright (SIGKILL, SIGTERM: no cleanup runs) would leave its idle workers
    waiting for tasks forever; each worker watches the driver's end of their pipe and exits with it."""
    parent = multiprocessing.parent_process()
    if parent is None:
        return

    def watch():
        parent.join()
        os._exit(1)

    threading.Thread(target=watch, name="kfmt-driver-watch", daemon=True).start()


def executor(workers: int) -> ProcessPoolExecutor:
    """The process's pool of `workers` processes (started lazily: workers spawn as tasks arrive)."""
    global _executor, _workers
    if _executor is not None and _workers != workers:
        shutdown()
    if _executor is None:
        _executor = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context(CONTEXT),
                                        initializer=_start_worker)
        _workers = workers
    return _executor


def shutdown(kill: bool = False) -> None:
    """Stop the pool (kill: without waiting for running tasks)."""
    global _executor, _workers
    pool, _executor, _workers = _executor, None, 0
    if pool is None:
        return
    processes = list((getattr(pool, "_processes", None) or {}).values())
    if kill:
        for p in processes:
            if p.is_alive():
                p.terminate()
    pool.shutdown(wait=not kill, cancel_futures=True)
    for p in processes if kill else ():
        p.join(timeout=5)


@contextmanager
def _main_hidden():
    """A spawned worker imports the parent's __main__ again (to find functions defined there), which
    runs a script without an `if __name__ == "__main__"` guard a second time, in every worker. kfmt's
    task functions never live in __main__, so workers are started without it."""
    main = sys.modules.get("__main__")
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = main


def run_on_pool(call, indexed_tasks: list, workers: int, description: str, bar, failed=None) -> list:
    """call((index, task)) for every item on the pool; what each call returned ((index, result,
    retries)), in task order. Once a call returns what `failed` says is a failure, the tasks not
    started are not started (their calls are left out).

    `call` and the tasks must pickle by reference/value (top-level functions, dataclasses)."""
    pool = executor(workers)
    name = description or "kfmt"
    # the processes serving this job, kept from a warm pool and spawned by submit: their exit codes
    # explain a broken pool
    processes = _processes(pool, [])
    try:
        with _main_hidden():  # workers spawn as tasks are submitted
            futures = []
            for item in indexed_tasks:  # on a warm pool a worker can die before the last submit
                futures.append(pool.submit(call, item))
                processes = _processes(pool, processes)
        return _results(futures, bar, failed)
    except BrokenProcessPool as err:
        processes = _processes(pool, processes)
        shutdown(kill=True)
        raise KfmtError(f"{name}: {_died(processes)}; nothing was published") from err
    except KeyboardInterrupt:
        shutdown(kill=True)
        raise
    except KfmtError:
        raise
    except Exception as err:  # a task raised something that is not a kfmt error (or did not pickle)
        shutdown(kill=True)
        raise KfmtError(f"{name}: a task on the worker pool failed: {type(err).__name__}: {err}") from err
    finally:
        bar.close()


def run_on_threads(call, indexed_tasks: list, workers: int, bar, failed=None) -> list:
    """call((index, task)) for every item on `workers` threads of this process; what each call
    returned ((index, result, retries)), in task order, stopping as run_on_pool does. No process to
    start, nothing to pickle: the engine for work that releases the GIL (kfmt.pipelines.engine). The
    first exception (Ctrl-C too) is raised once the running tasks are done: a thread cannot be
    stopped, but the tasks not started yet are not started."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kfmt-task") as threads:
        futures = [threads.submit(call, item) for item in indexed_tasks]
        try:
            return _results(futures, bar, failed)
        finally:
            for f in futures:  # after a failure (or Ctrl-C) the tasks not started are not started
                f.cancel()
            bar.close()


def _processes(pool, known: list) -> list:
    """The worker processes `known` plus those the pool holds now (a dead one is never dropped)."""
    current = list((getattr(pool, "_processes", None) or {}).values())
    return known + [p for p in current if all(p is not k for k in known)]


def _died(processes) -> str:
    for p in processes:  # the pool's own thread is terminating the others: let their codes settle
        p.join(timeout=5)
    codes = [p.exitcode for p in processes if p.exitcode not in (None, 0)]
    if not codes:
        return "a worker process of the pool ended abruptly"
    # shutdown() has just sent the other workers SIGTERM: the worker that broke the pool is the one
    # that ended some other way
    code = next((c for c in codes if c != -signal.SIGTERM), codes[0])
    if code < 0:
        try:
            how = f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            how = f"was killed by signal {-code}"
        hint = " (out of memory?)" if -code == signal.SIGKILL else ""
        return f"a worker process of the pool {how}{hint}"
    return f"a worker process of the pool exited with status {code}"


def _results(futures: list, bar, failed=None) -> list:
    """The futures' results in order, the progress bar moved as they finish; the first task that
    raised raises as soon as it is seen, without waiting for the others. A result `failed` names
    (a runtime failure a task reported) stops the tasks not started yet: nothing will be published,
    and through a storage outage each would spend its whole retry bound first."""
    pending = set(futures)
    while pending:
        done, pending = wait(pending, timeout=0.5, return_when=FIRST_EXCEPTION)
        bar.update(len(done))
        if any(f.exception() is not None for f in done):
            break
        if failed is not None and any(failed(f.result()) for f in done):
            for f in pending:
                f.cancel()
            break
    return [f.result() for f in futures if not f.cancelled()]
