"""Finding partitions and their files (docs/format.md §1).

A PATH is a partition directory (`<topic>-<partition>/` holding segment files) or a log directory
(whose children are partition directories). Segment files are `<20-digit base offset>.log`; the
other per-segment files share the base-offset prefix; snapshots are named by their offset.

A kfmt output published on object storage is governed by its `_kfmt_manifest.json` (kfmt.storage.manifest):
only the files it lists are seen, and files that disagree with it are reported in
`PartitionDir.manifest_problems`; an interrupted output (a claim, no manifest) is refused.

The log directory of a running broker holds files and directories in transit (docs/format.md §12.4,
§12.6). kfmt renames and deletes nothing; it reads what a broker restarted now would load
(`LogLoader`), in one place, `in_transit_segments`: `.deleted` and `.cleaned` files are not read;
a `.swap` log is the segment it is about to become and hides the segments whose base offsets lie in
the offsets it covers; a base offset with a `.swap` file has no index files (loading deletes them
and rebuilds the indexes). `-delete` directories (a topic being deleted) and `-future` directories
(a replica moving between log directories, not yet the one brokers serve) are skipped in a log
directory: the partition's current replica is the plain `<topic>-<partition>` directory.
"""
from __future__ import annotations

import fnmatch
import re
import warnings
from dataclasses import dataclass, field

from kfmt.errors import DataError, KfmtWarning, UsageError, warned_on_success
from kfmt.storage.manifest import Manifest, find_manifest, own_manifest
from kfmt.storage.store import FileInfo, Storage

SEGMENT_NAME = re.compile(r"^(\d{20})\.(log|index|timeindex|txnindex|snapshot)$")
# Segment files in transit (docs/format.md §12.4): what the cleaner, splits and deletions leave.
TRANSIT_NAME = re.compile(r"^(\d{20})\.(log|index|timeindex|txnindex)\.(swap|cleaned|deleted)$")
TOPIC_PARTITION = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")
# Partition directories a broker renames for deletion, alter-log-dirs or as strays (docs/format.md §1.1): not live.
SUFFIXED_DIR = re.compile(r"\.[0-9a-f]{32}-(delete|future|stray)$")
# The tiered-storage index cache, which LogManager skips: not a partition.
SKIPPED_DIRS = {"remote-log-index-cache"}
# The KRaft metadata log: LogManager skips it too, but it is a Kafka log all the same, which the raft
# layer loads itself (KafkaMetadataLog.apply); readers read it like any partition, transforms carry
# it byte for byte (kfmt.transforms.metadata_log).
METADATA_LOG_DIR = "__cluster_metadata-0"
# Its snapshots, `<end offset>-<epoch>.checkpoint` (docs/format.md §1.1), and its vote state.
KRAFT_SNAPSHOT_NAME = re.compile(r"^\d{20}-\d{10}\.checkpoint$")
QUORUM_STATE = "quorum-state"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"
# Files only Kafka writes in a partition directory, besides segment files (docs/format.md §1.2).
PARTITION_FILES = (LEADER_EPOCH_CHECKPOINT, PARTITION_METADATA, QUORUM_STATE)
# Files a broker keeps in the log directory itself (docs/format.md §1.1, §11): each says the directory
# is a Kafka log directory, whatever its sub-directories are named. `.lock` is left out: any program
# may create one.
CLEAN_SHUTDOWN = ".kafka_cleanshutdown"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
# In the log directory (the partition directory's parent): the log start offsets DeleteRecords and
# retention raised (docs/format.md §11.2).
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
LOG_DIR_FILES = ("meta.properties", CLEAN_SHUTDOWN, RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT,
                 "replication-offset-checkpoint", "cleaner-offset-checkpoint", "bootstrap.checkpoint")


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
    # Its log directory's log-start-offset-checkpoint, read on first use (find_partitions sets it).
    log_start_checkpoint: "LogStartCheckpoint | None" = field(default=None, repr=False)

    @property
    def log_start_entry(self) -> int | None:
        """This partition's entry in its log directory's log-start-offset-checkpoint (None: none)."""
        if self.log_start_checkpoint is None:
            return None
        return self.log_start_checkpoint.entries().get((self.topic, self.partition))

    @property
    def log_start_offset(self) -> int | None:
        """Where a broker starts serving this partition: the log start offset, as UnifiedLog loads it,
        the larger of the log-start-offset-checkpoint entry (which DeleteRecords and retention raise)
        and the first segment's base offset. None for a partition without segments or entry.

        This is the one place the rule lives: the consumer view of every reader (PartitionReader,
        kfmt.rows.ranges, kfmt info, the transforms) starts here; --include-deleted reads below it."""
        first = self.segments[0].base_offset if self.segments else None
        if self.log_start_entry is None or (first is not None and first >= self.log_start_entry):
            return first
        return self.log_start_entry

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
    transit: dict[str, dict[int, dict[str, FileInfo]]] = {}  # suffix -> base offset -> kind -> file
    for info in listing:
        if info.is_dir:
            continue
        part.files[info.name] = info
        m = SEGMENT_NAME.match(info.name)
        if not m:
            t = TRANSIT_NAME.match(info.name)
            if t:
                transit.setdefault(t[3], {}).setdefault(int(t[1]), {})[t[2]] = info
            elif info.name.endswith(".log"):
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
    if transit.get("swap"):
        part.segments = in_transit_segments(part, part.segments, transit["swap"],
                                            min(transit.get("cleaned", {}), default=None))
    return part


