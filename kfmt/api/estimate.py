"""What `kfmt upgrade`, `kfmt export` and `kfmt archive` would take on this machine, measured on a short
sample of the input (docs/report.md, "The estimate").

The sample is the head of every partition (its first segments, the last one cut at an entry
boundary; with its partition.metadata and leader-epoch-checkpoint), each partition given a share of
SAMPLE_BYTES in proportion to its size, so the sample holds the input's mix of message formats and
codecs. It is copied to a local temporary directory, and each command runs on it through its own
entry point (kfmt.api.commands) in this process, on one core (METHOD): twice on one entry per
partition (a warm-up: imports, caches; then the fixed part every run pays) and once on the sample.
The sample's time above the fixed part, per byte, and the ratio of the bytes it wrote to the bytes
it read are scaled to the whole input, the time divided among the workers the engine kfmt picks for
that size would run (kfmt.pipelines.engine.choose_engine, the pool's workers are one per core). The
KRaft metadata log is left out: the transforms carry it byte for byte.

The sample and the runs' outputs are scratch files, kept in memory (SCRATCH, a tmpfs) where the
machine has one: what is measured is the commands' CPU time, and on a disk the nine runs' fsyncs and
the removal of their outputs cost more wall time than the runs themselves (2 s of a 3.6 s estimate
on this project's 2-core test machine, 1.6 s in all on tmpfs).
"""
from __future__ import annotations

import os
import sys
import tempfile
import time
import warnings

import numpy as np

from kfmt.defaults import DEFAULT_SAMPLE_BYTES
from kfmt.errors import KfmtError
from kfmt.partition.layout import METADATA_LOG_DIR, PARTITION_FILES, PartitionDir
from kfmt.partition.reader import PartitionReader

SAMPLE_BYTES = DEFAULT_SAMPLE_BYTES
SCRATCH = "/dev/shm"  # a tmpfs on Linux
MIN_READ = 2 << 20  # read at least this much of a segment to find an entry boundary past the budget


def estimate(parts: list[PartitionDir], sample_bytes: int = SAMPLE_BYTES, progress: bool = False) -> dict:
    """{"input_bytes", "sample": {...}, "engine": {...}, "commands": {name: {...}}} for `parts`;
    `progress`: a bar on stderr, one step per command."""
    from tqdm import tqdm

    from kfmt.pipelines.engine import choose_engine

    parts = [p for p in parts if p.name != METADATA_LOG_DIR and p.segments]
    total = sum(s.size for p in parts for s in p.segments)
    engine = choose_engine(None, total)
    workers = max(1, min(engine.workers or 1, len(parts))) if engine.engine != "inprocess" else 1
    out = {"input_bytes": total, "engine": {"engine": engine.engine, "workers": workers, "why": engine.why},
           "commands": {}}
    if not total:
        out["sample"] = {"bytes": 0, "partitions": 0}
        return out
    with tempfile.TemporaryDirectory(prefix="kfmt-report-estimate-", dir=_scratch()) as tmp:
        cuts = {"warm": _cut_sample(parts, 0, os.path.join(tmp, "warm")),  # an entry per partition
                "sample": _cut_sample(parts, sample_bytes / total, os.path.join(tmp, "sample"))}
        out["sample"] = {"bytes": cuts["sample"], "partitions": len(parts), "method": METHOD}
        with tqdm(disable=not progress, file=sys.stderr, total=len(_COMMANDS), unit="command",
                  desc="estimate") as bar:
            for name, run in _COMMANDS.items():
                out["commands"][name] = _measure(run, tmp, name, cuts, total, workers)
                bar.update(1)
    return out


METHOD = ("the head of every partition, in proportion to its size; each command run in this process on one "
          "core on one entry per partition twice (a warm-up, then its fixed part: planning, publishing) and "
          "once on the sample, timed by its CPU time or its wall time where that is shorter; the sample's "
          "time above the fixed part, per byte, scaled to the input")


# (label, cut): a warm-up (imports, caches), then the fixed part, then the sample
_RUNS = (("warm-up", "warm"), ("fixed", "warm"), ("sample", "sample"))


