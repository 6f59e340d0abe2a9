"""Checks of the checkpoint files (docs/format.md §9-§11): strict parsing as Kafka does (the readers in
kfmt.partition.checkpoints follow CheckpointFile.CheckpointReadBuffer and PartitionMetadataReadBuffer), then
consistency with the logs they describe.

Partition level:
* `leader-epoch-checkpoint` (docs/format.md §9): entries strictly increase in epoch and start offset (the cache drops
  entries that do not when it assigns later ones); no start offset beyond the log end offset; and it
  agrees with the batches: recovery assigns `(batch.partitionLeaderEpoch, batch.baseOffset)` whenever a
  v2 batch carries a larger epoch (LogSegment.recover), so the entry covering a batch's base offset
  names the batch's epoch (batches before the first entry were truncated away with the log start);
* `partition.metadata` (docs/format.md §10).

Log-directory level (docs/format.md §11): `recovery-point-offset-checkpoint`, `log-start-offset-checkpoint`,
`replication-offset-checkpoint` (high watermarks) and `cleaner-offset-checkpoint` must parse (a
malformed one can take the whole log directory offline), and name offsets within the logs: a log start
offset beyond the log end deletes every segment of the partition on load (docs/format.md §11.2), an
error; a recovery point or high watermark beyond it is bounded by the log end on load and a cleaner
offset beyond it is reset by the cleaner, notes: Kafka loads such a directory (a copy of a running
broker, or one stopped uncleanly, leaves them). `meta.properties` (docs/format.md §11.4) must name its
version and broker/node id.
"""
from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

import numpy as np

from kfmt.errors import DataError
from kfmt.format.layout import MAGIC_V2
from kfmt.partition.checkpoints import (
    EpochEntry,
    checkpoint_entries,
    java_parse_int,
    read_leader_epochs,
    read_offset_checkpoint,
    read_partition_metadata,
)
from kfmt.partition.layout import LEADER_EPOCH_CHECKPOINT, PARTITION_METADATA, PartitionDir
from kfmt.partition.meta_properties import META_PROPERTIES, java_properties
from kfmt.storage.store import Storage

from .log import BatchFacts
from .problems import VerifyReport

RECOVERY_POINT = "recovery-point-offset-checkpoint"
LOG_START = "log-start-offset-checkpoint"
REPLICATION = "replication-offset-checkpoint"
CLEANER = "cleaner-offset-checkpoint"


def _read_text(storage: Storage, info, report: VerifyReport) -> str:
    report.counts.files += 1
    return bytes(storage.read(info.path)).decode("utf-8", "replace")


