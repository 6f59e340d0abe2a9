"""Whether a broker is running on a log directory, told the way Kafka keeps two brokers off one.

Kafka's LogManager.lockLogDirs takes a lock on the file `.lock` of each log directory at start-up
(kafka.utils.FileLock / org.apache.kafka.server.util.FileLock: FileChannel.tryLock, an exclusive
fcntl record lock on Linux) and holds it while the broker runs; a second broker on the directory
fails to start. The lock ends with the process, cleanly or not. So:

* `.lock` locked by another process: a broker runs there (its active segments are being appended to);
* `.lock` not locked, or absent: no broker runs there (stopped, or a copy of its disk);
* `.lock` unreadable (permissions): the clean-shutdown marker decides, the second signal. A broker
  writes `.kafka_cleanshutdown` when it stops cleanly and removes it once it has loaded its logs at
  start-up (LogManager, CleanShutdownFileHandler), so a marker says "stopped"; without one kfmt
  cannot tell, and takes the side that archives nothing half-written: running.

The lock is only looked at (fcntl F_GETLK), never taken: a broker starting at the same moment
must not fail to get it, and nothing in the source is created or changed. Object storage holds
copies, never a running broker's directory.
"""
from __future__ import annotations

import fcntl
import os
import struct
from dataclasses import dataclass

from kfmt.partition.live import maps_files
from kfmt.storage.store import Storage

LOCK_FILE = ".lock"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
# struct flock on Linux: short l_type, short l_whence, off_t l_start, off_t l_len, pid_t l_pid
# (padded to 32 bytes on 64-bit platforms)
_FLOCK = "hhqqi4x"


@dataclass(frozen=True)
class BrokerState:
    running: bool
    why: str  # one phrase, for the summary line and the report

    def to_json(self) -> dict:
        return {"running": self.running, "why": self.why}


def broker_state(storage: Storage, log_dir: str) -> BrokerState:
    """Whether a broker runs on `log_dir` (a log directory's path in `storage`)."""
    if not maps_files(storage):
        return BrokerState(False, f"{storage.url_of(log_dir)} is not on local disk (a copy: no broker runs there)")
    lock = os.path.join(log_dir, LOCK_FILE)
    marker = os.path.exists(os.path.join(log_dir, CLEAN_SHUTDOWN_FILE))
    stopped = "stopped cleanly" if marker else f"stopped without {CLEAN_SHUTDOWN_FILE}, or a copy"
    try:
        holder = lock_holder(lock)
    except FileNotFoundError:
        return BrokerState(False, f"no {LOCK_FILE} in {log_dir}: no broker runs there, {stopped}")
    except OSError as err:
        if marker:
            return BrokerState(False, f"{lock} unreadable ({err.strerror}), but {CLEAN_SHUTDOWN_FILE} "
                                      f"says the broker stopped cleanly")
        return BrokerState(True, f"{lock} unreadable ({err.strerror}) and no {CLEAN_SHUTDOWN_FILE}: "
                                 f"taken for a running broker")
    if holder is not None:
        return BrokerState(True, f"process {holder} holds the lock on {lock}")
    return BrokerState(False, f"no process holds the lock on {lock}: {stopped}")


def lock_holder(path: str) -> int | None:
    """The process id holding a lock on any byte of `path` (0 when it is in another pid namespace),
    or None when none does. Asks the kernel (F_GETLK) without taking the lock."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        query = struct.pack(_FLOCK, fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
        kind, _whence, _start, _length, pid = struct.unpack(_FLOCK, fcntl.fcntl(fd, fcntl.F_GETLK, query))
    finally:
        os.close(fd)
    return None if kind == fcntl.F_UNLCK else pid
