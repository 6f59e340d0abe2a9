"""What a run of `kfmt archive` adds to an archive (docs/archive.md, "Generations"): which source files
it reads, and how the next generation is made of them and of the latest one.

* A file whose size and modification time are those the latest generation recorded for it (rsync's
  quick check) is not read again: the generation keeps its object and facts.
* Rolled segments are archived; the active segment (the last of each partition), which a live
  broker is appending to, only with `include_active`, up to its last complete entry. A later run
  replaces it (same base offset, other bytes: a new object) once it has grown or rolled.
* A segment the source no longer holds stays in the archive when it lies before the source's first
  segment (retention deleted it; the archive's log start offset stays the oldest it holds), unless
  `prune`: then the generation follows the source's log start. A segment gone from between two
  that remain was merged into another by the cleaner: it leaves the generation.
* A file that disappears while the run reads it is read where the broker moved it
  (kfmt.transforms.archive.read_task.read_live); one gone altogether is skipped with a note: the
  generation keeps the version the latest one held, if any, and the latest one's segments within
  the offsets it covers.
Objects are never removed (see kfmt.transforms.archive.generations): older generations stay
restorable.
"""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field

from kfmt.partition.checkpoints import checkpoint_text, read_offset_checkpoint, write_offset_checkpoint
from kfmt.partition.layout import LEADER_EPOCH_CHECKPOINT, PARTITION_METADATA
from kfmt.storage.manifest import FileRecord
from kfmt.transforms.archive.archive_format import ArchivedPartition, ArchivedSegment
from kfmt.transforms.archive.generations import Generation, ObjectIndex, StoredFile
from kfmt.transforms.directory_plan import LOG_START_OFFSET_CHECKPOINT, OFFSET_CHECKPOINTS, PartitionPlan
from kfmt.transforms.losses import Lost, lost_between

PARTITION_FILES = (LEADER_EPOCH_CHECKPOINT, PARTITION_METADATA)


@dataclass(frozen=True)
class SourceFile:
    """A file of SRC this run reads (picklable: tasks get these)."""

    rel: str  # its path inside the archive
    path: str  # its storage path in SRC
    display: str  # how messages name it
    size: int
    mtime_ms: int | None
    base_offset: int | None = None  # set for a .log segment: its facts are recorded
    active: bool = False  # the partition's last segment: archived up to its last complete entry
    versions: tuple[tuple[str, str], ...] = ()  # (SHA-256, object) of the versions the archive holds
    natural_taken: bool = False  # an object of some generation sits at `rel` already


@dataclass(frozen=True)
class Kept:
    """A file whose object a generation holds, as the new generation lists it."""

    stored: StoredFile
    record: FileRecord  # of the object (rel is its key), with the source file's mtime
    facts: ArchivedSegment | None = None


@dataclass
class ArchivePartitionWork:
    pp: PartitionPlan
    previous: ArchivedPartition | None  # the partition in the latest generation
    source_bases: list[int]  # base offsets of every segment SRC holds
    files: list[str] = field(default_factory=list)  # rels of the files this run archives
    lost: Lost | None = None  # offsets deleted at the source since the latest generation's end
    left: "Left | None" = None  # the active segment's offsets this run leaves for the next one


def lost_since(work: ArchivePartitionWork) -> Lost | None:
    """Offsets the latest generation did not reach and the source no longer holds: between the end
    of what the archive holds (or reported lost) and the source's first segment. An archive reads
    segments whole, so offsets below the source's log start but in a segment it still has are read,
    not lost (kfmt.transforms.losses)."""
    if work.previous is None or not work.source_bases:
        return None  # a partition new to the archive starts where the source does
    part = work.pp.part
    return lost_between(part.topic, part.partition, work.previous.held_end(), min(work.source_bases))


@dataclass(frozen=True)
class Left:
    """The offsets of an active segment a run leaves out (a broker is appending to it)."""

    name: str
    start: int  # the segment's base offset
    end: int | None  # the offset after its last complete batch when the run looked (None: unknown)

    def phrase(self) -> str:
        if self.end is None:
            return f"{self.name} from offset {self.start}"
        return f"{self.name} offsets {self.start}..{self.end - 1}"

    def to_json(self) -> dict:
        return {"partition": self.name, "from": self.start, "to": self.end,
                "offsets": None if self.end is None else self.end - self.start}


def quick_check(latest: Generation | None, present: dict[str, int], rel: str, size: int,
                mtime_ms: int | None) -> Kept | None:
    """The latest generation's version of `rel` when the source file still has the size and
    modification time recorded for it and its object is there (None: read it)."""
    if latest is None or mtime_ms is None or rel not in latest.files:
        return None
    stored = latest.files[rel]
    record = latest.manifest.files[stored.object]
    if (stored.source_size, record.mtime_ms) != (size, mtime_ms) or present.get(stored.object) != record.size:
        return None
    facts = next((s for p in latest.partitions for s in p.segments if s.file == rel), None)
    if rel.endswith(".log") and facts is None:
        return None
    return Kept(stored, record, facts)


