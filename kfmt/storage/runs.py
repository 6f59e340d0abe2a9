"""Which kfmt run writes a destination, and whether it is still running: every run has an id
(`new_run_id`) and leaves an owner record (pid, host, start) in what it stages, so that a later run
into the same destination can tell a live writer (refused: `another_run`) from the leftovers of one
that died on this machine (removed). kfmt.storage.staging, kfmt.storage.append_staging and the
archive's destination share these rules."""
from __future__ import annotations

import os
import secrets
import socket
import time

from kfmt.errors import UsageError


def new_run_id() -> str:
    """32 hex digits, ordered by start time: 16 of nanoseconds, 16 random."""
    return f"{time.time_ns():016x}{secrets.token_hex(8)}"


#: runs of this process that have ended (failed): their claims count as dead even though the process
#: lives on (the Python API), also when storage would not let them be removed or marked
_ended_runs: set[str] = set()


def run_ended(run: str) -> None:
    _ended_runs.add(run)


def owner_alive(owner: dict) -> bool:
    """Whether the run that wrote `owner` may still be running. A run on another machine cannot be
    checked, so it counts as alive (the user removes its leftovers)."""
    if owner.get("run") in _ended_runs:
        return False
    if owner.get("host") != socket.gethostname():
        return True
    pid = owner.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a killed process nobody has reaped yet still answers kill(0): a zombie is dead
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True


def another_run(url: str, owner: dict) -> UsageError:
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(owner.get("started_ms", 0) / 1000))
    return UsageError(f"{url}: another kfmt run (pid {owner.get('pid')} on {owner.get('host')}, "
                      f"started {started}) is writing this destination; if it is gone, delete its "
                      f"leftovers and run again")


def owner_record(run: str, url: str, **more) -> dict:
    """What a run leaves in what it stages, for `owner_alive` and `another_run` to read: its id, its
    process and host, when it started and where it writes (and what `more` adds)."""
    return {"run": run, "pid": os.getpid(), "host": socket.gethostname(),
            "started_ms": time.time_ns() // 1_000_000, "destination": url, **more}
