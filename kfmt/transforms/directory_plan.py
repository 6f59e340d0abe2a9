"""What a transform reads and writes: the partitions selected in SRC, the directory each becomes in
DST, their log start offsets, what each partition and SRC's log directory hold besides segments and
what becomes of it (`plan_directory`), and, once the partitions are written, the log directory's own
files in DST (`write_log_dir_files`). Reindex, upgrade, resegment, recompress, compact, retain,
archive and restore all start from this plan.

Log-directory files (docs/format.md §11), for a log-directory SRC:
* `meta.properties` is copied: it ties the directory to its broker and cluster, and the segments
  are unchanged.
* The offset checkpoints (`recovery-point-`, `log-start-offset-`, `replication-offset-`,
  `cleaner-offset-checkpoint`) are copied, keeping only the lines of the partitions written (copied
  byte for byte when none is dropped). Offsets do not change, so their values stay valid; the log
  start offsets must not be lost (a lost one re-exposes deleted records), and they also decide which
  snapshots and leader epochs recovery keeps, so they are given to the companion builder.
* `bootstrap.checkpoint` and the KRaft metadata log `__cluster_metadata-0/` are copied byte for byte
  (kfmt.transforms.metadata_log).
* `.kafka_cleanshutdown` is not copied: without it a broker recovers the directory on first load,
  validating every batch and rebuilding these same files (docs/format.md §17 item 9) instead of trusting them.
  `.lock` and anything else are left out too; the report lists what was skipped.
"""
from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field

from kfmt.errors import KfmtWarning, UsageError
from kfmt.partition.checkpoints import checkpoint_text, read_offset_checkpoint, write_offset_checkpoint
from kfmt.partition.layout import (
    LEADER_EPOCH_CHECKPOINT,
    PARTITION_METADATA,
    SEGMENT_NAME,
    PartitionDir,
    find_partitions,
    is_log_dir,
)
from kfmt.partition.log_start import BelowLogStart, segment_start
from kfmt.partition.topic_identity import TargetTopics, TopicIdentity
from kfmt.storage.store import Storage
from kfmt.transforms.metadata_log import (
    BOOTSTRAP_CHECKPOINT,
    BOOTSTRAP_REASON,
    CARRIED,
    is_node_file,
    metadata_log_files,
    node_files_left_out,
    split_metadata_log,
)

COPIED_LOG_DIR_FILES = ("meta.properties", BOOTSTRAP_CHECKPOINT)
OFFSET_CHECKPOINTS = ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
                      "replication-offset-checkpoint", "cleaner-offset-checkpoint")
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REGENERATED_SUFFIXES = ("index", "timeindex", "txnindex", "snapshot")


@dataclass
class PartitionPlan:
    part: PartitionDir
    rel: str  # its directory inside DST ('' when SRC is the partition directory itself)
    log_start_offset: int  # from SRC's log-start-offset-checkpoint; 0 when it has no entry
    skipped: list[str] = field(default_factory=list)  # files neither copied nor regenerated
    # a partition-directory DST: the first segment begins here, named after the log start offset
    # (kfmt.partition.log_start.segment_start); None: the segments as they are
    segment_start: int | None = None
    below: BelowLogStart | None = None  # what the first segment's new start leaves out (reindex counts it)
    # the partition.metadata written (kfmt.partition.topic_identity); None: the source's, as it is
    identity: TopicIdentity | None = None

    def rel_path(self, name: str) -> str:
        return f"{self.rel}/{name}" if self.rel else name

    def write_identity(self, out) -> None:
        """partition.metadata into the partition's directory of `out` (staged output or files)."""
        TopicIdentity.of(self.identity, self.part).write_into(out, self.rel_path(PARTITION_METADATA))


@dataclass
class LogDirFile:
    name: str
    action: str  # "copy" | "filter" (an offset checkpoint whose other lines are dropped) | "skip"
    reason: str


