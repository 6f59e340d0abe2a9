"""Retries of storage requests: bounded, and every one said.

A remote store fails now and then in ways that a second try mends: a connection reset, a 500 or a
503 SlowDown, a reply cut short, a server silent for a while. kfmt gives every request at most
ATTEMPTS attempts, in one layer each (docs/reliability.md, "Faults under load"):

* an S3 request is retried by botocore's "standard" retry mode (connection errors, timeouts, 5xx
  replies and throttling codes such as SlowDown, with exponential backoff and jitter), set to
  ATTEMPTS attempts in all (plugins/storage/fsspec_store.py; s3fs's own loop around it is cut to one
  attempt, so the two never multiply);
* the body of an object being read arrives after botocore has returned the reply, so botocore cannot
  retry a body cut short or stalled: kfmt's read does (`retried`), within the same bound.

Each retry is one line: a `kfmt: warning:` on stderr (a KfmtWarning in the Python API) and an
entry of this process's retry log, which the next report takes (`take`, kfmt.transforms.report; the
command line starts each run with an empty one). A worker process (the pool, Spark) logs quietly;
the task runner brings its entries back to the driver (`since`, `adopt`), which says them there.
"""
from __future__ import annotations

import itertools
import os
import threading
import time
import warnings
from dataclasses import dataclass
from typing import Callable

from kfmt.errors import KfmtWarning

#: every request to a remote store: at most this many attempts (the first one included)
ATTEMPTS = 3
#: kfmt's own waits before the 2nd, 3rd... attempt of a read (botocore waits by its own backoff)
BACKOFF_S = (0.2, 0.8, 2.0)


@dataclass(frozen=True)
class Retry:
    """One retry, as logged: `process` and `number` identify it across the task boundary."""

    process: int
    number: int
    line: str


class _RetryLog:
    def __init__(self):
        self._lock = threading.Lock()
        self._entries: list[Retry] = []
        self._known: set[tuple[int, int]] = set()
        self._numbers = itertools.count(1)
        self._taken = 0
        self.echo = True  # said where it happens (off in worker processes)
        #: how a retry is said: a KfmtWarning, unless the command line says it directly (a warning
        #: raised inside a block that records warnings, as some tasks do, would be lost with it)
        self.say: Callable[[str], None] = _warn

    def add(self, line: str) -> None:
        with self._lock:
            entry = Retry(os.getpid(), next(self._numbers), line)
            self._append(entry)
        if self.echo:
            self.say(line)

    def _append(self, entry: Retry) -> bool:
        key = (entry.process, entry.number)
        if key in self._known:
            return False
        self._known.add(key)
        self._entries.append(entry)
        return True

    def mark(self) -> int:
        with self._lock:
            return len(self._entries)

    def since(self, mark: int) -> list[Retry]:
        with self._lock:
            return self._entries[mark:]

    def adopt(self, entries: list[Retry]) -> None:
        """Entries a task brought back from a worker: logged here (and said) unless known already."""
        with self._lock:
            new = [e for e in entries if self._append(e)]
        if self.echo:
            for entry in new:
                self.say(entry.line)

    def take(self) -> list[str]:
        """The lines logged since the last take (a report lists its run's retries)."""
        with self._lock:
            lines = [e.line for e in self._entries[self._taken:]]
            self._taken = len(self._entries)
            return lines


def _warn(line: str) -> None:
    warnings.warn(line, KfmtWarning, stacklevel=3)


retry_log = _RetryLog()


def retried(call: Callable, transient: Callable[[BaseException], str | None], where: str, what: str):
    """call() with up to ATTEMPTS attempts while it fails in a way `transient` names (it returns the
    cause as a message says it, or None for a failure not to retry); each retry logged."""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return call()
        except Exception as err:
            cause = transient(err)
            if cause is None or attempt == ATTEMPTS:
                raise
            retry_log.add(retry_line(where, what, cause, attempt + 1))
            time.sleep(BACKOFF_S[min(attempt - 1, len(BACKOFF_S) - 1)])


def retry_line(where: str, what: str, cause: str, attempt: int, attempts: int = ATTEMPTS) -> str:
    return f"{where}: {what} failed ({cause}); retrying, attempt {attempt} of {attempts}"
