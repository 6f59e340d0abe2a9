"""An export's own record of how far it has exported each partition: `_kfmt-export-state.json`.

Every export run writes it, last (an incremental run publishes it after its data files, kfmt.storage.
append_staging), so it never names records that are not in place. For each partition it keeps the
high-water mark: the next offset to export, i.e. the offset after the last batch read, or the last
stable offset where read_committed stopped at an open transaction (its records are exported once it
completes). `kfmt export --append` reads the partition from there; a partition not in the state yet
(new in SRC) is read from its log start offset.

Like `_kfmt-report.json` and `_SUCCESS` its name starts with `_`, so Spark, Hadoop and Arrow readers
of the export skip it.

The log start offset (Kafka's UnifiedLog.logStartOffset) is the larger of the partition's first
segment's base offset and its entry in the log directory's `log-start-offset-checkpoint` (which
DeleteRecords raises; docs/format.md §11.2). When it is above a partition's high-water mark, retention
(or DeleteRecords) removed offsets [high-water mark, log start) before they were ever exported: they
are lost, and the run says so.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from kfmt.errors import DataError, UsageError
from kfmt.partition.checkpoints import checkpoint_text, read_offset_checkpoint
from kfmt.partition.layout import PartitionDir
from kfmt.storage.store import Storage

STATE_NAME = "_kfmt-export-state.json"
STATE_FORMAT = "kfmt-export-state"
STATE_VERSION = 1
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
# the options that shape the files: an append run must use the same as the export it adds to
SHAPING_OPTIONS = ("format", "partition_by", "include_control", "isolation")


@dataclass
class ExportState:
    options: dict  # ExportOptions.to_json() of the export's first run
    next_offsets: dict  # (topic, partition) -> the next offset to export
    runs: int = 0
    # (topic, partition) -> [[from, to), ...]: offsets deleted before any run exported them
    # (kfmt.transforms.losses), as the runs found them; written only for partitions with some
    lost: dict = field(default_factory=dict)

    def to_bytes(self) -> bytes:
        doc = {"format": STATE_FORMAT, "version": STATE_VERSION, "runs": self.runs,
               "options": {k: self.options[k] for k in SHAPING_OPTIONS},
               "partitions": [{"topic": t, "partition": p, "next_offset": n,
                               **({"lost": self.lost[(t, p)]} if self.lost.get((t, p)) else {})}
                              for (t, p), n in sorted(self.next_offsets.items())]}
        return (json.dumps(doc, indent=1) + "\n").encode()

    @classmethod
    def parse(cls, data, file: str) -> "ExportState":
        try:
            doc = json.loads(bytes(data))
            if doc.get("format") != STATE_FORMAT or doc.get("version") != STATE_VERSION:
                raise ValueError(f"not a {STATE_FORMAT} version {STATE_VERSION} document")
            offsets = {(str(e["topic"]), int(e["partition"])): int(e["next_offset"])
                       for e in doc["partitions"]}
            options = {k: doc["options"][k] for k in SHAPING_OPTIONS}
            lost = {(str(e["topic"]), int(e["partition"])): [[int(a), int(b)] for a, b in e["lost"]]
                    for e in doc["partitions"] if e.get("lost")}
            return cls(options, offsets, int(doc["runs"]), lost)
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise DataError(f"unreadable export state: {err}", file=file) from None

    def check_options(self, options: dict, url: str) -> None:
        for key in SHAPING_OPTIONS:
            mine, theirs = options[key], self.options[key]
            if (list(mine) if isinstance(mine, tuple) else mine) != theirs:
                shown = ",".join(theirs) if isinstance(theirs, list) else theirs
                raise UsageError(f"{url}: the export was written with {key.replace('_', '-')} "
                                 f"{shown}; --append must use the same")


def load_state(storage: Storage, dst: str) -> ExportState | None:
    path = storage.join(dst, STATE_NAME)
    if not storage.exists(path):
        return None
    return ExportState.parse(storage.read(path), storage.url_of(path))


def log_start_offsets(parts: list[PartitionDir]) -> dict:
    """(topic, partition) -> log start offset, for the partitions that have segments."""
    checkpoints: dict = {}
    out = {}
    for part in parts:
        if not part.segments:
            continue
        log_dir = part.storage.parent(part.path)
        if log_dir not in checkpoints:
            checkpoints[log_dir] = _checkpoint(part.storage, log_dir)
        first = part.segments[0].base_offset
        out[(part.topic, part.partition)] = max(first, checkpoints[log_dir].get(
            (part.topic, part.partition), first))
    return out


def _checkpoint(storage: Storage, directory: str) -> dict:
    path = storage.join(directory, LOG_START_OFFSET_CHECKPOINT)
    try:
        if not storage.exists(path) or storage.isdir(path):
            return {}
        return read_offset_checkpoint(checkpoint_text(storage.read(path), storage.url_of(path)),
                                      storage.url_of(path))
    except PermissionError:  # the parent of a partition copied alone may be anything
        return {}