class LeaderEpochs:
    """The partition's leader-epoch-checkpoint, checked on its own and against the batches."""

    def __init__(self, part: PartitionDir, report: VerifyReport):
        self.report = report
        self.entries: list[EpochEntry] | None = None
        self.positions: list[int] = []
        self.file = part.display(LEADER_EPOCH_CHECKPOINT)
        self._reported: set = set()
        self._missing_reported = False
        info = part.file(LEADER_EPOCH_CHECKPOINT)
        if info is None:
            return
        text = _read_text(part.storage, info, report)
        try:
            self.entries = read_leader_epochs(text, self.file)
        except DataError as err:
            report.data_error("leader-epoch-checkpoint", err, self.file)
            return
        self.positions = [p for p, _ in checkpoint_entries(text, self.file, 0, 2)]
        self._starts = [e.start_offset for e in self.entries]
        for i in range(1, len(self.entries)):
            prev, entry = self.entries[i - 1], self.entries[i]
            if entry.epoch <= prev.epoch or entry.start_offset <= prev.start_offset:
                report.error("leader-epoch-checkpoint", f"entry '{entry.epoch} {entry.start_offset}' does "
                             f"not follow '{prev.epoch} {prev.start_offset}': expected strictly increasing "
                             f"epochs and start offsets (the cache drops the entries that do not)",
                             self.file, self.positions[i], entry.start_offset)

    def wants(self, rows):
        """Which rows of frames (kfmt.format.frames) on_batch looks at: v2 batches with a leader
        epoch (kfmt.inspect.verify.log_runs skips the rest); against a checkpoint, only those whose
        epoch is not the one of the entry covering them (on_batch does nothing with the others: most
        batches of a partition), found for all rows at once."""
        mask = (rows["magic"] >= MAGIC_V2) & (rows["partition_leader_epoch"] >= 0)
        if not self.entries:
            # no checkpoint to compare with: on_batch notes its absence once, at the first such batch
            first = np.flatnonzero(mask)[:0 if self._missing_reported else 1]
            mask[:] = False
            mask[first] = True
            return mask
        if not mask.any():
            return mask
        starts = np.array(self._starts, np.int64)
        if (np.diff(starts) < 0).any():
            return mask  # bisect_right is a sorted search only over ordered start offsets
        covering = np.searchsorted(starts, rows["base_offset"], "right") - 1
        epochs = np.array([e.epoch for e in self.entries], np.int64)[np.maximum(covering, 0)]
        return mask & (covering >= 0) & (epochs != rows["partition_leader_epoch"])

    def on_batch(self, facts: BatchFacts, file: str, report: VerifyReport) -> None:
        epoch = facts.partition_leader_epoch
        if facts.magic < MAGIC_V2 or epoch < 0:
            return
        if not self.entries:
            if not self._missing_reported:
                self._missing_reported = True
                what = "an empty" if self.entries == [] else "no readable"
                report.note("leader-epoch-checkpoint", f"{what} leader-epoch-checkpoint although batches "
                            f"carry leader epochs (first: epoch {epoch} at offset {facts.base_offset}): the "
                            f"broker starts with an empty leader epoch cache", self.file)
            return
        covering = bisect_right(self._starts, facts.base_offset) - 1
        if covering < 0:
            return  # before the first entry: truncated from the start with the log start offset (docs/format.md §9)
        entry = self.entries[covering]
        if entry.epoch != epoch and (covering, epoch) not in self._reported:
            self._reported.add((covering, epoch))
            report.error("leader-epoch", f"batch at offset {facts.base_offset} carries leader epoch {epoch}, "
                         f"but {LEADER_EPOCH_CHECKPOINT} assigns offsets from {entry.start_offset} to epoch "
                         f"{entry.epoch} (expected an entry '{epoch} <first offset of epoch {epoch}>')",
                         file, facts.position, facts.base_offset)

    def finish(self, log_end: int | None) -> None:
        if not self.entries or log_end is None:
            return
        for entry, position in zip(self.entries, self.positions):
            if entry.start_offset > log_end:
                self.report.error("leader-epoch-checkpoint", f"entry '{entry.epoch} {entry.start_offset}' "
                                  f"starts beyond the log end offset {log_end} (expected start offsets <= "
                                  f"{log_end})", self.file, position, entry.start_offset)


def check_partition_metadata(part: PartitionDir, report: VerifyReport) -> None:
    file = part.display(PARTITION_METADATA)
    info = part.file(PARTITION_METADATA)
    if info is None:
        report.note("partition-metadata", "no partition.metadata: a KRaft broker treats the log as stray "
                    "(3.8+) or refuses it (3.4-3.7) until it carries the topic id", file)
        return
    try:
        read_partition_metadata(_read_text(part.storage, info, report), file)
    except DataError as err:
        report.data_error("partition-metadata", err, file)


# --- log directory ---
@dataclass(frozen=True)
class PartitionRange:
    """What the log-directory checks need to know of a partition that was verified."""

    topic: str | None
    partition: int | None
    first_segment_base: int | None
    log_end: int | None


