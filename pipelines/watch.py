"""Watching a Spark job kfmt runs: a progress bar from Spark's status tracker, and on a cluster the
job's cancellation when it has had no executor for KFMT_SPARK_EXECUTOR_WAIT seconds (none accepted
it, or all were lost), which Spark itself would wait for forever. Used by the runner's jobs and by
the worker check's probe (kfmt.pipelines.worker_check), so that both fail the same way, in one line.
"""
from __future__ import annotations

import os
import sys
import threading
import time
import uuid

from kfmt.errors import EngineError

#: seconds a cluster job may go without any executor before it is cancelled
EXECUTOR_WAIT_S = 45

GROUP_ID_DIGITS = 12  # hex digits of the random part of a job group's name


def progress_bar(items, description, enabled):
    if not enabled or not sys.stderr.isatty():
        return _Hidden(items)
    from tqdm import tqdm

    return tqdm(items, desc=description, unit="task", file=sys.stderr)


class _Hidden:
    """A progress bar that shows nothing, without importing tqdm (and the multiprocessing it imports:
    15 to 20 ms of every command's start)."""

    def __init__(self, items):
        self.items, self.n = items, 0

    def __iter__(self):
        return iter(self.items)

    def update(self, n: int = 1) -> None:
        self.n += n

    def refresh(self) -> None:
        pass

    def close(self) -> None:
        pass


def collect_watched(sc, rdd, total: int, description: str = "", progress: bool = False) -> list:
    """rdd.collect() as one job group, watched: a progress bar, and on a cluster an EngineError
    (one line) when the job has no executor for _executor_wait_s() (it would wait forever)."""
    group = f"kfmt-{uuid.uuid4().hex[:GROUP_ID_DIGITS]}"
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
    bar = progress_bar(range(total), description, enabled)
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


