"""salvage: every intact batch of a damaged partition directory, written into a broker-ready one.

People reach for this when something is already wrong (a broker died, a disk filled, a copy was cut
short), so it never stops at bad data: it keeps every batch that is intact, drops what is not, and
reports every byte range it dropped and the offsets that range may have held.

An entry is *intact* when its framing is sound (reference §2), its CRC checks (v2: CRC-32C over
[21, end), §4.1; v0/v1: CRC-32 over [16, end), §3.1, inner messages included), it decodes strictly
(records, decompression within the configured limit, control records, §4.4-§4.6), and the fields the
CRC does not cover are plausible: its offsets lie inside its segment (at or above the file's base
offset, below the next segment's, within int32 of the base: §12.1), and a v2 partition leader epoch
is -1 or more. After an entry that is not intact, the scan resynchronises: it looks at every later
byte position for the next intact entry (numpy narrows the positions to those whose magic, size and
offset fields are plausible; each survivor is then checked in full), and the bytes in between are
dropped.

A broker needs offsets strictly increasing (§17 item 1). In genuine data the order of the entries in
a file is their offset order, so within a segment the longest chain of intact entries in file order
is kept as it is; an intact entry outside that chain (a region moved by a bad copy) is put back where
its offsets belong if they overlap nothing kept, and dropped otherwise: as a duplicate when it is
byte for byte an entry already kept (no offsets lost), as an overlap when it differs (its offsets are
reported: which version was right cannot be known, since base offsets are not covered by the CRC).
Replaying producer state must succeed too: a non-transactional batch of a producer whose transaction
stays open because its marker was lost makes Kafka refuse the partition (§8, §18 item 14), so it is
dropped and reported.

The offsets a dropped range may have held come from the intact entries around it in its file: from
the offset after the previous one's last (the segment's base offset when there is none) to the offset
before the next one's first (before the next segment's base when there is none; open-ended at the
end of the log). Nothing is invented: kept entries are copied byte for byte, segments keep their base
offsets (one whose every entry was lost stays, empty), and the companion files come from the
PartitionWriter (kfmt.companions), as in every transform. `partition.metadata` is copied when it
parses; the leader-epoch-checkpoint is rebuilt from the batches kept.
"""
from __future__ import annotations

import bisect
import time
from array import array
from dataclasses import asdict, dataclass, field, replace
from typing import Callable

import numpy as np

from kfmt import registry
from kfmt.checkpoints import (checkpoint_text, read_offset_checkpoint, read_partition_metadata,
                              write_offset_checkpoint)
from kfmt.checkpoints import EpochEntry
from kfmt.companions import DEFAULT_INDEX_INTERVAL_BYTES, control_facts, existing_leader_epochs
from kfmt.control import ControlType
from kfmt.errors import DataError, UsageError
from kfmt.formats import STRICT, ReadOptions
from kfmt.layout import (LEADER_EPOCH_CHECKPOINT, PARTITION_METADATA, SEGMENT_NAME, PartitionDir,
                         Segment, find_partitions, is_log_dir)
from kfmt.model import INT32_MAX, LOG_OVERHEAD, NO_PARTITION_LEADER_EPOCH, Batch, increment_sequence
from kfmt.producer_state import DEFAULT_PRODUCER_EXPIRATION_MS
from kfmt.reindex import COPIED_LOG_DIR_FILES, LOG_START_OFFSET_CHECKPOINT, OFFSET_CHECKPOINTS
from kfmt.reindex import _check_not_inside as check_not_inside
from kfmt.report import REPORT_NAME, PartitionSummary, PartitionTally, make_report, report_bytes
from kfmt.segment import MIN_ENTRY_SIZE
from kfmt.staging import StagedOutput
from kfmt.storage import Storage, open_storage
from kfmt.wire import OFFSET_AND_SIZE
from kfmt.writer import PartitionWriter, RollPolicy

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

MIN_ENTRY = LOG_OVERHEAD + MIN_ENTRY_SIZE  # the smallest entry the broker's reader accepts (§2)
# Positions examined per numpy pass while resynchronising: small first (the next entry is usually
# close), doubling up to the largest.
SEARCH_CHUNKS = (1 << 12, 1 << 22)


@dataclass
class SalvageOptions:
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES
    now_ms: int | None = None  # the wall clock producer expiry is judged against (None: now)
    producer_expiration_ms: int = DEFAULT_PRODUCER_EXPIRATION_MS
    read: ReadOptions = STRICT  # its max_decompressed caps every batch (KFMT_MAX_DECOMPRESSED_BYTES)

    def writer_options(self) -> dict:
        return {"now_ms": self.now_ms, "producer_expiration_ms": self.producer_expiration_ms}