def source_file(index: ObjectIndex, rel: str, path: str, display: str, size: int, mtime_ms: int | None,
                base_offset: int | None = None, active: bool = False) -> SourceFile:
    return SourceFile(rel, path, display, size, mtime_ms, base_offset, active, index.versions(rel),
                      index.natural_taken(rel))


def kept_from(latest: Generation, rel: str) -> Kept | None:
    if latest is None or rel not in latest.files:
        return None
    stored = latest.files[rel]
    facts = next((s for p in latest.partitions for s in p.segments if s.file == rel), None)
    return Kept(stored, latest.manifest.files[stored.object], facts)


def merge_segments(work: ArchivePartitionWork, archived: dict[int, ArchivedSegment], prune: bool,
                   notes: list[str]) -> list[ArchivedSegment]:
    """The partition's segments in the new generation: those archived now (`archived`, by base
    offset), the latest generation's for source segments not archived now (skipped, or the active
    one left out) and, unless `prune`, for segments retention removed before the source's first."""
    name = work.pp.part.name
    previous = {s.base_offset: s for s in (work.previous.segments if work.previous else [])}
    chosen: dict[int, tuple[ArchivedSegment, bool]] = {}  # base offset -> (facts, read by this run)
    bases = sorted(work.source_bases)
    for base, following in zip(bases, bases[1:] + [None]):
        if base in archived:
            chosen[base] = (archived[base], True)
            continue
        if base in previous:
            chosen[base] = (previous[base], False)
        # Not read now (skipped as gone, or left out): the source segment may cover offsets the
        # latest generation holds in segments the listing no longer shows (a `.swap` hides the
        # segments it replaces; the cleaner may have renamed it into place before it was read).
        # What this run did not read cannot say they were merged: the latest generation's stay.
        for b, seg in previous.items():
            if b > base and (following is None or b < following):
                chosen[b] = (seg, False)
    first = min(work.source_bases, default=None)
    if not prune:
        for base, seg in previous.items():
            if base not in chosen and (first is None or base < first):
                chosen[base] = (seg, False)
    out: list[tuple[ArchivedSegment, bool]] = []
    for seg, fresh in (chosen[b] for b in sorted(chosen)):
        if out and out[-1][0].next_offset is not None and seg.base_offset < out[-1][0].next_offset:
            # Offsets overlap: the cleaner merged segments while this run read them (or before).
            # What this run read wins over an older generation's; between two read now, the first.
            before, before_fresh = out[-1]
            if fresh and not before_fresh:
                out[-1] = (seg, fresh)
                notes.append(f"{name}: segment {before.base_offset} of an earlier generation left out: "
                             f"segment {seg.base_offset} now holds its offsets")
            else:
                notes.append(f"{name}: segment {seg.base_offset} left out: its offsets are in segment "
                             f"{before.base_offset} (the cleaner merged them while the run read them)")
            continue
        out.append((seg, fresh))
    return [seg for seg, _fresh in out]


def log_start(work: ArchivePartitionWork, prune: bool) -> int:
    """The archive's log start offset: the source's with `prune`, else the oldest it holds."""
    source = work.pp.log_start_offset
    if prune or work.previous is None:
        return source
    return min(work.previous.log_start_offset, source)


def selected(part: ArchivedPartition, topic: str | None, partition: int | None) -> bool:
    """Whether --topic/--partition select an archived partition (unselected ones are kept as they are)."""
    if topic is not None and (part.topic is None or not fnmatch.fnmatchcase(part.topic, topic)):
        return False
    return partition is None or part.partition == partition


def archive_checkpoint(name: str, data: bytes | None, file: str,
                       partitions: list[ArchivedPartition]) -> bytes | None:
    """An offset checkpoint of the archive: entries for its partitions only, the log start offsets
    its own, and no offset past what it holds (a live broker's recovery point and high watermark
    move past the archived segments all the time; clamped, they change only when the archive does)."""
    offsets = read_offset_checkpoint(checkpoint_text(data, file), file) if data is not None else {}
    ours = {(p.topic, p.partition): p for p in partitions}
    kept = {}
    for tp, offset in offsets.items():
        part = ours.get(tp)
        if part is None:
            continue
        # the offset after the last archived batch (the log start offset when there is none)
        end = max((s.next_offset for s in part.segments if s.next_offset is not None),
                  default=part.log_start_offset)
        kept[tp] = min(offset, end)
    if name == LOG_START_OFFSET_CHECKPOINT:  # an entry where SRC has one or the offset is not 0
        kept = {tp: p.log_start_offset for tp, p in ours.items()
                if p.topic is not None and (tp in offsets or p.log_start_offset)}
    if data is not None and kept == offsets:
        return data  # as SRC has it, byte for byte
    if data is None and not kept:
        return None
    return write_offset_checkpoint(kept).encode("utf-8")


def is_checkpoint(name: str) -> bool:
    return name in OFFSET_CHECKPOINTS
