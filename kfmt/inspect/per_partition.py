"""info and verify over many partitions: one task per partition, in parallel when it pays.

Both read every byte of their input, and what they cost is mostly inflating compressed batches,
work one process does on one core. Each partition is independent of the others, so a log directory
on local disk above the engine's pool threshold (kfmt.pipelines.engine, as `--master auto` picks for
the transforms) is read by the pool of local worker processes, one partition per task, the results
coming back in partition order; smaller inputs, a single partition, and storage that lives elsewhere
or only in this process stay in this process. The warnings a task gives (a recovered tail) are
given again here, in partition order, as the in-process run gives them.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Callable

from kfmt.partition.layout import PartitionDir
from kfmt.pipelines.engine import Engine, choose_engine, cores, is_process_local


def map_partitions(fn: Callable, parts: list[PartitionDir], description: str) -> list:
    """[fn(part) for part in parts], on the pool when the input is large enough for it."""
    engine = _engine(parts)
    if engine is None:
        return [fn(part) for part in parts]
    from kfmt.pipelines.runner import run_tasks

    results = run_tasks(_Caught(fn), parts, master=engine, description=description, progress=False)
    out = []
    for value, caught in results:
        for category, message in caught:
            warnings.warn(message, category, stacklevel=2)
        out.append(value)
    return out


def _engine(parts: list[PartitionDir]) -> Engine | None:
    if len(parts) < 2 or any(p.storage.remote is not None or is_process_local(p.storage.url_of(p.path))
                             for p in parts):
        return None
    engine = choose_engine(None, sum(seg.size for p in parts for seg in p.segments))
    if engine.engine == "inprocess":
        return None
    # Spark's start would cost more than these reads: its cores are the pool's
    workers = min(len(parts), engine.workers if engine.engine == "pool" and engine.workers else cores())
    return Engine("pool", engine.master, workers, engine.why) if workers > 1 else None


@dataclass(frozen=True)
class _Caught:
    """fn(part) and the warnings it gave, as (category, message) pairs (picklable by reference)."""

    fn: Callable

    def __call__(self, part):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            value = self.fn(part)
        return value, [(w.category, str(w.message)) for w in caught]
