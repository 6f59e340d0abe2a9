"""kfmt verify: find every problem in a partition directory or a whole log directory.

One module per file kind: `log` (segments: framing, CRCs, offsets, control records, and at `deep`
every record of every compressed batch: its doc says what each depth checks),
`indexes` (.index/.timeindex against the log), `txn` (.txnindex and transactional state),
`snapshots` (producer snapshots), `checkpoints` (leader-epoch-checkpoint, partition.metadata and the
log directory's checkpoint files), `identity` (topic ids against a KRaft cluster's metadata),
`partition` (putting them together), `problems` (the findings).

Problems make verification fail; notes record genuine broker behaviour (a copy taken from a running
broker, files Kafka would delete at startup) and never do. Genuine broker-written directories verify
clean, including the quirks listed in realkafka/README.md.
"""
from __future__ import annotations

import functools
from typing import Callable

from kfmt.inspect.per_partition import map_partitions
from kfmt.partition.layout import PartitionDir, find_partitions, is_log_dir
from kfmt.partition.live import read_whole
from kfmt.partition.load_recovery import TRUSTED, LoadRecovery, load_recoveries
from kfmt.storage.store import Storage

from .checkpoints import check_log_dir
from .identity import check_cluster_id, check_topic_ids, cluster_of
from .partition import verify_partition
from .problems import Problem, Severity, VerifyReport

__all__ = ["Problem", "Severity", "VerifyReport", "verify", "verify_partition", "verify_walked"]


def verify(storage: Storage, path: str, topic: str | None = None, partition: int | None = None,
           progress=None, cluster_metadata: str | None = None,
           storage_options: dict | None = None, deep: bool = False) -> VerifyReport:
    """Verify the partition or log directory at `path`; `progress(total_segments)` may return a
    callable invoked after each segment. Topic ids are checked against `cluster_metadata` (a copy of
    a cluster's metadata log, read with `storage_options`), else a log directory's own. `deep`: every
    record checked, compressed batches inflated (else what log recovery checks: kfmt.inspect.verify.log)."""
    return verify_walked(storage, path, topic, partition, progress, (cluster_metadata, storage_options),
                         deep=deep)[0]


def verify_walked(storage: Storage, path: str, topic: str | None = None, partition: int | None = None,
                  progress=None, metadata: tuple[str | None, dict | None] = (None, None),
                  walk: Callable | None = None, deep: bool = False) -> tuple[VerifyReport, list]:
    """verify(), and for each partition `walk(part).result()`: `walk` makes a SegmentWalker
    (kfmt.partition.reader) that the log check shows every entry it checks, so that what else wants
    the partition's entries (the report) takes them from verify's pass over the bytes (a list of
    None without `walk`). `walk` is pickled to the pool's workers with the partitions. `metadata`:
    verify()'s (cluster_metadata, storage_options)."""
    cluster_metadata, storage_options = metadata
    report = VerifyReport(deep=deep)
    parts = find_partitions(storage, path, topic, partition)
    log_dir = is_log_dir(parts, storage, path)
    recoveries = load_recoveries(storage, path if log_dir else storage.parent(path), parts)
    tick = progress(sum(len(p.segments) for p in parts)) if progress is not None else None
    ranges, walked = [], []
    verified = functools.partial(_verified, recoveries=recoveries, walk=walk, deep=deep)
    for part, (found, checked, result) in zip(parts, map_partitions(verified, parts, "verify")):
        report.problems.extend(found.problems)
        for name, n in vars(found.counts).items():
            setattr(report.counts, name, getattr(report.counts, name) + n)
        ranges.append(checked)
        walked.append(result)
        for _ in part.segments if tick is not None else ():
            tick()
    if log_dir:
        complete = topic is None and partition is None
        check_log_dir(storage, path, [r for r in ranges if r.topic is not None], report, complete)
    cluster = cluster_of(storage, path, log_dir, cluster_metadata, storage_options, report)
    if cluster is not None:
        check_topic_ids(parts, cluster, report)
        if log_dir and cluster_metadata is not None:
            check_cluster_id(storage, path, cluster, report)
    return report, walked


def _verified(part: PartitionDir, recoveries: dict[str, LoadRecovery],
              walk: Callable | None, deep: bool = False) -> tuple[VerifyReport, object, object]:
    """One partition's problems, range and walk result, in a report of its own (a task of
    map_partitions). A running broker's partition whose files change while it is verified is
    verified again from a new listing (kfmt.partition.live), the findings of the attempt dropped."""
    recovery = recoveries.get(part.path, TRUSTED)

    def attempt(p: PartitionDir) -> tuple[VerifyReport, object, object]:
        report = VerifyReport()
        walker = walk(p) if walk is not None else None
        checked = verify_partition(p, report, recovery=recovery, walkers=[walker] if walker else [], deep=deep)
        return report, checked, walker.result() if walker else None

    return read_whole(part, attempt)
