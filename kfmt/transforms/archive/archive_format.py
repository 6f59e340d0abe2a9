"""Archives of partition directories on object storage (docs/archive.md): what an archive holds and
the archive section of its manifest. Generations and the objects holding each file are
kfmt.transforms.archive.generations; writing one is kfmt.transforms.archive.destination (resumable
uploads) and .upload, reading one kfmt.transforms.archive.view.

An archive at URL holds what a broker's recovery cannot derive, byte for byte: the `.log` segments
(rolled ones; the active one up to its last complete batch with --include-active),
`leader-epoch-checkpoint` (recovery starts from it: its entries are not all derivable from the
batches, e.g. after the log start offset moved), `partition.metadata` (the topic id), and for a log
directory `meta.properties` and the offset checkpoints (kept to the archived partitions, their
offsets made the archive's own). It does not hold `.index`, `.timeindex`, `.txnindex` or producer
`.snapshot` files: they are functions of the segments (docs/format.md §6.3, §7, §8), restore
regenerates them exactly as Kafka's recovery would, and archived copies would be stale where they
depend on the broker's clock (producer expiry in snapshots), half preallocated (an active segment's
indexes, 10 MiB of zeros) or longer than a segment archived up to a cut.

A run writes a claim `_kfmt_pending/<run>.json` first, uploads what is new, records each upload in
`_kfmt_pending/archive/uploaded/<object>.json` as it completes (size, SHA-256, modification time,
the segment's facts), and publishes the generation last. A killed run's upload records let the
next run skip what was uploaded (each checked against the object: size and SHA-256).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from kfmt.errors import DataError
from kfmt.format import segment
from kfmt.format.digest import DIGEST_VERSION, ContentDigest, EntriesDigest
from kfmt.partition.summary import (
    ENTRIES_CHECK,
    RECORDS_CHECK,
    PartitionCounts,
    PartitionTally,
    merge_tallies,
)
from kfmt.storage.manifest import Manifest
from kfmt.transforms.archive.segment_facts import copied_facts, segment_facts
from kfmt.transforms.losses import Lost

SECTION = "archive"  # the manifest section of an archive
SECTION_VERSION = 2  # 2: generations (kfmt.transforms.archive.generations); 1 is read as generation 1
STATE_DIR = "archive"  # below PENDING_DIR: the resume state of an unfinished run
PLAN_NAME = "plan.json"  # written by archives of section version 1 (removed with their state)
UPLOADS_DIR = "uploaded"
CHUNK = 8 * 1024 * 1024  # bytes per upload write and per verification read


# --- what an archive says about a segment and a partition ---

@dataclass(frozen=True)
class ArchivedSegment:
    """One archived segment: offsets, times, counts and a digest, as the check that read it gives them
    (kfmt.partition.summary): the entries check of a copy (the default: `entries_digest`, counts from
    the headers, compressed v0/v1 wrappers `uncounted_wrappers`, the least timestamp unknown) or the
    record-level one (--deep, and archives written before the entries check: `content_digest` of the
    data records, every count and timestamp from the records). Timestamps are the records' as a
    consumer reports them (kfmt.format.digest), None when no record has one (v0): the `.log`
    modification time, kept in the manifest, is then the segment's time."""

    file: str  # its path inside the archive
    base_offset: int
    bytes: int
    batches: int
    records: int
    control_records: int
    first_offset: int | None  # of the first data record
    next_offset: int | None  # after the last batch
    min_timestamp: int | None
    max_timestamp: int | None
    content_digest: str | None = None
    entries_digest: str | None = None
    uncounted_wrappers: int = 0

    @property
    def check(self) -> str:
        return RECORDS_CHECK if self.content_digest is not None else ENTRIES_CHECK

    def to_json(self) -> dict:
        out = asdict(self)
        if self.check == RECORDS_CHECK:  # as archives were written before the entries check
            del out["entries_digest"], out["uncounted_wrappers"]
        return out

    def tally(self) -> PartitionTally:
        """This segment as a part of its partition's summary."""
        summary = PartitionCounts("", None, None, 1, self.batches, self.records, self.control_records,
                                   self.bytes, self.first_offset, self.next_offset,
                                   uncounted_wrappers=self.uncounted_wrappers)
        if self.check == RECORDS_CHECK:
            return PartitionTally(summary, ContentDigest.parse(self.content_digest))
        tally = PartitionTally.of_entries(summary)
        tally.entries = EntriesDigest.parse(self.entries_digest)
        # a segment holding data: its first offset is final, None where a wrapper came first
        tally.first_known = bool(self.records or self.uncounted_wrappers)
        return tally

    @classmethod
    def from_json(cls, doc: dict) -> "ArchivedSegment":
        return cls(**{name: doc.get(name, field.default) for name, field in cls.__dataclass_fields__.items()})


