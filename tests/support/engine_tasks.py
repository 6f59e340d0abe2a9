"""Task functions for the engine tests: top-level, so the worker pool can find them by name."""
from __future__ import annotations

import os
import signal
import time

from kfmt.errors import DataError


def fail_on_two(n: int) -> int:
    if n == 2:
        raise DataError("the CRC does not match", file="/logs/t-0/00000000000000000000.log", position=123,
                        offset=45)
    return n * 10


def die_on_one(n: int) -> int:
    if n == 1:
        os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(5)
    return n


def not_a_kfmt_error(n: int) -> int:
    raise ValueError(f"task {n} went wrong")


def pid_after(seconds: float) -> int:
    """Busy for `seconds` (CPU, as a real task), then the worker's process id."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass
    return os.getpid()


def sleep(seconds: float) -> float:
    time.sleep(seconds)
    return seconds
