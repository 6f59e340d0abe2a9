"""A test-only hook that holds a job's tasks at a file barrier, so that a test can kill a task's
process at a known point (tests/pipelines/test_cluster_failures.py).

KFMT_TEST_HOLD_TASKS=DIR holds the jobs that have a directory DIR/JOB, JOB being a job's description
as run_tasks gets it (`export`, `upgrade`, `resegment`, ...). The driver looks when it starts a job
and puts DIR/JOB into the task callable, so nothing has to reach the executors' environment. Each
attempt of each task of a held job, once its work is done (its files are written in staging) and
before it returns its result, writes `DIR/JOB/attempt-<task index>-<pid>` and then waits, at most
HOLD_LIMIT_S, until `DIR/JOB/release` exists.
The pid is that of the Python process running the task (on Spark, the executor's Python worker):
killing it loses the task after its files were written, which is the hardest case for a retry.

Harmless in production: without the variable (or for other jobs) it costs one dictionary lookup per
job on the driver and nothing in the tasks.
"""
from __future__ import annotations

import os
import time

HOLD_ENV = "KFMT_TEST_HOLD_TASKS"
RELEASE = "release"
#: a held task goes on by itself after this long, so that a broken test cannot hang a job forever
HOLD_LIMIT_S = 120


def hold_directory(description: str, env: dict | None = None) -> str | None:
    """The barrier directory for the job `description`, or None (the usual case)."""
    root = (os.environ if env is None else env).get(HOLD_ENV, "")
    if not root or not description or "/" in description:
        return None
    directory = os.path.join(root, description)
    return directory if os.path.isdir(directory) else None


def hold(directory: str, index: int) -> None:
    """Record this attempt, then wait for the release file (or HOLD_LIMIT_S)."""
    marker = os.path.join(directory, f"attempt-{index}-{os.getpid()}")
    with open(marker + ".tmp", "w") as f:
        f.write(str(time.time()))
    os.replace(marker + ".tmp", marker)  # whole, or not there: the test polls for it
    release = os.path.join(directory, RELEASE)
    deadline = time.monotonic() + HOLD_LIMIT_S
    while not os.path.exists(release) and time.monotonic() < deadline:
        time.sleep(0.05)