def in_transit_segments(part: PartitionDir, segments: list[Segment], swaps: dict[int, dict[str, FileInfo]],
                        first_cleaned: int | None) -> list[Segment]:
    """The segments a broker loads where `.swap` files are (LogLoader, docs/format.md §12.4): a swap
    at or above the smallest `.cleaned` base is an unfinished split and goes; every other `.swap`
    log becomes its segment, replacing the segments whose base offsets lie in the offsets the swap
    logs cover; no segment with a `.swap` file keeps its index files (loading rebuilds them)."""
    from kfmt.format.segment import FrameScanner

    logs = {base: files["log"] for base, files in swaps.items()
            if "log" in files and (first_cleaned is None or base < first_cleaned)}
    touched = set(swaps)
    kept = [seg if seg.base_offset not in touched else Segment(seg.base_offset, seg.log)
            for seg in segments]
    if not logs:
        return kept
    covered_to = min(logs)
    for base, info in logs.items():
        # what the swap covers ends at its next offset (LogSegment.readNextOffset): its last entry's
        try:
            headers = list(FrameScanner(part.storage.map(info.path), part.display(info)))
        except FileNotFoundError:  # renamed into place meanwhile: its final name is in a new listing
            return kept
        covered_to = max(covered_to, headers[-1].next_offset if headers else base)
    first = min(logs)
    kept = [seg for seg in kept if not first <= seg.base_offset < covered_to]
    kept += [Segment(base, info) for base, info in logs.items()]
    return sorted(kept, key=lambda seg: seg.base_offset)


def relisted(part: PartitionDir) -> PartitionDir:
    """The partition listed again (a reader of a running broker's directory starts over after a
    file it was reading went: kfmt.partition.live), with its log directory's checkpoint re-read."""
    fresh = load_partition(part.storage, part.path)
    if part.log_start_checkpoint is not None:
        fresh.log_start_checkpoint = LogStartCheckpoint(part.log_start_checkpoint.storage,
                                                        part.log_start_checkpoint.log_dir)
    return fresh


def is_kafka_file(name: str) -> bool:
    """Whether only Kafka writes a file of this name in a partition directory: a segment file, one
    in transit, a producer snapshot, a KRaft snapshot, or a partition-level file (docs/format.md §1.2)."""
    return bool(SEGMENT_NAME.match(name) or TRANSIT_NAME.match(name) or KRAFT_SNAPSHOT_NAME.match(name)
                or name in PARTITION_FILES)


def has_kafka_files(part: PartitionDir) -> bool:
    return any(is_kafka_file(name) for name in part.files)


def is_partition_dir(storage: Storage, path: str, listing: list[FileInfo]) -> bool:
    if any(SEGMENT_NAME.match(i.name) and not i.is_dir for i in listing):
        return True
    # An empty partition directory (no segments yet) still has a partition-like name and no
    # partition-like children, nor files of a log directory.
    return (parse_topic_partition(storage.basename(path)) is not None
            and not any(i.is_dir and parse_topic_partition(i.name) for i in listing)
            and not any(not i.is_dir and i.name in LOG_DIR_FILES for i in listing))


def find_partitions(storage: Storage, path: str, topic: str | None = None,
                    partition: int | None = None) -> list[PartitionDir]:
    """The partitions at PATH: itself if it is a partition directory, else its partition children.

    `topic` is a glob on the topic name; `partition` a partition number. A PATH with no file only
    Kafka writes (no segment, index, snapshot or checkpoint, no meta.properties) is a usage error:
    directories merely named like partitions (`dbus-1`) do not make a log directory. The warnings
    of the listing (links skipped, strange children) are given only when PATH is taken: a refusal
    is one line.
    """
    return warned_on_success(_find_partitions, storage, path, topic, partition)


