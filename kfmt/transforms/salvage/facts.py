"""What salvaging finds: the kinds of dropped ranges, the offsets a segment may hold, the intact entries
of a segment (as columns) and the byte ranges between them, and offset-range arithmetic."""
from __future__ import annotations

from array import array
from dataclasses import dataclass, field

from kfmt.format.layout import MAGIC_V2
from kfmt.format.model import INT32_MAX, Batch

# Kinds of dropped ranges
CORRUPT = "corrupt"  # not an intact entry (framing, CRC, decoding or an implausible header field)
TRUNCATED = "truncated"  # an entry cut short by the end of the file
ZEROS = "zeros"  # zero bytes: a preallocated tail, or writes lost in a crash
DUPLICATE = "duplicate"  # an intact entry identical to one kept
OVERLAP = "overlap"  # intact entries claiming offsets another claims too, or out of order
MISPLACED = "misplaced"  # an intact entry whose offset field contradicts the entries around it
EPOCH = "epoch"  # an intact v2 batch whose leader epoch field contradicts the batches around it
MISSING = "missing"  # no bytes: offsets between entries, or at a file's ends, that no byte holds
TXN_STATE = "txn-state"  # an intact entry a broker cannot replay (an open transaction's producer)
UNREADABLE = "unreadable"  # a segment file that could not be read at all


Offsets = tuple[int, "int | None"]  # an inclusive offset range; None as its end: to the log's end


@dataclass
class Dropped:
    """A byte range of a segment file that is not in the output, and the offset ranges whose
    records it may have held (none when the entries around it are adjacent)."""

    file: str
    start: int
    end: int
    kind: str
    reason: str
    offsets: list[Offsets] = field(default_factory=list)
    #: the offsets a damaged entry's header claims, when its frame is intact (its size field leads
    #: exactly to the next intact entry): evidence about its neighbours, not reported
    claim: tuple[int, int] | None = field(default=None, repr=False, compare=False)

    @property
    def length(self) -> int:
        return self.end - self.start

    def to_json(self) -> dict:
        return {"file": self.file, "start": self.start, "end": self.end, "bytes": self.length,
                "kind": self.kind, "reason": self.reason,
                "offsets": [{"first": a, "last": b} for a, b in self.offsets]}


class Found:
    """The intact entries of one segment, in file order, as columns (a segment of small legacy
    messages holds millions)."""

    def __init__(self):
        self.positions, self.sizes = array("q"), array("q")
        self.bases, self.lasts, self.epochs = array("q"), array("q"), array("q")
        # v2 producer facts (inside the CRC): id, epoch, first and last sequence (-1 for none)
        self.pids, self.producer_epochs = array("q"), array("q")
        self.first_seqs, self.last_seqs = array("q"), array("q")
        #: an entry whose records do not fill its offsets: the log was compacted (docs/format.md §4.7)
        self.compacted = False

    def add(self, position: int, size: int, batch: Batch) -> None:
        h = batch.header
        self.positions.append(position)
        self.sizes.append(size)
        self.bases.append(h.base_offset)
        self.lasts.append(h.last_offset)
        self.epochs.append(h.partition_leader_epoch)
        v2 = h.magic >= MAGIC_V2
        self.pids.append(h.producer_id if v2 else -1)
        self.producer_epochs.append(h.producer_epoch if v2 else -1)
        self.first_seqs.append(h.base_sequence if v2 else -1)
        self.last_seqs.append(h.last_sequence if v2 else -1)
        self.compacted |= len(batch) != h.last_offset - h.base_offset + 1

    def adjacent(self, i: int, j: int) -> bool:
        """Whether entry j begins, in the file, where entry i ends."""
        return self.positions[i] + self.sizes[i] == self.positions[j]

    def gap_before(self, i: int) -> bool:
        return 0 < i < len(self) and self.bases[i] != self.lasts[i - 1] + 1

    def __len__(self) -> int:
        return len(self.positions)

    def describe(self, i: int) -> str:
        return f"the entry at position {self.positions[i]} (offsets {self.bases[i]}..{self.lasts[i]})"


@dataclass(frozen=True)
class OffsetBounds:
    """The offsets a segment's entries may hold (docs/format.md §12.1): at or above its base, below the next
    segment's base (for the last segment: below the log end offset the snapshot a clean shutdown
    writes names, when there is one, §8), and within int32 of its own base."""

    base: int
    next_base: int | None

    @property
    def limit(self) -> int:
        """The largest offset allowed."""
        limit = self.base + INT32_MAX
        return limit if self.next_base is None else min(limit, self.next_base - 1)

    def holds(self, first: int, last: int) -> bool:
        return self.base <= first <= last <= self.limit


@dataclass
class SegmentScan:
    rng: OffsetBounds
    file: str
    found: Found
    dropped: list[Dropped]
    order: list[int] = field(default_factory=list)  # indices into found, in offset order
    moved: list[str] = field(default_factory=list)  # entries put back into offset order
    missing: list[Dropped] = field(default_factory=list)  # offsets no byte accounts for

    def between(self, before: int, after: int) -> list[Offsets]:
        """The offsets between found entries `before` and `after` (file order; -1 / len(found) for
        the segment's start / end): what a damaged range between them may have held."""
        f = self.found
        first = f.lasts[before] + 1 if before >= 0 else self.rng.base
        if after < len(f):
            last = f.bases[after] - 1
        elif self.rng.next_base is not None:
            last = self.rng.limit
        else:
            return [(first, None)]
        return [(first, last)] if first <= last else []

    def drop(self, i: int, kind: str, reason: str, offsets: list[Offsets]) -> None:
        f = self.found
        self.dropped.append(Dropped(self.file, f.positions[i], f.positions[i] + f.sizes[i], kind,
                                    reason, offsets))


def merge_ranges(ranges: list[Offsets]) -> list[Offsets]:
    """Overlapping or adjacent offset ranges merged, in order."""
    merged: list[list] = []
    for first, last in sorted(ranges, key=lambda r: r[0]):
        if merged and (merged[-1][1] is None or first <= merged[-1][1] + 1):
            if merged[-1][1] is not None:
                merged[-1][1] = None if last is None else max(merged[-1][1], last)
            continue
        merged.append([first, last])
    return [(a, b) for a, b in merged]


def subtract_ranges(span: tuple[int, int], ranges: list[Offsets]) -> list[tuple[int, int]]:
    """The parts of `span` outside `ranges` (merged, in order)."""
    pieces, (first, last) = [], span
    for a, b in ranges:
        b = last if b is None else b
        if b < first or a > last:
            continue
        if a > first:
            pieces.append((first, a - 1))
        first = max(first, b + 1)
    if first <= last:
        pieces.append((first, last))
    return pieces
