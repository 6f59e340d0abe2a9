"""One command run as a user runs it, measured from outside: wall time, exit code, and the peak RSS of
the largest process in its tree.

The peak comes from two sources, the larger wins:
* the kernel's own high-water mark: `os.wait4` on the command returns the largest `ru_maxrss` of the
  command and of every descendant it waited for (Linux keeps the maximum, not a sum). It also counts
  this process's memory at fork time, which is why bench/commands.py keeps itself small;
* psutil polling of the process tree (every POLL_SECONDS), which also sees processes nobody waits for,
  such as the JVM that pyspark starts, and gives the whole tree's sum as well.
"""
from __future__ import annotations

import os
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field

import psutil

POLL_SECONDS = 0.2


@dataclass
class Run:
    wall: float
    code: int
    peak_rss: int  # bytes, the largest single process
    peak_tree_rss: int  # bytes, the largest sum over the tree seen by polling
    error: str = ""
    # user + system CPU seconds of the command and the descendants it waited for (wait4's rusage):
    # on a loaded machine the wall clock counts other processes' turns, this does not
    cpu: float = 0.0
    extra: dict = field(default_factory=dict)


class TreePeak(threading.Thread):
    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.root = psutil.Process(pid)
        self.largest = self.total = 0
        self.done = threading.Event()

    def sample(self) -> None:
        try:
            procs = [self.root] + self.root.children(recursive=True)
        except psutil.Error:
            return
        sizes = []
        for proc in procs:
            try:
                sizes.append(proc.memory_info().rss)
            except psutil.Error:
                pass
        if sizes:
            self.largest = max(self.largest, max(sizes))
            self.total = max(self.total, sum(sizes))

    def run(self) -> None:
        while not self.done.wait(POLL_SECONDS):
            self.sample()

    def stop(self) -> None:
        self.done.set()
        self.join()


def run(argv: list[str], stdout=None, then: list[str] | None = None, ok=(0,), env=None) -> Run:
    """Run `argv` (stdout to `stdout`, default /dev/null); when it succeeds and `then` is given (e.g.
    ["sync"]), run that too inside the timed span."""
    with tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=stdout if stdout is not None else subprocess.DEVNULL,
                                stderr=err, env=env)
        poller = TreePeak(proc.pid)
        poller.sample()
        poller.start()
        _, status, usage = os.wait4(proc.pid, 0)
        poller.stop()
        code = proc.returncode = os.waitstatus_to_exitcode(status)
        if code in ok and then:
            subprocess.run(then, check=True)
        wall = time.perf_counter() - started
        message = ""
        if code not in ok:
            err.seek(0)
            lines = [line for line in err.read().decode(errors="replace").splitlines() if line.strip()]
            message = lines[-1] if lines else f"exit {code}"
    return Run(wall, code, max(usage.ru_maxrss * 1024, poller.largest), poller.total, message,
               cpu=usage.ru_utime + usage.ru_stime)


def shell(script: str, *args: str, then: list[str] | None = None) -> Run:
    """A small shell script (`$1`.. are `args`), e.g. the copy floor."""
    return run(["bash", "-c", script, "bash", *args], then=then)
