"""Finding partitions and their files (docs/format.md §1).

A PATH is a partition directory (`<topic>-<partition>/` holding segment files) or a log directory
(whose children are partition directories). Segment files are `<20-digit base offset>.log`; the
other per-segment files share the base-offset prefix; snapshots are named by their offset.

A kfmt output published on object storage is governed by its `_kfmt_manifest.json` (kfmt.storage.manifest):
only the files it lists are seen, and files that disagree with it are reported in
`PartitionDir.manifest_problems`; an interrupted output (a claim, no manifest) is refused.
"""
from __future__ import annotations

import fnmatch
import re
import warnings
from dataclasses import dataclass, field

from kfmt.errors import KfmtWarning, UsageError
from kfmt.storage.manifest import Manifest, find_manifest, own_manifest
from kfmt.storage.store import FileInfo, Storage

SEGMENT_NAME = re.compile(r"^(\d{20})\.(log|index|timeindex|txnindex|snapshot)$")
TOPIC_PARTITION = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")
# Partition directories a broker renames for deletion, alter-log-dirs or as strays (docs/format.md §1.1): not live.
SUFFIXED_DIR = re.compile(r"\.[0-9a-f]{32}-(delete|future|stray)$")
# Directories LogManager skips: the KRaft metadata log and the tiered-storage cache.
SKIPPED_DIRS = {"__cluster_metadata-0", "remote-log-index-cache"}
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"


def segment_file_name(base_offset: int, suffix: str) -> str:
    """The file name Kafka gives a segment file: 20-digit zero-padded base offset (docs/format.md §1.2)."""
    return f"{base_offset:020d}.{suffix}"


def parse_topic_partition(name: str) -> tuple[str, int] | None:
    """Split `<topic>-<partition>` at the last '-' (as Kafka does); None if it is not of that form."""
    m = TOPIC_PARTITION.match(name)
    if not m or SUFFIXED_DIR.search(name):
        return None
    return m["topic"], int(m["partition"])


@dataclass
class Segment:
    """One segment: its .log and whichever companion files exist beside it."""

    base_offset: int
    log: FileInfo
    index: FileInfo | None = None
    timeindex: FileInfo | None = None
    txnindex: FileInfo | None = None

    @property
    def size(self) -> int:
        return self.log.size


@dataclass
class PartitionDir:
    storage: Storage
    path: str
    name: str
    topic: str | None
    partition: int | None
    segments: list[Segment] = field(default_factory=list)
    snapshots: dict[int, FileInfo] = field(default_factory=dict)  # offset -> file
    files: dict[str, FileInfo] = field(default_factory=dict)  # every file in the directory by name
    ignored: list[str] = field(default_factory=list)  # names that look like segment files but are not
    manifest_problems: list[str] = field(default_factory=list)  # files disagreeing with the manifest

    def file(self, name: str) -> FileInfo | None:
        return self.files.get(name)

    def display(self, info_or_name) -> str:
        """How a file is named in messages: the path or URL the user gave, joined with its name."""
        name = info_or_name if isinstance(info_or_name, str) else info_or_name.name
        return self.storage.url_of(self.storage.join(self.path, name))

    @property
    def label(self) -> str:
        return self.name if self.topic is None else f"{self.topic}-{self.partition}"


def load_partition(storage: Storage, path: str, listing: list[FileInfo] | None = None,
                   manifest: Manifest | None = None) -> PartitionDir:
    name = storage.basename(path)
    tp = parse_topic_partition(name)
    part = PartitionDir(storage, path, name, tp[0] if tp else None, tp[1] if tp else None)
    if listing is None:
        try:
            listing = storage.listdir(path)
        except FileNotFoundError:
            if manifest is None:
                raise
            listing = []  # the manifest names it: its files are reported missing below
    if manifest is None:  # a partition of a log directory may be a kfmt output of its own
        manifest = own_manifest(storage, path, listing)
    if manifest is not None:
        view = manifest.view(storage, path, listing)
        listing, part.manifest_problems = view.kept, view.problems
    companions: dict[int, dict[str, FileInfo]] = {}
    for info in listing:
        if info.is_dir:
            continue
        part.files[info.name] = info
        m = SEGMENT_NAME.match(info.name)
        if not m:
            if info.name.endswith(".log"):
                part.ignored.append(info.name)  # Kafka would fail to load this; kfmt skips it
            continue
        offset, suffix = int(m[1]), m[2]
        if suffix == "snapshot":
            part.snapshots[offset] = info
        else:
            companions.setdefault(offset, {})[suffix] = info
    for offset in sorted(companions):
        files = companions[offset]
        if "log" in files:
            part.segments.append(Segment(offset, files["log"], files.get("index"),
                                         files.get("timeindex"), files.get("txnindex")))
    return part


def is_partition_dir(storage: Storage, path: str, listing: list[FileInfo]) -> bool:
    if any(SEGMENT_NAME.match(i.name) and not i.is_dir for i in listing):
        return True
    # An empty partition directory (no segments yet) still has a partition-like name and no
    # partition-like children.
    return (parse_topic_partition(storage.basename(path)) is not None
            and not any(i.is_dir and parse_topic_partition(i.name) for i in listing))


def find_partitions(storage: Storage, path: str, topic: str | None = None,
                    partition: int | None = None) -> list[PartitionDir]:
    """The partitions at PATH: itself if it is a partition directory, else its partition children.

    `topic` is a glob on the topic name; `partition` a partition number.
    """
    if not storage.exists(path):
        raise UsageError(f"{storage.url_of(path)}: no such file or directory")
    if not storage.isdir(path):
        raise UsageError(f"{storage.url_of(path)}: not a directory")
    listing = storage.listdir(path)
    manifest = find_manifest(storage, path, listing)
    seen = listing
    if manifest is not None:
        view = manifest.view(storage, path, listing)
        seen = view.kept + view.missing_dirs
    if is_partition_dir(storage, path, seen):
        parts = [load_partition(storage, path, listing, manifest)]
    else:
        parts, strangers = [], []
        for info in seen:
            if not info.is_dir or info.name in SKIPPED_DIRS:
                continue
            if parse_topic_partition(info.name) is None:
                if not SUFFIXED_DIR.search(info.name) and not info.name.startswith("_kfmt"):
                    strangers.append(info)
                continue
            parts.append(load_partition(storage, info.path, manifest=manifest))
        parts.sort(key=lambda p: (p.topic or "", p.partition or 0))
        if not parts:  # not a log directory at all: one error, not a warning per directory in it
            raise UsageError(f"{storage.url_of(path)}: no partition directories (<topic>-<partition>) "
                             f"and no segment files" + (f" ({len(strangers)} other "
                                                        f"director{'y' if len(strangers) == 1 else 'ies'})"
                                                        if strangers else ""))
        for info in strangers:
            warnings.warn(f"{storage.url_of(info.path)}: not a partition directory "
                          f"(<topic>-<partition>), which Kafka refuses in a log directory: "
                          f"skipped", KfmtWarning, stacklevel=2)
    if topic is not None:
        parts = [p for p in parts if p.topic is not None and fnmatch.fnmatchcase(p.topic, topic)]
    if partition is not None:
        parts = [p for p in parts if p.partition == partition]
    return parts


def is_log_dir(parts: list[PartitionDir], storage: Storage, path: str) -> bool:
    return not (len(parts) == 1 and parts[0].path == path)