# --- what a scan finds ---

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
        #: an entry whose records do not fill its offsets: the log was compacted (reference §4.7)
        self.compacted = False

    def add(self, position: int, size: int, batch: Batch) -> None:
        h = batch.header
        self.positions.append(position)
        self.sizes.append(size)
        self.bases.append(h.base_offset)
        self.lasts.append(h.last_offset)
        self.epochs.append(h.partition_leader_epoch)
        v2 = h.magic >= 2
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
class SegmentRange:
    """The offsets a segment's entries may hold (§12.1): at or above its base, below the next
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
    rng: SegmentRange
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


def examine(buf, pos: int, end: int, rng: SegmentRange, options: ReadOptions = STRICT
            ) -> tuple[Batch | None, int, str]:
    """Whether an intact entry starts at `pos`: (its decoded batch, its size, "") or (None, 0,
    why not)."""
    remaining = end - pos
    if remaining < MIN_ENTRY:
        return None, 0, f"{remaining} trailing bytes are too few for an entry"
    _offset, size = OFFSET_AND_SIZE.unpack_from(buf, pos)
    if size < MIN_ENTRY_SIZE:
        return None, 0, f"entry size {size} is less than the minimum {MIN_ENTRY_SIZE}"
    if size > remaining - LOG_OVERHEAD:
        return None, 0, (f"entry of {size + LOG_OVERHEAD} bytes runs past the end of the file "
                         f"({remaining} bytes remain)")
    magic = buf[pos + 16]
    fmt = registry.get().formats.get(magic)
    if fmt is None:
        return None, 0, f"unknown magic {magic}"
    entry = memoryview(buf)[pos:pos + LOG_OVERHEAD + size]
    try:
        header = fmt.read_header(entry, pos)
        if not fmt.crc_valid(entry, header):
            return None, 0, f"the stored CRC {header.crc} does not match the entry's bytes"
        # The offsets and the v2 leader epoch are outside the CRC (§2, §4.1): check them.
        first = header.base_offset if header.base_offset is not None else header.last_offset
        if not rng.holds(first, header.last_offset):
            return None, 0, (f"offsets {first}..{header.last_offset} do not belong in this segment "
                             f"(expected offsets in {rng.base}..{rng.limit})")
        if header.magic >= 2 and header.partition_leader_epoch < NO_PARTITION_LEADER_EPOCH:
            return None, 0, f"impossible partition leader epoch {header.partition_leader_epoch}"
        batch = fmt.decode(entry, header, options)
        _check_records(batch, rng)
        control_facts(batch)  # a control record must parse (§4.6)
    except DataError as err:
        return None, 0, err.message
    return batch, LOG_OVERHEAD + size, ""


def _check_records(batch: Batch, rng: SegmentRange) -> None:
    """Record offsets strictly increase inside the batch's offsets, and a legacy wrapper carries its
    last inner offset (§3.4): what ties the offset field (outside the CRC) to the records."""
    h = batch.header
    if not len(batch):
        return
    offsets = batch.records.column(0).to_numpy()
    first, last = int(offsets[0]), int(offsets[-1])
    if (np.diff(offsets) <= 0).any():
        raise DataError("record offsets do not increase")
    if first < max(h.base_offset, rng.base) or last > h.last_offset:
        raise DataError(f"record offsets {first}..{last} fall outside the batch's offsets "
                        f"{h.base_offset}..{h.last_offset} or its segment")
    if h.magic < 2 and h.compression and last != h.last_offset:
        raise DataError(f"wrapper offset {h.last_offset} is not the offset {last} of its last inner "
                        f"message")


def _candidates(arr: np.ndarray, start: int, end: int, rng: SegmentRange):
    """Positions from `start` on, in order, where an entry could begin: a known magic at byte 16, a
    size field of at least 14 that stays inside the file, an offset field inside the segment's
    range. Everything else about a survivor is checked by `examine`."""
    magics = np.array(sorted(registry.get().formats), dtype=np.uint8)
    stop = end - MIN_ENTRY + 1  # the last position an entry fits at, + 1
    lo, chunk = start, SEARCH_CHUNKS[0]
    while lo < stop:
        hi = min(stop, lo + chunk)
        window, lo, chunk = (lo, hi), hi, min(chunk * 2, SEARCH_CHUNKS[1])
        yield from _plausible(arr, *window, end, magics, rng)


def _plausible(arr: np.ndarray, lo: int, hi: int, end: int, magics: np.ndarray, rng: SegmentRange):
    p = np.flatnonzero(np.isin(arr[lo + 16:hi + 16], magics)) + lo
    if not p.size:
        return []
    size = np.zeros(p.size, dtype=np.int64)
    for k in range(8, 12):
        size = (size << 8) | arr[p + k]
    size = np.where(size >= 1 << 31, size - (1 << 32), size)  # a signed int32
    p = p[(size >= MIN_ENTRY_SIZE) & (p + LOG_OVERHEAD + size <= end)]
    if not p.size:
        return []
    offset = np.zeros(p.size, dtype=np.uint64)
    for k in range(8):
        offset = (offset << np.uint64(8)) | arr[p + k].astype(np.uint64)
    offset = offset.view(np.int64)
    return p[(offset >= rng.base) & (offset <= rng.limit)].tolist()


def scan_segment(buf, file: str, rng: SegmentRange, options: ReadOptions = STRICT,
                 on_batch: Callable[[Batch], None] | None = None) -> SegmentScan:
    """The intact entries of one segment file, the ranges between them, and the order to write
    them in."""
    end = len(buf)
    arr = np.frombuffer(buf, dtype=np.uint8) if end else np.zeros(0, dtype=np.uint8)
    scan = SegmentScan(rng, file, Found(), [])
    found = scan.found
    neighbours: list[tuple[int, int]] = []  # the found entries before and after each dropped range

    def keep(position: int, size: int, batch: Batch) -> None:
        found.add(position, size, batch)
        if on_batch is not None:
            on_batch(batch)

    plain_legacy = wrapped_legacy = False  # kinds of legacy entries met in order so far
    pos = 0
    while pos < end:
        batch, size, reason = examine(buf, pos, end, rng, options)
        if batch is not None:
            keep(pos, size, batch)
            if batch.header.magic < 2:
                plain_legacy |= not batch.header.compression
                wrapped_legacy |= bool(batch.header.compression)
            pos += size
            continue
        after = found.lasts[-1] if len(found) else rng.base - 1
        # bytes inside a damaged compressed wrapper can hold its inner messages uncompressed
        nested = (wrapped_legacy or _looks_wrapped(buf, pos, end)) and not plain_legacy
        resume, resumed = _resynchronise(buf, arr, pos, end, rng, options, after, nested)
        scan.dropped.append(Dropped(file, pos, resume, _kind(arr, pos, resume, end, reason), reason,
                                    claim=_claim(buf, pos, resume, end, rng)))
        neighbours.append((len(found) - 1, len(found)))
        if resumed is None:
            break
        keep(resume, resumed[1], resumed[0])
        pos = resume + resumed[1]
    for dropped, (previous, following) in zip(scan.dropped, neighbours):
        dropped.offsets = scan.between(previous, following)
    _order(scan, buf)
    scan.dropped.sort(key=lambda d: d.start)
    scan.missing = _missing(scan, end)
    return scan


def _missing(scan: SegmentScan, end: int) -> list[Dropped]:
    """Offsets nothing in the file accounts for: the gaps in the offsets of the entries kept (from
    the segment's base, and up to the next segment's base or the log end offset when known) that no
    dropped range may have held. Bytes cut off (or out) exactly at entry boundaries leave nothing
    damaged to drop, only these; in a compacted log they are normal (the caller reports them only for
    a log that shows no sign of compaction)."""
    f, rng = scan.found, scan.rng
    gaps, previous = [], rng.base - 1
    for i in scan.order:
        if f.bases[i] > previous + 1:
            gaps.append((previous + 1, f.bases[i] - 1, f.positions[i]))
        previous = max(previous, f.lasts[i])
    if rng.next_base is not None and previous < rng.limit:
        gaps.append((previous + 1, rng.limit, end))
    covered = _merge([r for d in scan.dropped for r in d.offsets])
    out = []
    for first, last, at in gaps:
        for a, b in _subtract((first, last), covered):
            out.append(Dropped(scan.file, at, at, MISSING, "no byte of the file holds these offsets: "
                               "bytes cut off or out at entry boundaries", [(a, b)]))
    return out


def _subtract(span: tuple[int, int], ranges: list[Offsets]) -> list[tuple[int, int]]:
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


def _resynchronise(buf, arr: np.ndarray, pos: int, end: int, rng: SegmentRange, options: ReadOptions,
                   after: int, nested: bool) -> tuple[int, tuple[Batch, int] | None]:
    """Where the next intact entry after the damaged one at `pos` starts, and (its batch, its size);
    (end, None) if none does.

    Most damage is inside an entry whose size field is still right: the next entry then starts where
    the damaged one says it ends. Only when none does is every later position tried, and then bytes
    inside the damaged entry can look intact: a legacy wrapper's inner messages can sit uncompressed
    in its payload (gzip's stored blocks, lz4's raw blocks, snappy's literals), with offsets relative
    to the wrapper in v1. So a position found by searching is taken only for an entry whose offsets
    continue the segment (above `after`, the last offset of the entry before the damage), and when
    `nested` (the segment's legacy entries are compressed wrappers), not for an uncompressed legacy
    message.
    """
    declared = _declared_end(buf, pos, end)
    if declared is not None:
        batch, size, _ = examine(buf, declared, end, rng, options)
        if batch is not None:
            return declared, (batch, size)
    for at in _candidates(arr, pos + 1, end, rng):
        batch, size, _ = examine(buf, at, end, rng, options)
        if batch is None:
            continue
        h = batch.header
        if h.base_offset <= after or (nested and h.magic < 2 and not h.compression):
            continue
        return at, (batch, size)
    return end, None


def _looks_wrapped(buf, pos: int, end: int) -> bool:
    """Whether the (damaged) entry at `pos` says it is a compressed legacy wrapper."""
    return pos + 17 < end and buf[pos + 16] < 2 and bool(buf[pos + 17] & 0x07)


def _claim(buf, pos: int, stop: int, end: int, rng: SegmentRange) -> tuple[int, int] | None:
    """The offsets the damaged entry at `pos` claims, if its frame is intact: its size field leads
    exactly to `stop` and its header reads, with offsets inside the segment (a legacy wrapper's first
    offset is unknown: its last one is claimed)."""
    if stop == end or _declared_end(buf, pos, end) != stop:
        return None
    fmt = registry.get().formats.get(buf[pos + 16])
    try:
        header = fmt.read_header(memoryview(buf)[pos:stop], pos) if fmt is not None else None
    except DataError:
        return None
    if header is None:
        return None
    first = header.base_offset if header.base_offset is not None else header.last_offset
    return (first, header.last_offset) if rng.holds(first, header.last_offset) else None


def _declared_end(buf, pos: int, end: int) -> int | None:
    """Where the entry at `pos` ends by its size field, if that leaves room for another entry."""
    if end - pos < LOG_OVERHEAD:
        return None
    size = OFFSET_AND_SIZE.unpack_from(buf, pos)[1]
    stop = pos + LOG_OVERHEAD + size
    return stop if size >= MIN_ENTRY_SIZE and stop + MIN_ENTRY <= end else None


def _kind(arr: np.ndarray, start: int, stop: int, end: int, reason: str) -> str:
    if not arr[start:stop].any():
        return ZEROS
    if stop == end and "runs past the end" in reason:
        return TRUNCATED
    return CORRUPT


# --- offset order ---

def _order(scan: SegmentScan, buf) -> None:
    """Fill `scan.order` with the entries to write, in offset order, dropping those whose offsets
    cannot be trusted. The offset field is outside the CRC, so the offsets of an intact entry are
    checked against its neighbours in the file, whose order is the offset order in genuine data."""
    f = scan.found
    gaps = sum(f.gap_before(i) for i in range(1, len(f)))
    broken = _sequence_breaks(scan)
    for i, (first, last) in broken.items():
        _drop_misplaced(scan, i, first, last, "the sequence numbers of its producer's batch next to it "
                                              "in the file say it follows that batch directly")
    keep = [i for i in range(len(f)) if i not in broken and not _misplaced(scan, i, gaps)]
    if all(f.bases[b] > f.lasts[a] for a, b in zip(keep, keep[1:])):
        scan.order = keep
        return
    chain = _longest_chain([f.bases[i] for i in keep], [f.lasts[i] for i in keep])
    kept = sorted((keep[c] for c in chain), key=lambda i: f.bases[i])
    in_chain = set(kept)
    for i in keep:
        if i in in_chain:
            continue
        at = bisect.bisect_left([f.bases[k] for k in kept], f.bases[i])
        before = kept[at - 1] if at > 0 else None
        after = kept[at] if at < len(kept) else None
        clash = [j for j in (before, after) if j is not None
                 and f.bases[j] <= f.lasts[i] and f.bases[i] <= f.lasts[j]]
        if clash and _entry(buf, f, i) == _entry(buf, f, clash[0]):
            scan.drop(i, DUPLICATE, f"an intact copy of {f.describe(clash[0])}, which is kept", [])
        elif not clash and ((before is not None and f.lasts[before] + 1 == f.bases[i])
                            or (after is not None and f.lasts[i] + 1 == f.bases[after])):
            kept.insert(at, i)
            scan.moved.append(f"{f.describe(i)} was out of offset order in the file; it is written "
                              f"where its offsets belong, next to the entries it continues")
        else:
            claimed = [(f.bases[i], f.lasts[i])]
            if clash:
                # Two different entries claim the same offsets and the CRC does not cover offsets:
                # which one is right cannot be known, so neither is kept.
                for j in clash:
                    kept.remove(j)
                    scan.drop(j, OVERLAP, f"intact, but {f.describe(i)} claims offsets it holds too",
                              [(f.bases[j], f.lasts[j])])
                    claimed.append((f.bases[j], f.lasts[j]))
                reason = f"intact, but it claims offsets held by {f.describe(clash[0])} as well"
            else:
                reason = ("intact, but out of offset order in the file and not adjacent to the entries "
                          "around its offsets: its offset field may be damaged")
            scan.drop(i, OVERLAP, reason, _merge(claimed + scan.between(_previous(keep, i), _next(keep, i, len(f)))))
    scan.order = kept


def _misplaced(scan: SegmentScan, i: int, gaps: int) -> bool:
    """An entry whose offset field (outside the CRC) is contradicted by the entries around it in the
    file: they leave room for exactly its offsets somewhere else; or it is the segment's last, opens a
    gap right after the entry before it and does not end where the next segment (or the log) begins
    (or nothing says where the log ends), in a segment whose other entries all follow each other
    without a gap (and none was compacted). Its records' offsets are then the room (in the second
    case, what it claims is reported too: the entries before it may have been cut out instead).
    `gaps`: the offset gaps between entries next to each other in the file."""
    f = scan.found
    span = f.lasts[i] - f.bases[i]
    room = scan.between(i - 1, i + 1)
    if room and room[0][1] is not None:
        first, last = room[0]
        if f.bases[i] != first and last - first == span:
            return _drop_misplaced(scan, i, first, last, "the entries around it leave room for exactly "
                                                         "its offsets")
    first, last = _room_next_to(scan, i)  # the same, with damaged neighbours' claims
    if first is not None and last is not None and f.bases[i] != first and last - first == span:
        return _drop_misplaced(scan, i, first, last, "what lies next to it in the file (damaged "
                                                     "entries' intact frames included) leaves room "
                                                     "for exactly its offsets")
    around = gaps - f.gap_before(i) - f.gap_before(i + 1)  # gaps elsewhere in the segment
    evidence = len(f) - 1 - (i > 0) - (i + 1 < len(f))  # pairs of entries that show the density
    # Where nothing bounds the log's end (no clean-shutdown snapshot), whether the entries before the
    # last one were cut out or its own offset field is damaged cannot be told: reported, not kept.
    following = scan.rng.next_base
    if (i + 1 == len(f) and (following is None or f.lasts[i] + 1 != following) and f.gap_before(i)
            and f.adjacent(i - 1, i) and not f.compacted and around == 0 and evidence > 0
            and (following is None or f.lasts[i - 1] + 1 + span < following)):
        first = f.lasts[i - 1] + 1
        return _drop_misplaced(scan, i, first, first + span, "every other entry of the segment follows "
                                                             "the one before it without a gap", claimed=True)
    return False


def _sequence_breaks(scan: SegmentScan) -> dict[int, tuple[int, int]]:
    """Entries whose offset field the producer's sequence numbers (inside the CRC) contradict, with
    the offsets they must hold. Two batches next to each other in the file, of one producer epoch,
    whose sequences follow each other have nothing between them in that producer's stream nor in
    the file, so their offsets follow each other too (§4.1, §8). When they do not, the one whose
    other neighbour does not vouch for it has the damaged field."""
    f, out = scan.found, {}
    if f.compacted:  # the cleaner may have removed other producers' batches between them
        return out
    for i in range(len(f) - 1):
        j = i + 1
        if not (f.adjacent(i, j) and f.gap_before(j) and f.pids[i] >= 0 and f.pids[i] == f.pids[j]
                and f.producer_epochs[i] == f.producer_epochs[j] and f.first_seqs[i] >= 0
                and f.first_seqs[j] == increment_sequence(f.last_seqs[i], 1)):
            continue
        i_vouched, j_vouched = _vouched_before(scan, i), _vouched_after(scan, j)
        if i_vouched and not j_vouched:
            out[j] = (f.lasts[i] + 1, f.lasts[i] + 1 + f.lasts[j] - f.bases[j])
        elif j_vouched and not i_vouched:
            out[i] = (f.bases[j] - 1 - (f.lasts[i] - f.bases[i]), f.bases[j] - 1)
    return out


def _room_next_to(scan: SegmentScan, i: int) -> tuple[int | None, int | None]:
    """The first and last offsets entry i may hold by what lies right next to it in the file: an
    intact entry, or a damaged one whose frame is intact (its claim); None where nothing says."""
    f = scan.found
    stop = f.positions[i] + f.sizes[i]
    first = last = None
    if i > 0 and f.adjacent(i - 1, i):
        first = f.lasts[i - 1] + 1
    else:
        first = next((d.claim[1] + 1 for d in scan.dropped if d.end == f.positions[i] and d.claim), None)
    if i + 1 < len(f) and f.positions[i + 1] == stop:
        last = f.bases[i + 1] - 1
    else:
        last = next((d.claim[0] - 1 for d in scan.dropped if d.start == stop and d.claim), None)
    return first, last


def _vouched_before(scan: SegmentScan, i: int) -> bool:
    """Whether what lies just before entry i in the file says its offsets begin where they do: the
    entry before it ending at the offset before, or a damaged entry with an intact frame claiming so."""
    f = scan.found
    if i > 0 and f.adjacent(i - 1, i):
        return not f.gap_before(i)
    return any(d.end == f.positions[i] and d.claim is not None and d.claim[1] + 1 == f.bases[i]
               for d in scan.dropped)


def _vouched_after(scan: SegmentScan, j: int) -> bool:
    """Whether what lies just after entry j in the file says its offsets end where they do."""
    f = scan.found
    stop = f.positions[j] + f.sizes[j]
    if j + 1 < len(f) and f.positions[j + 1] == stop:
        return not f.gap_before(j + 1)
    if j + 1 == len(f) and scan.rng.next_base == f.lasts[j] + 1 and not any(d.start == stop for d in scan.dropped):
        return True
    return any(d.start == stop and d.claim is not None and d.claim[0] == f.lasts[j] + 1 for d in scan.dropped)


def _drop_misplaced(scan: SegmentScan, i: int, first: int, last: int, why: str,
                    claimed: bool = False) -> bool:
    f = scan.found
    offsets = [(first, last)] + ([(f.bases[i], f.lasts[i])] if claimed else [])
    scan.drop(i, MISPLACED, f"intact, but its offset field says {f.bases[i]}..{f.lasts[i]} where {why}, "
              f"at {first}..{last}: the field (outside the CRC) is damaged", _merge(offsets))
    return True


def _previous(indices: list[int], i: int) -> int:
    at = indices.index(i)
    return indices[at - 1] if at > 0 else -1


def _next(indices: list[int], i: int, count: int) -> int:
    at = indices.index(i)
    return indices[at + 1] if at + 1 < len(indices) else count


def _merge(ranges: list[Offsets]) -> list[Offsets]:
    """Overlapping or adjacent offset ranges merged, in order."""
    merged: list[list] = []
    for first, last in sorted(ranges, key=lambda r: r[0]):
        if merged and (merged[-1][1] is None or first <= merged[-1][1] + 1):
            if merged[-1][1] is not None:
                merged[-1][1] = None if last is None else max(merged[-1][1], last)
            continue
        merged.append([first, last])
    return [(a, b) for a, b in merged]


def _entry(buf, found: Found, i: int) -> bytes:
    start = found.positions[i]
    return bytes(buf[start:start + found.sizes[i]])


def _longest_chain(bases, lasts) -> list[int]:
    """The indices of a longest run of entries, in file order, whose offsets strictly increase
    (each starts after the previous one ends): the entries that agree with the file's order."""
    tails: list[int] = []  # tails[k]: the smallest last offset ending a chain of length k + 1
    tail_index: list[int] = []
    previous = [-1] * len(bases)
    for i, (base, last) in enumerate(zip(bases, lasts)):
        k = bisect.bisect_left(tails, base)  # chains whose last offset is below this entry's base
        previous[i] = tail_index[k - 1] if k else -1
        if k == len(tails):
            tails.append(last)
            tail_index.append(i)
        elif last < tails[k]:
            tails[k], tail_index[k] = last, i
    chain, i = [], tail_index[-1] if tail_index else -1
    while i >= 0:
        chain.append(i)
        i = previous[i]
    return chain[::-1]


# --- a partition ---

@dataclass
class PartitionSalvage:
    """What salvaging one partition found and did."""

    name: str
    source: str
    destination: str
    input: PartitionSummary  # the intact entries found
    output: PartitionSummary  # what was written
    dropped: list[Dropped] = field(default_factory=list)
    moved: list[str] = field(default_factory=list)
    skipped_files: list[str] = field(default_factory=list)  # neither read nor carried over
    notes: list[str] = field(default_factory=list)
    log_end_offset: int | None = None  # of the output
    missing: list[Dropped] = field(default_factory=list)  # reported unless the log was compacted
    compacted: bool = False  # some entry's records do not fill its offsets (reference §4.7)

    @property
    def affected_offsets(self) -> list[Offsets]:
        """The offset ranges the dropped ranges may have held, merged (None: to the log's end)."""
        return _merge([r for d in self.dropped for r in d.offsets])

    def to_json(self) -> dict:
        return {"name": self.name, "source": self.source, "destination": self.destination,
                "kept": {"batches": self.output.batches, "records": self.output.records,
                         "control_records": self.output.control_records},
                "log_end_offset": self.log_end_offset,
                "dropped_bytes": sum(d.length for d in self.dropped),
                "dropped": [d.to_json() for d in self.dropped],
                "affected_offsets": [{"first": a, "last": b} for a, b in self.affected_offsets],
                "moved": self.moved, "skipped_files": self.skipped_files, "notes": self.notes}


class _TxnReplay:
    """Which batches a broker's producer-state replay accepts (§8): a producer with an open
    transaction must not write a non-transactional batch, and a control batch of a producer is an
    ABORT or COMMIT marker (or empty, after compaction)."""

    def __init__(self):
        self.open: dict[int, int] = {}  # producer id -> first offset of its open transaction

    def refusal(self, batch: Batch) -> str | None:
        h = batch.header
        if h.magic < 2 or not h.has_producer_id:
            return None
        pid = h.producer_id
        if h.is_control:
            kind = control_facts(batch)[0]
            if kind is None:
                return None
            if kind not in (ControlType.ABORT, ControlType.COMMIT):
                return f"a control batch of producer {pid} holding a {kind.name} record, not a marker"
            self.open.pop(pid, None)
        elif h.is_transactional:
            self.open.setdefault(pid, h.base_offset)
        elif pid in self.open:
            return (f"a non-transactional batch of producer {pid} while its transaction from offset "
                    f"{self.open[pid]} is open (its marker was lost): Kafka refuses to load a log "
                    f"holding it (InvalidTxnStateException)")
        return None


@dataclass
class _Planned:
    """An intact entry to write, in the output's order."""

    segment: Segment
    file: str
    buf: object
    position: int
    size: int
    epoch: int | None  # a v2 batch's partition leader epoch; None for legacy entries


class _EpochOrder:
    """Leader epochs never decrease along a log (§9), and the partition leader epoch of a v2 batch is
    outside its CRC (§4.1). An epoch that breaks the order its neighbours agree on is damaged; at the
    ends of the log, where one neighbour is missing, the source's leader-epoch-checkpoint (when it
    reads) says which epoch covers the batch's offsets."""

    def __init__(self, reference: list[EpochEntry] | None):
        self.starts = [e.start_offset for e in reference or []]
        self.epochs = [e.epoch for e in reference or []]
        self.previous: int | None = None  # the epoch of the last v2 batch written

    def refusal(self, epoch: int, base: int, following: int | None) -> str | None:
        before = self.previous
        at = bisect.bisect_right(self.starts, base) - 1
        expected = self.epochs[at] if at >= 0 else None
        if before is not None and following is not None:
            damaged = before <= following and not before <= epoch <= following
        elif before is not None:  # the last v2 batch
            damaged = epoch < before or (epoch > before and expected not in (None, epoch))
        else:  # the first v2 batch
            damaged = following != epoch and expected not in (None, epoch)
        if not damaged:
            self.previous = epoch
            return None
        around = ", ".join(f"{what} {value}" for what, value in (("before it", before), ("after it", following),
                                                                  ("checkpoint", expected)) if value is not None)
        return (f"intact, but its partition leader epoch {epoch} (outside the CRC) breaks the order of "
                f"the epochs around it ({around}): leader epochs never decrease along a log")


def segment_ranges(part: PartitionDir) -> list[SegmentRange]:
    """The offsets each segment of `part` may hold: up to the next segment's base, and for the last
    one up to the log end offset named by the snapshot a clean shutdown writes there (§8), when the
    directory holds one above the last segment's base."""
    segs = part.segments
    log_end = max(part.snapshots, default=None)
    if log_end is not None and segs and log_end <= segs[-1].base_offset:
        log_end = None
    return [SegmentRange(seg.base_offset, segs[i + 1].base_offset if i + 1 < len(segs) else log_end)
            for i, seg in enumerate(segs)]


def _planned(part: PartitionDir, options: SalvageOptions, result: "PartitionSalvage", found: PartitionTally,
             on_progress: Callable[[int], None] | None):
    """The segments of `part` (yielded as such when each begins) and their intact entries in the
    order they are written."""
    segs, storage = part.segments, part.storage
    for seg, rng in zip(segs, segment_ranges(part)):
        file = part.display(seg.log)
        found.add_segment(seg.size)
        yield seg
        try:
            buf = storage.map(seg.log.path)
        except OSError as err:
            result.dropped.append(Dropped(file, 0, seg.size, UNREADABLE,
                                          f"cannot read the file: {err.strerror or err}",
                                          [(rng.base, rng.limit if rng.next_base is not None else None)]))
            continue
        scan = scan_segment(buf, file, rng, options.read, found.add_batch)
        result.moved += [f"{file}: {m}" for m in scan.moved]
        result.dropped += scan.dropped
        result.missing += scan.missing
        result.compacted |= scan.found.compacted
        for j in scan.order:
            position = scan.found.positions[j]
            yield _Planned(seg, file, buf, position, scan.found.sizes[j], scan.found.epochs[j]
                           if buf[position + 16] >= 2 else None)
        if on_progress is not None:
            on_progress(seg.size)


def salvage_partition(part: PartitionDir, rel: str, out: StagedOutput | None, options: SalvageOptions,
                      log_start_offset: int = 0, destination: str = "",
                      on_progress: Callable[[int], None] | None = None) -> PartitionSalvage:
    """Scan every segment of `part`, then write the intact entries into `out` under `rel` (nothing
    is written when `out` is None: a dry run)."""
    storage = part.storage
    found_tally = PartitionTally(PartitionSummary(storage.url_of(part.path), part.topic, part.partition))
    written_tally = PartitionTally(PartitionSummary(destination, part.topic, part.partition))
    result = PartitionSalvage(part.name, storage.url_of(part.path), destination, found_tally.summary,
                              written_tally.summary, skipped_files=_skipped_files(part))
    segs = part.segments
    writer = None
    if out is not None:
        if rel:
            out.makedirs(rel)
        policy = RollPolicy(segment_bytes=INT32_MAX, segment_ms=2**63 - 1,
                            index_interval_bytes=options.index_interval_bytes)
        # The companion files describe the batches kept; the source's log start offset (its
        # log-start-offset-checkpoint entry, possibly damaged) is only carried in that checkpoint.
        writer = PartitionWriter(out, rel, policy,
                                 start_offset=segs[0].base_offset if segs else log_start_offset,
                                 **options.writer_options())
    replay, epochs = _TxnReplay(), _EpochOrder(_reference_epochs(part, result))
    stream = _planned(part, options, result, found_tally, on_progress)
    following = next(stream, None)
    try:
        while following is not None:
            current, following = following, next(stream, None)
            if isinstance(current, Segment):
                if writer is not None:
                    writer.roll(current.base_offset)  # segments keep their base offsets, even emptied
                continue
            entry = memoryview(current.buf)[current.position:current.position + current.size]
            fmt = registry.get().format_for(entry[16])
            batch = fmt.decode(entry, fmt.read_header(entry, current.position), options.read)
            h = batch.header
            kind, refusal = TXN_STATE, replay.refusal(batch)
            if refusal is None and current.epoch is not None:
                after = following.epoch if isinstance(following, _Planned) else None
                kind, refusal = EPOCH, epochs.refusal(current.epoch, h.base_offset, after)
            if refusal is not None:
                result.dropped.append(Dropped(current.file, current.position, current.position + current.size,
                                              kind, refusal, [(h.base_offset, h.last_offset)]))
                continue
            written_tally.add_batch(batch)
            if writer is not None:
                writer.append(h, entry, mtime_ms=current.segment.log.mtime_ms)
        if writer is not None:
            summary = writer.close()
            for written in summary.segments:
                written_tally.add_segment(written.size)
            result.log_end_offset = summary.log_end_offset
            _write_partition_metadata(part, rel, out, result)
    except BaseException:
        if writer is not None:
            writer.abort()
        raise
    if not result.compacted:
        result.dropped += result.missing
    result.dropped.sort(key=lambda d: (d.file, d.start))
    found_tally.finish()
    written_tally.finish()
    return result


def _reference_epochs(part: PartitionDir, result: PartitionSalvage) -> list[EpochEntry] | None:
    """The source's leader-epoch-checkpoint entries, when it reads and its entries increase (the
    output's is rebuilt from the batches kept)."""
    try:
        entries = existing_leader_epochs(part)
    except (OSError, DataError) as err:
        result.notes.append(f"{LEADER_EPOCH_CHECKPOINT} not used to check leader epochs: "
                            f"{getattr(err, 'message', err)}")
        return None
    if entries and any(b.epoch <= a.epoch or b.start_offset <= a.start_offset
                       for a, b in zip(entries, entries[1:])):
        result.notes.append(f"{LEADER_EPOCH_CHECKPOINT} not used to check leader epochs: its entries "
                            f"do not increase")
        return None
    return entries


def _write_partition_metadata(part: PartitionDir, rel: str, out: StagedOutput,
                              result: PartitionSalvage) -> None:
    info = part.file(PARTITION_METADATA)
    if info is None:
        return
    file = part.display(info)
    try:
        data = bytes(part.storage.read(info.path))
        read_partition_metadata(checkpoint_text(data, file), file)
    except (OSError, DataError) as err:
        result.notes.append(f"{file} not carried over: {getattr(err, 'message', err)}; a broker needs "
                            f"one naming the topic's id (KRaft), write it before loading")
        return
    out.write(f"{rel}/{PARTITION_METADATA}" if rel else PARTITION_METADATA, data, info.mtime_ms)


def _skipped_files(part: PartitionDir) -> list[str]:
    """Files neither salvaged nor regenerated (the companion files are always regenerated)."""
    out = [f"{name}: named like a segment, but Kafka cannot parse its base offset" for name in part.ignored]
    for name in sorted(part.files):
        m = SEGMENT_NAME.match(name)
        if name in (PARTITION_METADATA, LEADER_EPOCH_CHECKPOINT) or m or name in part.ignored:
            continue
        out.append(f"{name}: not a file a broker needs")
    return out


# --- a whole run ---

@dataclass
class Plan:
    source: str
    destination: str
    log_dir: bool
    partitions: list[tuple[PartitionDir, str, int]]  # (partition, its directory in DST, log start)
    log_dir_files: list[str]  # names of log-directory files carried over
    notes: list[str] = field(default_factory=list)


def plan_salvage(src_storage: Storage, src_path: str, dst_storage: Storage, dst_path: str,
                 topic: str | None = None, partition: int | None = None) -> Plan:
    parts = find_partitions(src_storage, src_path, topic, partition)
    source, destination = src_storage.url_of(src_path), dst_storage.url_of(dst_path)
    if not parts:
        raise UsageError(f"{source}: no partition directories"
                         + (" match --topic/--partition" if topic or partition is not None else ""))
    check_not_inside(source, destination)
    log_dir = is_log_dir(parts, src_storage, src_path)
    notes, log_starts, files = [], {}, []
    if log_dir:
        names = {info.name for info in src_storage.listdir(src_path) if not info.is_dir}
        files = [n for n in (*COPIED_LOG_DIR_FILES, *OFFSET_CHECKPOINTS) if n in names]
        if LOG_START_OFFSET_CHECKPOINT in names:
            log_starts = _tolerant_checkpoint(src_storage, src_path, LOG_START_OFFSET_CHECKPOINT, notes)
    plans = [(p, p.name if log_dir else "", log_starts.get((p.topic, p.partition), 0)) for p in parts]
    return Plan(source, destination, log_dir, plans, files, notes)


def _tolerant_checkpoint(storage: Storage, directory: str, name: str, notes: list[str]) -> dict:
    """An offset checkpoint's entries, or {} (with a note) when it cannot be read."""
    path = storage.join(directory, name)
    try:
        return read_offset_checkpoint(checkpoint_text(storage.read(path), storage.url_of(path)),
                                      storage.url_of(path))
    except (OSError, DataError) as err:
        notes.append(f"{storage.url_of(path)} not used: {getattr(err, 'message', err)}")
        return {}


def _write_log_dir_files(plan: Plan, storage: Storage, path: str, out: StagedOutput,
                         log_ends: dict[tuple, int]) -> None:
    """meta.properties is copied; the offset checkpoints keep the lines of the partitions written,
    each offset at most the partition's new log end offset (§17 item 8: a log start offset above it
    would delete the whole partition on load, a recovery point or high watermark above it claims
    data the log no longer holds). An unreadable checkpoint is left out: the broker recovers."""
    for name in plan.log_dir_files:
        info = storage.info(storage.join(path, name))
        if name in COPIED_LOG_DIR_FILES:
            try:
                out.write(name, bytes(storage.read(info.path)), info.mtime_ms)
            except OSError as err:
                plan.notes.append(f"{storage.url_of(info.path)} not carried over: {err.strerror or err}")
            continue
        offsets = _tolerant_checkpoint(storage, path, name, plan.notes)
        kept = {tp: min(o, log_ends[tp]) for tp, o in offsets.items() if tp in log_ends}
        for tp, o in sorted(offsets.items()):
            if tp in kept and kept[tp] != o:
                plan.notes.append(f"{name}: {tp[0]}-{tp[1]} {o} lowered to the new log end offset {kept[tp]}")
        if offsets or kept:
            out.write(name, write_offset_checkpoint(kept).encode("utf-8"), info.mtime_ms)


def salvage(src: str, dst: str, *, src_options: dict | None = None, dst_options: dict | None = None,
            topic: str | None = None, partition: int | None = None,
            options: SalvageOptions | None = None, dry_run: bool = False,
            on_progress: Callable[[int], None] | None = None) -> tuple[Plan, dict]:
    """Salvage SRC into DST. Returns the plan and the report (a dry run writes nothing and returns
    what the run would do, without a destination)."""
    options = options or SalvageOptions()
    if options.now_ms is None:  # one clock for the whole run, recorded in the report
        options = replace(options, now_ms=int(time.time() * 1000))
    src_storage, src_path = open_storage(src, src_options)
    dst_storage, dst_path = open_storage(dst, dst_options if dst_options is not None else src_options)
    plan = plan_salvage(src_storage, src_path, dst_storage, dst_path, topic, partition)
    run_options = {"index_interval_bytes": options.index_interval_bytes, "now_ms": options.now_ms,
                   "producer_expiration_ms": options.producer_expiration_ms,
                   "max_decompressed_bytes": options.read.max_decompressed, "topic": topic,
                   "partition": partition, "dry_run": dry_run}
    if dry_run:
        if dst_storage.exists(dst_path) and (not dst_storage.isdir(dst_path) or dst_storage.listdir(dst_path)):
            raise UsageError(f"{plan.destination}: the destination exists and is not empty")
        results = [salvage_partition(p, rel, None, options, start, _dst_url(dst_storage, dst_path, rel),
                                     on_progress) for p, rel, start in plan.partitions]
        return plan, _report(plan, run_options, results, {})
    with StagedOutput(dst_storage, dst_path) as out:
        results = [salvage_partition(p, rel, out, options, start, _dst_url(dst_storage, dst_path, rel),
                                     on_progress) for p, rel, start in plan.partitions]
        if plan.log_dir:
            log_ends = {(p.topic, p.partition): r.log_end_offset
                        for (p, _, _), r in zip(plan.partitions, results)}
            _write_log_dir_files(plan, src_storage, src_path, out, log_ends)
        report = _report(plan, run_options, results, out.files)
        out.write(REPORT_NAME, report_bytes(report))
    return plan, report


def _dst_url(storage: Storage, path: str, rel: str) -> str:
    return storage.url_of(storage.join(path, rel) if rel else path)


def _report(plan: Plan, run_options: dict, results: list[PartitionSalvage], files: dict) -> dict:
    notes = [".log entries that are intact (framing, CRC, strict decoding, plausible offsets) copied byte "
             "for byte in offset order; every other byte range dropped and listed under salvage.dropped "
             "with the offsets it may have held; .index, .timeindex, .txnindex, producer .snapshot files "
             "and leader-epoch-checkpoint regenerated from the entries kept; partition.metadata copied "
             "when it parses"] + plan.notes
    for r in results:
        notes += [f"{r.name}: {n}" for n in r.notes]
    report = make_report("salvage", plan.source, plan.destination, run_options,
                         [r.input for r in results], [r.output for r in results], files, notes)
    report["salvage"] = {
        "partitions": [r.to_json() for r in results],
        "dropped_ranges": sum(len(r.dropped) for r in results),
        "dropped_bytes": sum(d.length for r in results for d in r.dropped),
        "log_dir_files": plan.log_dir_files,
    }
    return report
