"""One segment file: its intact entries, found by reading entry after entry and, after damage, by
resynchronising on the next intact one; the byte ranges in between; the offsets nothing holds."""
from __future__ import annotations

from typing import Callable

import numpy as np

from kfmt.errors import DataError
from kfmt.format.layout import (
    CODEC_MASK,
    HEADER_SIZE_UP_TO_MAGIC,
    LEGACY_ATTRIBUTES_AT,
    LOG_ENTRY,
    LOG_OVERHEAD,
    MAGIC_AT,
    MAGIC_V2,
    MIN_ENTRY_SIZE,
)
from kfmt.format.message_formats import STRICT, ReadOptions
from kfmt.format.model import NO_PARTITION_LEADER_EPOCH, Batch, int64_values
from kfmt.format.wire import OFFSET_AND_SIZE
from kfmt.partition.companions import control_facts
from kfmt.plugin import registry

from .facts import (
    CORRUPT,
    MISSING,
    TRUNCATED,
    ZEROS,
    Dropped,
    Found,
    OffsetBounds,
    SegmentScan,
    merge_ranges,
    subtract_ranges,
)
from .order import order_segment

MIN_ENTRY = LOG_OVERHEAD + MIN_ENTRY_SIZE  # the smallest entry the broker's reader accepts (docs/format.md §2)
# Positions examined per numpy pass while resynchronising: small first (the next entry is usually
# close), doubling up to the largest.
SEARCH_CHUNKS = (1 << 12, 1 << 22)
ENTRY_START = LOG_ENTRY.dtype()  # offset, size, crc_or_leader_epoch, magic


def examine(buf, pos: int, end: int, rng: OffsetBounds, options: ReadOptions = STRICT
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
    magic = buf[pos + MAGIC_AT]
    fmt = registry.get().formats.get(magic)
    if fmt is None:
        return None, 0, f"unknown magic {magic}"
    entry = memoryview(buf)[pos:pos + LOG_OVERHEAD + size]
    try:
        header = fmt.read_header(entry, pos)
        if not fmt.crc_valid(entry, header):
            return None, 0, f"the stored CRC {header.crc} does not match the entry's bytes"
        # The offsets and the v2 leader epoch are outside the CRC (docs/format.md §2, §4.1): check them.
        first = header.base_offset if header.base_offset is not None else header.last_offset
        if not rng.holds(first, header.last_offset):
            return None, 0, (f"offsets {first}..{header.last_offset} do not belong in this segment "
                             f"(expected offsets in {rng.base}..{rng.limit})")
        if header.magic >= MAGIC_V2 and header.partition_leader_epoch < NO_PARTITION_LEADER_EPOCH:
            return None, 0, f"impossible partition leader epoch {header.partition_leader_epoch}"
        batch = fmt.decode(entry, header, options)
        _check_records(batch, rng)
        control_facts(batch)  # a control record must parse (docs/format.md §4.6)
    except DataError as err:
        return None, 0, err.message
    return batch, LOG_OVERHEAD + size, ""


def _check_records(batch: Batch, rng: OffsetBounds) -> None:
    """Record offsets strictly increase inside the batch's offsets, and a legacy wrapper carries its
    last inner offset (docs/format.md §3.4): what ties the offset field (outside the CRC) to the records."""
    h = batch.header
    if not len(batch):
        return
    offsets = int64_values(batch.records.column(0))
    first, last = int(offsets[0]), int(offsets[-1])
    if (np.diff(offsets) <= 0).any():
        raise DataError("record offsets do not increase")
    if first < max(h.base_offset, rng.base) or last > h.last_offset:
        raise DataError(f"record offsets {first}..{last} fall outside the batch's offsets "
                        f"{h.base_offset}..{h.last_offset} or its segment")
    if h.magic < MAGIC_V2 and h.compression and last != h.last_offset:
        raise DataError(f"wrapper offset {h.last_offset} is not the offset {last} of its last inner "
                        f"message")


def _candidates(arr: np.ndarray, start: int, end: int, rng: OffsetBounds):
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


def _plausible(arr: np.ndarray, lo: int, hi: int, end: int, magics: np.ndarray, rng: OffsetBounds):
    p = np.flatnonzero(np.isin(arr[lo + MAGIC_AT:hi + MAGIC_AT], magics)) + lo
    if not p.size:
        return []
    # each candidate's first bytes (they lie inside the file: _candidates stops MIN_ENTRY before its end)
    head = arr[p[:, None] + np.arange(HEADER_SIZE_UP_TO_MAGIC)].view(ENTRY_START).ravel()
    size, offset = head["size"].astype(np.int64), head["offset"].astype(np.int64)
    return p[(size >= MIN_ENTRY_SIZE) & (p + LOG_OVERHEAD + size <= end)
             & (offset >= rng.base) & (offset <= rng.limit)].tolist()


def scan_segment(buf, file: str, rng: OffsetBounds, options: ReadOptions = STRICT,
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
            if batch.header.magic < MAGIC_V2:
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
    order_segment(scan, buf)
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
    covered = merge_ranges([r for d in scan.dropped for r in d.offsets])
    out = []
    for first, last, at in gaps:
        for a, b in subtract_ranges((first, last), covered):
            out.append(Dropped(scan.file, at, at, MISSING, "no byte of the file holds these offsets: "
                               "bytes cut off or out at entry boundaries", [(a, b)]))
    return out


def _resynchronise(buf, arr: np.ndarray, pos: int, end: int, rng: OffsetBounds, options: ReadOptions,
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
        if h.base_offset <= after or (nested and h.magic < MAGIC_V2 and not h.compression):
            continue
        return at, (batch, size)
    return end, None


def _looks_wrapped(buf, pos: int, end: int) -> bool:
    """Whether the (damaged) entry at `pos` says it is a compressed legacy wrapper."""
    at = pos + LEGACY_ATTRIBUTES_AT
    return at < end and buf[pos + MAGIC_AT] < MAGIC_V2 and bool(buf[at] & CODEC_MASK)


def _claim(buf, pos: int, stop: int, end: int, rng: OffsetBounds) -> tuple[int, int] | None:
    """The offsets the damaged entry at `pos` claims, if its frame is intact: its size field leads
    exactly to `stop` and its header reads, with offsets inside the segment (a legacy wrapper's first
    offset is unknown: its last one is claimed)."""
    if stop == end or _declared_end(buf, pos, end) != stop:
        return None
    fmt = registry.get().formats.get(buf[pos + MAGIC_AT])
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
