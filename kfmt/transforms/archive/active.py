"""Whether a run of `kfmt archive` takes each partition's active (last) segment (docs/archive.md).

A running broker appends to its active segments: a run leaves them for the next one, which finds
them rolled (or takes them with --include-active, up to their last complete batch). On a stopped
broker's disk, a copy of it, or object storage, the last segment is just the partition's newest
data and is archived like any other. kfmt.partition.broker tells which, the way Kafka keeps two
brokers off one directory; `--include-active` / `--exclude-active` decide instead.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

from kfmt.errors import KfmtError, KfmtWarning
from kfmt.partition.broker import broker_state
from kfmt.partition.layout import PartitionDir
from kfmt.partition.reader import PartitionReader, log_end_offset
from kfmt.storage.store import Storage
from kfmt.transforms.archive.incremental import Left


@dataclass(frozen=True)
class ActiveChoice:
    included: bool
    why: str  # the flag that decided, or what kfmt.partition.broker found

    def to_json(self) -> dict:
        return {"included": self.included, "why": self.why}


def choose(storage: Storage, src_path: str, log_dir: bool, include_active: bool | None) -> ActiveChoice:
    """`include_active`: True/False as the flags force it, None to look for a running broker (on the
    log directory SRC is, or holds SRC)."""
    if include_active is not None:
        return ActiveChoice(include_active, "--include-active" if include_active else "--exclude-active")
    state = broker_state(storage, src_path if log_dir else storage.parent(src_path))
    return ActiveChoice(not state.running, state.why)


def left_out(part: PartitionDir) -> Left | None:
    """The offsets of `part`'s active segment a run that leaves it out does not archive: from its
    base offset to the end of its last complete batch as it is now (None: it holds none)."""
    if not part.segments:
        return None
    base = part.segments[-1].base_offset
    try:
        with warnings.catch_warnings():  # a torn tail is what a broker appending leaves: no news
            warnings.simplefilter("ignore", KfmtWarning)
            end = log_end_offset(PartitionReader(part, recover_tail=True))
    except (KfmtError, OSError):  # unreadable or gone now: the run that reads it will say
        end = None
    return None if end == base else Left(part.name, base, end)