def archived_segment(data, file: str, rel: str, base_offset: int, ends_log: bool = False,
                     deep: bool = False) -> ArchivedSegment:
    """Check every entry of a segment as Kafka's log recovery does (whole, its CRC holding: bad data
    raises DataError naming `file`), or with `deep` every batch strictly (record structure too), and
    sum up what the archive records about it (ArchivedSegment). In the partition's last segment
    (`ends_log`) a crash-cut tail is what log recovery truncates: the facts leave it out, with a
    warning (the bytes are archived as they are; restore truncates it as a broker would)."""
    tally, low, high = (segment_facts if deep else copied_facts)(data, file, ends_log)
    s = tally.finish()
    return ArchivedSegment(rel, base_offset, len(data), s.batches, s.records, s.control_records,
                           s.first_offset, s.next_offset, low, high, s.content_digest, s.entries_digest,
                           s.uncounted_wrappers)


@dataclass
class ArchivedPartition:
    """A partition of the archive section: its directory, log start offset and segments."""

    dir: str  # its directory inside the archive ('' when the archive is a partition directory)
    topic: str | None
    partition: int | None
    log_start_offset: int
    segments: list[ArchivedSegment] = field(default_factory=list)
    # offsets deleted at the source before any run archived them, as the runs found them
    # (kfmt.transforms.losses); listed only when there are some
    lost: list[Lost] = field(default_factory=list)

    @property
    def check(self) -> str | None:
        """The check every segment was archived with (None: generations with different checks)."""
        checks = {seg.check for seg in self.segments}
        return checks.pop() if len(checks) == 1 else (ENTRIES_CHECK if not checks else None)

    def summary(self, path: str) -> PartitionCounts:
        """The partition's summary (as kfmt.partition.summary counts it), added up from its segments;
        of segments archived with different checks, the counts only (no digest)."""
        if self.check is None:
            summary = merge_tallies((PartitionTally.of_entries(seg.tally().summary) for seg in self.segments),
                                    path, self.topic, self.partition)
            summary.entries_digest = None
            return summary
        return merge_tallies((seg.tally() for seg in self.segments), path, self.topic, self.partition)

    def held_end(self) -> int | None:
        """The offset after the last one this partition holds or reported lost (None: nothing)."""
        ends = [s.next_offset if s.next_offset is not None else s.base_offset for s in self.segments]
        return max(ends + [lost.end for lost in self.lost], default=None)

    def to_json(self) -> dict:
        summary = self.summary("").to_json()
        del summary["path"]
        highs = [seg.max_timestamp for seg in self.segments if seg.max_timestamp is not None]
        lows = [seg.min_timestamp for seg in self.segments if seg.max_timestamp is not None]
        # the least is known only where every segment holding a timestamp knows its own (not the
        # entries check's)
        low = min(lows) if lows and None not in lows else None
        return {"dir": self.dir, **summary, "log_start_offset": self.log_start_offset,
                "min_timestamp": low, "max_timestamp": max(highs, default=None),
                "segment_files": [seg.to_json() for seg in self.segments],
                **({"lost": [lost.to_json() for lost in self.lost]} if self.lost else {})}

    @classmethod
    def from_json(cls, doc: dict) -> "ArchivedPartition":
        return cls(doc["dir"], doc["topic"], doc["partition"], doc["log_start_offset"],
                   [ArchivedSegment.from_json(s) for s in doc["segment_files"]],
                   [Lost.from_json(lost) for lost in doc.get("lost", [])])


def encode_section(source: str, log_dir: bool, partitions: list[ArchivedPartition], notes: list[str],
                   generation: dict) -> dict:
    """`generation`: the keys kfmt.transforms.archive.generations adds (number, files, objects...)."""
    return {"version": SECTION_VERSION, **generation, "source": source, "log_dir": log_dir,
            "content_digest_version": DIGEST_VERSION, "partitions": [p.to_json() for p in partitions],
            "notes": notes}


def parse_section(manifest: Manifest, file: str) -> tuple[dict, list[ArchivedPartition]]:
    section = manifest.sections.get(SECTION)
    try:
        if section.get("version") not in (1, SECTION_VERSION):
            raise ValueError(f"archive section version {section.get('version')!r}, not "
                             f"{SECTION_VERSION} (written by another kfmt)")
        # The segments' digests are checked on restore: a digest of another definition would fail
        # every check, so such an archive is refused up front.
        if section.get("content_digest_version") != DIGEST_VERSION:
            raise ValueError(f"content digest version {section.get('content_digest_version')!r}, "
                             f"not {DIGEST_VERSION} (written by another kfmt)")
        return section, [ArchivedPartition.from_json(p) for p in section["partitions"]]
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise DataError(f"unreadable archive section: {err}", file=file) from None




def complete_prefix(data, file: str) -> int:
    """How many bytes of an active segment end with its last complete entry. A live broker may be
    appending: a torn last entry, and the zeros of a preallocated file, are cut off, where Kafka's
    log recovery would truncate (LogSegment.recover). Only framing is looked at here; the entries
    kept are decoded strictly afterwards (archived_segment)."""
    scanner = segment.FrameScanner(data, file)
    for _chunk in scanner.chunks():
        pass
    return scanner.tail.position