def _find_partitions(storage: Storage, path: str, topic: str | None,
                     partition: int | None) -> list[PartitionDir]:
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
        if not has_kafka_files(parts[0]):
            raise UsageError(f"{storage.url_of(path)}: {NO_KAFKA_FILE}")
    else:
        parts = _log_dir_partitions(storage, path, seen, manifest)
    if topic is not None:
        parts = [p for p in parts if p.topic is not None and fnmatch.fnmatchcase(p.topic, topic)]
    if partition is not None:
        parts = [p for p in parts if p.partition == partition]
    if not parts:  # only a filter empties the list: every command says so rather than succeed on nothing
        asked = [f"topic {topic!r}"] if topic is not None else []
        asked += [f"partition {partition}"] if partition is not None else []
        raise UsageError(f"{storage.url_of(path)}: no partition directories match {' and '.join(asked)}")
    checkpoint = LogStartCheckpoint(storage, path if is_log_dir(parts, storage, path) else storage.parent(path))
    for p in parts:
        p.log_start_checkpoint = checkpoint
    return parts


NO_KAFKA_FILE = ("no Kafka file here (no segment, index, snapshot or checkpoint file, no meta.properties): "
                 "not a partition directory or a log directory")


def _log_dir_partitions(storage: Storage, path: str, seen: list[FileInfo],
                        manifest: Manifest | None) -> list[PartitionDir]:
    """The partition directories of a log directory, refused (one line) when nothing in it is Kafka's:
    neither a file of the log directory itself (LOG_DIR_FILES) nor a Kafka file in a child."""
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
    own = [i.name for i in seen if not i.is_dir and i.name in LOG_DIR_FILES]
    if not own and not any(has_kafka_files(p) for p in parts):
        # not a log directory at all: one error, not a warning per directory in it
        named = (f" ({_count(len(parts), 'directory')} named like partitions, with no Kafka file: "
                 f"{', '.join(p.name for p in parts[:3])}{', ...' if len(parts) > 3 else ''})" if parts else
                 f" ({_count(len(strangers), 'other directory')})" if strangers else "")
        raise UsageError(f"{storage.url_of(path)}: {NO_KAFKA_FILE}{named}")
    if not parts:
        raise UsageError(f"{storage.url_of(path)}: a Kafka log directory ({', '.join(own)}) without "
                         f"partition directories (<topic>-<partition>)")
    for info in strangers:
        warnings.warn(f"{storage.url_of(info.path)}: not a partition directory "
                      f"(<topic>-<partition>), which Kafka refuses in a log directory: "
                      f"skipped", KfmtWarning, stacklevel=3)
    return parts


def _count(n: int, noun: str) -> str:
    plural = noun[:-1] + "ies" if noun.endswith("y") else noun + "s"
    return f"{n} {noun if n == 1 else plural}"


class LogStartCheckpoint:
    """A log directory's log-start-offset-checkpoint, read once, when a reader first asks for a log
    start offset (`kfmt verify` checks the file itself and never asks)."""

    def __init__(self, storage: Storage, log_dir: str):
        self.storage, self.log_dir = storage, log_dir
        self._entries: dict | None = None

    def entries(self) -> dict[tuple[str, int], int]:
        if self._entries is None:
            self._entries = log_start_entries(self.storage, self.log_dir)
        return self._entries


def log_start_entries(storage: Storage, log_dir: str) -> dict[tuple[str, int], int]:
    """The log directory's log-start-offset-checkpoint ((topic, partition) -> offset); empty when the
    file is missing, or cannot be read (a warning: Kafka would refuse the directory, but the
    records are still there to read; `kfmt verify` reports the file's problems)."""
    return offset_checkpoint_entries(storage, log_dir, LOG_START_OFFSET_CHECKPOINT,
                                     "log start offsets unknown, reading from each partition's first segment")


def offset_checkpoint_entries(storage: Storage, log_dir: str, name: str,
                              unknown: str) -> dict[tuple[str, int], int]:
    """The entries of the log directory's offset checkpoint file `name`; empty when it is missing,
    or, with a warning ending in `unknown` (what that means for the reader), when it cannot be read."""
    from kfmt.partition.checkpoints import checkpoint_text, read_offset_checkpoint

    if not log_dir:
        return {}
    checkpoint = storage.join(log_dir, name)
    try:
        if not storage.exists(checkpoint) or storage.isdir(checkpoint):
            return {}
        url = storage.url_of(checkpoint)
        return read_offset_checkpoint(checkpoint_text(storage.read(checkpoint), url), url)
    except DataError as err:
        warnings.warn(f"{err}: {unknown}", KfmtWarning, stacklevel=3)
    except (OSError, PermissionError):  # a parent directory the user may not list (a bucket's root)
        pass
    return {}


def metadata_log(storage: Storage, log_dir: str) -> PartitionDir | None:
    """The KRaft metadata log of a log directory, whatever a --topic/--partition selection took
    (transforms carry it whole: kfmt.transforms.metadata_log); None when there is none."""
    path = storage.join(log_dir, METADATA_LOG_DIR)
    if not storage.exists(path) or not storage.isdir(path):
        return None
    return load_partition(storage, path, manifest=find_manifest(storage, log_dir, storage.listdir(log_dir)))


def is_log_dir(parts: list[PartitionDir], storage: Storage, path: str) -> bool:
    return not (len(parts) == 1 and parts[0].path == path)
