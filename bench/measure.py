"""Timing: wall and CPU seconds of a call or of a child process, medians over repetitions.

Rates are given per CPU second ("per core") as well as per wall second: on a shared machine the wall
clock also counts the time other processes held the CPU, while a process's CPU time counts its own
work only. Contenders are measured in turn within each repetition, so what load there is falls on
all of them alike.
"""
from __future__ import annotations

import gc
import os
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass


@dataclass
class Sample:
    wall: float
    cpu: float
    max_rss: int = 0  # bytes; child processes only
    output: str = ""

    def rate(self, amount: float, per: str = "cpu") -> float:
        seconds = self.cpu if per == "cpu" else self.wall
        return amount / seconds if seconds > 0 else float("inf")


def timed(fn) -> Sample:
    """One call's times, with the cyclic garbage collector off during it (as timeit does): a
    collection's cost depends on everything else alive in the process, not on the code measured."""
    gc.collect()
    gc.disable()
    try:
        wall, cpu = time.perf_counter(), time.process_time()
        fn()
        return Sample(time.perf_counter() - wall, time.process_time() - cpu)
    finally:
        gc.enable()


def child(argv: list[str], env: dict | None = None, cwd: str | None = None) -> Sample:
    """Run a command: its wall time and CPU time (user + system), from the rusage of exactly this
    child (os.wait4 on its pid). Its max_rss is only an upper bound (Linux counts the parent's
    memory at fork time in it): bench/ops.py reports the operation's own peak."""
    with tempfile.TemporaryFile() as err:
        wall = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, env=env, cwd=cwd)
        out = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - wall
        proc.stdout.close()
        code = os.waitstatus_to_exitcode(status)
        if code:
            err.seek(0)
            raise RuntimeError(f"{' '.join(argv)} failed ({code}):\n"
                               f"{err.read().decode(errors='replace')[-3000:]}")
    return Sample(elapsed, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024,
                  out.decode(errors="replace"))


def median(samples: list[Sample]) -> Sample:
    return Sample(statistics.median(s.wall for s in samples), statistics.median(s.cpu for s in samples),
                  max(s.max_rss for s in samples), samples[-1].output)


def load_average() -> tuple[float, float, float]:
    return os.getloadavg()