@dataclass
class DirectoryPlan:
    source: str
    destination: str
    log_dir: bool
    partitions: list[PartitionPlan]
    log_dir_files: list[LogDirFile]
    other_cluster: str | None = None  # the warning that SRC's node files were left out (metadata_log)

    def warn_strays(self) -> None:
        """A warning for each partition written (or planned, in a dry run) that a KRaft broker would
        set aside as a stray, and one when SRC's node files were left out; called once the run
        succeeded, so that a failure stays one line."""
        for p in self.partitions:
            if p.identity is not None and p.identity.warning:
                warnings.warn(p.identity.warning, KfmtWarning, stacklevel=2)
        if self.other_cluster:
            warnings.warn(self.other_cluster, KfmtWarning, stacklevel=2)

    def identity_notes(self) -> list[str]:
        """What each partition's partition.metadata is (and a warning's text where it is a stray)."""
        return [p.identity.note(p.part.name) for p in self.partitions if p.identity is not None]

    def lines(self) -> list[str]:
        """The plan as text (--dry-run)."""
        out = [f"reindex {self.source} -> {self.destination} "
               f"({'log directory' if self.log_dir else 'partition directory'}, "
               f"{len(self.partitions)} partition(s))"]
        for p in self.partitions:
            log_bytes = sum(s.size for s in p.part.segments)
            target = p.rel or "."
            out.append(f"  {p.part.name} -> {target}/: {len(p.part.segments)} segment(s), "
                       f"{log_bytes} bytes of .log copied byte for byte; .index, .timeindex, "
                       f".txnindex, .snapshot and {LEADER_EPOCH_CHECKPOINT} regenerated"
                       + (f"; {PARTITION_METADATA} {p.identity.origin}" if p.identity else ""))
            if p.log_start_offset:
                out.append(f"    log start offset {p.log_start_offset} (log-start-offset-checkpoint)")
            for name in p.skipped:
                out.append(f"    skip {name}")
        for f in self.log_dir_files:
            out.append(f"  {f.action} {f.name}: {f.reason}")
        return out

    def to_json(self) -> dict:
        return {"source": self.source, "destination": self.destination, "log_dir": self.log_dir,
                "partitions": [{"name": p.part.name, "destination": p.rel or ".",
                                "segments": len(p.part.segments),
                                "log_bytes": sum(s.size for s in p.part.segments),
                                "log_start_offset": p.log_start_offset, "skipped": p.skipped}
                               for p in self.partitions],
                "log_dir_files": [vars(f) for f in self.log_dir_files]}


def _skipped_files(part: PartitionDir) -> list[str]:
    kept = {PARTITION_METADATA, LEADER_EPOCH_CHECKPOINT}
    out = []
    for name in sorted(part.files):
        m = SEGMENT_NAME.match(name)
        if name in kept or (m and m[2] in ("log", *REGENERATED_SUFFIXES)):
            continue
        out.append(name)
    return out


def _log_dir_files(storage: Storage, path: str, parts: list[PartitionDir],
                   metadata: PartitionDir | None = None) -> list[LogDirFile]:
    """What becomes of each entry of SRC's log directory besides the partitions transformed (the
    KRaft metadata log `metadata`, when selected, is carried file by file: kfmt.transforms.metadata_log)."""
    names = {p.name for p in parts}
    out = []
    for info in storage.listdir(path):
        if info.is_dir:
            if metadata is not None and info.name == metadata.name:
                out += [LogDirFile(rel, "copy", CARRIED) for rel in metadata_log_files(metadata)]
            elif info.name not in names:
                out.append(LogDirFile(info.name + "/", "skip", "not a selected partition directory"))
        elif info.name == BOOTSTRAP_CHECKPOINT:
            out.append(LogDirFile(info.name, "copy", BOOTSTRAP_REASON))
        elif info.name in COPIED_LOG_DIR_FILES:
            out.append(LogDirFile(info.name, "copy", "the broker and cluster identity of the log directory"))
        elif info.name in OFFSET_CHECKPOINTS:
            out.append(LogDirFile(info.name, "filter", "offsets are unchanged; lines of partitions "
                                                       "not written are dropped"))
        elif info.name == ".kafka_cleanshutdown":
            out.append(LogDirFile(info.name, "skip", "without it a broker recovers DST, rebuilding "
                                                     "these same files, rather than trusting them"))
        else:
            out.append(LogDirFile(info.name, "skip", "not a file a broker needs"))
    return out


def check_not_inside(src_url: str, dst_url: str) -> None:
    if "://" not in src_url and "://" not in dst_url:
        src_url, dst_url = os.path.realpath(src_url), os.path.realpath(dst_url)
    src, dst = src_url.rstrip("/"), dst_url.rstrip("/")
    if dst == src or dst.startswith(src + "/"):
        raise UsageError(f"{dst_url}: the destination lies inside the source {src_url}")