def check_log_dir(storage: Storage, path: str, ranges: list[PartitionRange], report: VerifyReport,
                  complete: bool) -> None:
    """`complete`: every partition of the directory was verified (no --topic/--partition filter), so
    checkpoint entries naming other partitions can be noted."""
    files = {i.name: i for i in storage.listdir(path) if not i.is_dir}
    by_tp = {(r.topic, r.partition): r for r in ranges}
    offsets = {}
    for name in (RECOVERY_POINT, LOG_START, REPLICATION, CLEANER):
        info = files.get(name)
        if info is None:
            continue
        file = storage.url_of(info.path)
        text = _read_text(storage, info, report)
        try:
            offsets[name] = read_offset_checkpoint(text, file)
        except DataError as err:
            report.data_error("offset-checkpoint", err, file)
            continue
        positions = {}
        for position, fields in checkpoint_entries(text, file, 0, 3):
            positions.setdefault((fields[0], int(fields[1])), position)
        for tp, offset in offsets[name].items():
            _check_offset(name, file, positions[tp], tp, offset, by_tp.get(tp), report, complete)
    starts = offsets.get(LOG_START, {})
    for tp, offset in offsets.get(CLEANER, {}).items():
        part = by_tp.get(tp)
        if part is not None and part.first_segment_base is not None:
            log_start = max(part.first_segment_base, starts.get(tp, part.first_segment_base))
            if offset < log_start:
                report.note("offset-checkpoint", f"cleaner offset {offset} of {tp[0]}-{tp[1]} is below its "
                            f"log start offset {log_start}: the cleaner restarts from the log start",
                            storage.url_of(files[CLEANER].path), None, offset)
    if META_PROPERTIES in files:
        info = files[META_PROPERTIES]
        check_meta_properties(_read_text(storage, info, report), storage.url_of(info.path), report)


# What each checkpoint's offset is, and what Kafka does when it lies beyond the log end offset. Only
# a log start offset there loses data (every segment is deleted on load); the other three are bounded
# or reset when the partition is loaded, which a copy of a running broker or an unclean stop leaves
# (the checkpoint written after the data it names, or that data not flushed): notes, not problems.
_MEANINGS = {
    RECOVERY_POINT: ("recovery point", "Kafka takes the log end offset instead when it loads the partition "
                     "(LogLoader.recoverLog: the smaller of the two)", False),
    LOG_START: ("log start offset", "the broker deletes every segment of the partition on load "
                "(docs/format.md §11.2)", True),
    REPLICATION: ("high watermark", "Kafka bounds it by the log end offset when it loads the partition "
                  "(UnifiedLog.updateHighWatermark); the records between were lost or are not in this "
                  "copy", False),
    CLEANER: ("first dirty offset", "the cleaner resets it to the log start offset "
              "(LogCleanerManager.cleanableOffsets)", False),
}


def _check_offset(name: str, file: str, position: int, tp, offset: int, part: PartitionRange | None,
                  report: VerifyReport, complete: bool) -> None:
    what, consequence, fatal = _MEANINGS[name]
    label = f"{tp[0]}-{tp[1]}"
    if part is None:
        if complete:
            report.note("offset-checkpoint", f"{label} has no partition directory here (its {what} is "
                        f"{offset})", file, position, offset)
        return
    if part.log_end is not None and offset > part.log_end:
        message = f"{what} {offset} of {label} is beyond its log end offset {part.log_end}: {consequence}"
        if fatal:
            report.error("offset-checkpoint", f"{message} (expected at most {part.log_end})", file, position,
                         offset)
        else:
            report.note("offset-checkpoint", message, file, position, offset)


def check_meta_properties(text: str, file: str, report: VerifyReport) -> None:
    """meta.properties (docs/format.md §11.4): `version=0` with an int `broker.id` (ZooKeeper mode), or `version=1` with
    an int `node.id` and a `cluster.id` (KRaft)."""
    props, positions = java_properties(text)

    def fail(message, key=None):
        report.error("meta-properties", message, file, positions.get(key))

    if not props:
        fail("no properties (an empty file): a broker cannot tell which node and cluster the directory "
             "belongs to (expected version=1 with node.id and cluster.id, or version=0 with broker.id)")
        return
    # a missing version reads as 0 (MetaProperties.Builder; RawMetaProperties before 3.7)
    given = props.get("version", "0")
    version = java_parse_int(given.strip())
    if version not in (0, 1):
        fail(f"version {given!r}, expected 0 or 1", "version")
        return
    required = ("broker.id",) if version == 0 else ("node.id", "cluster.id")
    for key in required:
        if key not in props:
            fail(f"no {key} (required by version {version})")
        elif key.endswith(".id") and key != "cluster.id" and java_parse_int(props[key]) is None:
            fail(f"{key} {props[key]!r} is not an integer", key)
    if "cluster.id" in props and not props["cluster.id"]:
        fail("cluster.id is empty", "cluster.id")