def _measure(run, tmp: str, name: str, cuts: dict, total: int, workers: int) -> dict:
    seconds = {}
    try:
        with warnings.catch_warnings():  # the sample's warnings are the input's, which verify reports
            warnings.simplefilter("ignore")
            for label, cut in _RUNS:
                seconds[label] = _timed(run, os.path.join(tmp, cut), os.path.join(tmp, f"{name}-{label}"))
    except KfmtError as err:  # damaged input in the sample: the estimate says so, the report stands
        return {"error": str(err)}
    written, sample = _tree_bytes(os.path.join(tmp, f"{name}-sample")), cuts["sample"]
    # seconds = fixed + per byte x bytes. The run on an entry per partition is the fixed part (what
    # every run pays once, which a short sample would otherwise scale up with its bytes); the rest
    # of the sample's time is per byte.
    fixed = min(seconds["fixed"], seconds["sample"])
    grown = sample - cuts["warm"]
    per_byte = (seconds["sample"] - fixed) / grown if grown > 0 else 0.0
    if per_byte <= 0:  # the runs' noise is larger than their difference: the whole run's rate
        per_byte, fixed = seconds["sample"] / sample, 0.0
    return {"sample_cpu_seconds": round(seconds["sample"], 3), "fixed_cpu_seconds": round(fixed, 3),
            "sample_bytes_written": written, "bytes_per_second_one_core": round(1 / per_byte),
            "estimated_seconds": round(fixed + per_byte * total / workers, 2),
            # a command whose work does not spread over the workers (one partition doing most of it)
            "estimated_seconds_one_core": round(fixed + per_byte * total, 2),
            "estimated_bytes_written": round(written * total / sample)}


def _timed(run, src: str, dst: str) -> float:
    """The seconds run(src, dst) takes: its CPU time, so that other work on a shared machine does not
    make this one look slower (a 2 GB estimate taken on the wall clock at a load average of 10 varied
    fourfold), unless the wall clock was shorter: CPU time adds up every thread's, and an export's
    Arrow threads work alongside the command's own."""
    wall, cpu = time.perf_counter(), time.process_time()
    run(src, dst)
    return min(time.perf_counter() - wall, time.process_time() - cpu)


def _upgrade(src: str, dst: str) -> None:
    from kfmt.api.commands import upgrade

    upgrade(src, dst, master="inprocess")


def _export(src: str, dst: str) -> None:
    from kfmt.api.commands import export

    export(src, dst, master="inprocess")


def _archive(src: str, dst: str) -> None:
    from kfmt.api.commands import archive

    archive(src, dst, master="inprocess", include_active=True)


_COMMANDS = {"upgrade": _upgrade, "export": _export, "archive": _archive}


def _scratch() -> str | None:
    """Where the sample goes: SCRATCH when it is a writable directory, else the default temporary one."""
    return SCRATCH if os.path.isdir(SCRATCH) and os.access(SCRATCH, os.W_OK | os.X_OK) else None


def _tree_bytes(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _dirs, files in os.walk(path) for f in files)


def _cut_sample(parts: list[PartitionDir], share: float, into: str) -> int:
    """Copy the head of each partition, `share` of its bytes (at least one entry), into `into`;
    the bytes copied."""
    copied = 0
    for part in parts:
        budget = max(1, int(sum(s.size for s in part.segments) * share))
        target = os.path.join(into, part.name)
        os.makedirs(target)
        for name in PARTITION_FILES:  # small, and what the commands carry or rewrite (topic id, epochs)
            if name in part.files:
                with open(os.path.join(target, name), "wb") as f:
                    f.write(bytes(part.storage.read(part.files[name].path)))
        reader = PartitionReader(part)
        for seg in part.segments:
            data = _head(reader, seg, budget)
            with open(os.path.join(target, seg.log.name), "wb") as f:
                f.write(data)
            copied += len(data)
            budget -= len(data)
            if budget <= 0 or len(data) < seg.size:
                break
    return copied


def _head(reader: PartitionReader, seg, budget: int) -> bytes:
    """The segment's bytes up to the last whole entry that ends within `budget` (at least its first
    entry); the whole segment when it fits."""
    storage = reader.part.storage
    if seg.size <= budget:
        return bytes(storage.read(seg.log.path))
    head = bytes(storage.read(seg.log.path, 0, min(seg.size, max(budget, MIN_READ))))
    from kfmt.format.segment import FrameScanner

    ends = [rows["position"] + rows["size"] for rows in FrameScanner(head, seg.log.name).chunks() if len(rows)]
    if not ends:
        return head
    ends = np.concatenate(ends)
    fitting = ends[ends <= budget]
    return head[:int(fitting[-1] if len(fitting) else ends[0])]