def source_partitions(src_storage: Storage, src_path: str, dst_storage: Storage, dst_path: str,
                      topic: str | None, partition: int | None) -> tuple[list[PartitionDir], str, str, bool]:
    """What a transform reads: (the partitions selected, SRC's URL, DST's URL, whether SRC is a log
    directory). A usage error when nothing is selected or DST lies inside SRC."""
    parts = find_partitions(src_storage, src_path, topic, partition)
    source, destination = src_storage.url_of(src_path), dst_storage.url_of(dst_path)
    check_not_inside(source, destination)
    return parts, source, destination, is_log_dir(parts, src_storage, src_path)


def plan_directory(src_storage: Storage, src_path: str, dst_storage: Storage, dst_path: str,
                 topic: str | None = None, partition: int | None = None,
                 include_deleted: bool = False, target: TargetTopics | None = None) -> DirectoryPlan:
    """What a transform reads and writes. `include_deleted`: a partition-directory DST keeps its
    segments as they are, the records below the log start offset too (served again: no log directory
    keeps the offset). `target`: the topic ids the output is for (kfmt.partition.topic_identity; None:
    every partition keeps its own partition.metadata)."""
    parts, source, destination, log_dir = source_partitions(src_storage, src_path, dst_storage, dst_path,
                                                            topic, partition)
    parts, metadata = split_metadata_log(parts, log_dir, src_storage, src_path)
    log_starts: dict = {}
    log_dir_files: list[LogDirFile] = []
    if log_dir:
        log_dir_files = _log_dir_files(src_storage, src_path, parts, metadata)
        checkpoint = src_storage.join(src_path, LOG_START_OFFSET_CHECKPOINT)
        if src_storage.exists(checkpoint):
            log_starts = read_offset_checkpoint(_text(src_storage, checkpoint),
                                                src_storage.url_of(checkpoint))
    target = target or TargetTopics()
    target.check_topics({p.topic for p in parts if p.topic is not None})
    plans = []
    for p in parts:
        # a partition directory's log start offset is its parent's checkpoint entry (PartitionDir)
        entry = log_starts.get((p.topic, p.partition), 0) if log_dir else p.log_start_entry or 0
        start = None if include_deleted else segment_start(p, p.log_start_offset, log_dir)
        plans.append(PartitionPlan(p, p.name if log_dir else "", entry, _skipped_files(p), start,
                                   identity=target.identity(p)))
    left_out = log_dir and node_files_left_out(target, src_storage, src_path, [p.identity for p in plans],
                                               destination)
    if not left_out:
        return DirectoryPlan(source, destination, log_dir, plans, log_dir_files)
    for f in log_dir_files:
        if is_node_file(f.name):
            f.action, f.reason = "skip", left_out.reason
    return DirectoryPlan(source, destination, log_dir, plans, log_dir_files, left_out.warning)


def _text(storage: Storage, path: str) -> str:
    return checkpoint_text(storage.read(path), storage.url_of(path))


def write_log_dir_files(plan: DirectoryPlan, storage: Storage, path: str, out,
                        updates: dict[str, dict[tuple, int | None]] | None = None) -> None:
    """The log directory's own files in DST: meta.properties copied, the offset checkpoints filtered to
    the partitions written. `updates`: checkpoint name -> (topic, partition) -> new offset (None: no
    entry); a checkpoint SRC lacks is created when an update gives it an entry, as a broker creates it."""
    updates = updates or {}
    written = {(p.part.topic, p.part.partition) for p in plan.partitions}
    done = set()
    for f in plan.log_dir_files:
        if f.action == "skip":
            continue
        info = storage.info(storage.join(path, f.name))
        data = bytes(storage.read(info.path))
        if f.action == "filter":
            offsets = read_offset_checkpoint(checkpoint_text(data, storage.url_of(info.path)),
                                             storage.url_of(info.path))
            kept = _updated({tp: o for tp, o in offsets.items() if tp in written}, updates.get(f.name))
            if kept != offsets:
                data = write_offset_checkpoint(kept).encode("utf-8")
            done.add(f.name)
        out.write(f.name, data, info.mtime_ms)
    for name, changes in sorted(updates.items()):
        if name in done or name not in OFFSET_CHECKPOINTS:
            continue
        kept = _updated({}, changes)
        if kept:
            out.write(name, write_offset_checkpoint(kept).encode("utf-8"))


def _updated(offsets: dict, changes: dict | None) -> dict:
    for tp, offset in (changes or {}).items():
        if offset is None:
            offsets.pop(tp, None)
        else:
            offsets[tp] = offset
    return offsets
