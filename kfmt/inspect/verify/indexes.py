"""Checks of `.index` and `.timeindex` contents against the segment's batches (docs/format.md §6).

After a clean shutdown a broker trusts these files without validating them (docs/format.md §6.6), so a wrong entry
silently breaks fetches and time lookups. What lookups rely on, from Kafka's sources:

Offset index (OffsetIndex.java, LogSegment.translateOffset / readNextOffset, §6.5):
* entries strictly increase in offset (`append` throws otherwise; `lookup` binary-searches offsets)
  and in position (`fetchUpperBoundOffset` binary-searches positions);
* an entry (O, P) points at the start of an entry of the `.log` (P is where the scan starts) and
  every batch before P ends below O (a lookup of O must not need anything before P);
* O is at most the segment's last offset: `readNextOffset` finds the log end by reading from the
  last entry's offset, and gets the segment's base offset when no batch reaches it.
  Which offset between those bounds is not checked: Kafka 3.x indexes the last offset of the append
  starting at P (`LogSegment.append`; `recover` per batch), so live appends of uncompressed v0/v1 data,
  one entry per produce request, name the request's last message while P is its first one
  (kafka-dump-log reports those as mismatches; they are genuine), and brokers before 0.11 indexed the
  append's first offset instead. Lookups are correct with any of them.

Time index (TimeIndex.java, LogSegment.findOffsetByTimestamp / largestTimestamp, §6.3):
* timestamps strictly increase and offsets do not decrease (`maybeAppend` only appends a larger
  timestamp and throws on a smaller offset; `lookup` binary-searches timestamps);
* an entry (T, X) records the running maximum: the batch holding X has maxTimestamp T and every
  batch before it has a smaller one ("any message whose timestamp is greater than TIMESTAMP must come
  after OFFSET"). X is normally the batch's last offset; a live append of an uncompressed v2 batch
  names the record holding the maximum instead, inside the batch (genuine; DumpLogSegments flags it);
* the last entry carries the segment's largest timestamp: Kafka adds it on roll and close and uses it
  as the segment's `largestTimestamp` (retention, which segment a time lookup starts in). A copy of
  the active segment taken from a running broker lacks it: a note, not a problem.

Both files of the active segment of a running broker are preallocated and zero-filled past their
entries (docs/format.md §6.4): reading stops at the first zero slot; that tail is a note for the last segment and a
problem elsewhere (an inactive segment's indexes are trimmed on roll, and Kafka would take the zero
slots for entries).
"""
from __future__ import annotations

import numpy as np

from kfmt.partition import indexes
from kfmt.partition.layout import PartitionDir

from .segment_columns import SegmentColumns
from .problems import VerifyReport

OFFSET_ENTRY_SIZE = indexes.OFFSET_ENTRY.size
TIME_ENTRY_SIZE = indexes.TIME_ENTRY.size


def _entries_and_tail(data, entry_size: int, columns, base_offset: int):
    """(entries as columns -- kfmt.partition.indexes.offset_columns or time_columns, `columns` -- or
    None, position where the entries end, zero_tail_bytes, nonzero_tail) of an index file."""
    whole = len(data) // entry_size * entry_size
    body = np.frombuffer(data, np.uint8, count=whole)
    # nothing but preallocated zeros: no entries at all (slot 0 is zero too). Not a file of one slot:
    # preallocated files are segment.index.bytes long, a trimmed one holds its entries only, and a
    # single entry may well be zero (a time index's (timestamp 0, the base offset) of a segment whose
    # records all have timestamp 0)
    if whole > entry_size and not body.any():
        return None, 0, whole, False
    found = columns(data, base_offset)
    end = len(found) * entry_size
    tail = body[end:whole]
    return found, end, len(tail), bool(tail.any())


def _batch_column(values) -> np.ndarray:
    return np.frombuffer(values, np.int64) if len(values) else np.zeros(0, np.int64)


def offset_entries_clean(cols: indexes.OffsetColumns, facts: SegmentColumns) -> bool:
    """Whether check_offset_index's walk over the entries would report nothing, judged on all of them
    at once (half a million entries for 2 GB of log: a Python loop over them was a tenth of verify);
    False where it cannot tell, and the walk decides."""
    positions, lasts = _batch_column(facts.positions), _batch_column(facts.last_offsets)
    if not len(positions) or (np.diff(positions) <= 0).any():
        return False  # index_at's bisection is a sorted search only over increasing positions
    o, p = cols.offsets, cols.positions
    at = np.searchsorted(positions, p, "left")
    starts = (at < len(positions)) & (positions[np.minimum(at, len(positions) - 1)] == p)
    before = np.where(at > 0, lasts[np.maximum(at - 1, 0)], np.iinfo(np.int64).min)
    return bool((o >= facts.segment.base_offset).all() and (o <= lasts[-1]).all()
                and (np.diff(o) > 0).all() and (np.diff(p) > 0).all() and starts.all() and (before < o).all())


def time_entries_clean(cols: indexes.TimeColumns, facts: SegmentColumns) -> bool:
    """The same for check_time_index's walk."""
    bases, lasts = _batch_column(facts.base_offsets), _batch_column(facts.last_offsets)
    max_ts = _batch_column(facts.max_timestamps)
    if not len(lasts) or (np.diff(lasts) < 0).any():
        return False  # index_holding's bisection is a sorted search only over ordered last offsets
    t, x = cols.timestamps, cols.offsets
    at = np.searchsorted(lasts, x, "left")
    held = (at < len(lasts)) & ((bases[np.minimum(at, len(lasts) - 1)] <= x) | (not facts.exact_bases))
    if not held.all():
        return False
    prefix = np.maximum.accumulate(np.concatenate(([-1], max_ts)))  # as the walk's
    return bool((np.diff(t) > 0).all() and (np.diff(x) >= 0).all() and (x >= facts.segment.base_offset).all()
                and (max_ts[at] == t).all() and (prefix[at] < t).all())


class IndexChecker:
    def __init__(self, part: PartitionDir, report: VerifyReport):
        self.part = part
        self.report = report
        self.preloaded: dict[str, bytes] = {}

    def preload(self, seg) -> None:
        """Read the index files of a segment a running broker may be appending to BEFORE its log:
        a broker writes index entries after the batches they point at (LogSegment.append), so
        entries read first never point past the log read next."""
        for info in (seg.index, seg.timeindex):
            if info is not None:
                self.preloaded[info.path] = self.part.storage.read(info.path)

    def _read(self, info):
        self.report.counts.files += 1
        data = self.preloaded.pop(info.path, None)
        return self.part.storage.read(info.path) if data is None else data

    def _check_layout(self, data, file: str, entry_size: int, end: int, tail_bytes: int,
                      nonzero_tail: bool, active: bool, kind: str) -> bool:
        """File-size and tail checks shared by both indexes; True if a preallocated zero tail was found."""
        report = self.report
        if len(data) % entry_size:
            whole = len(data) // entry_size * entry_size
            report.error(f"{kind}-format", f"file of {len(data)} bytes ends with {len(data) - whole} "
                         f"bytes of a partial entry (expected a multiple of the {entry_size}-byte entry "
                         f"size, {kind.replace('-', ' ')} sanityCheck)", file, whole)
        if nonzero_tail:
            report.error(f"{kind}-format", f"entry {end // entry_size} has relative offset 0 after the "
                         f"first slot: entries must increase, so readers stop here and ignore the "
                         f"{tail_bytes} bytes that follow", file, end)
        elif tail_bytes:
            count = end // entry_size
            message = f"{tail_bytes} zero-filled bytes follow the {count} entr{'y' if count == 1 else 'ies'}"
            if active:
                report.note(f"{kind}-preallocated", f"{message}: the preallocated index of the active "
                            f"segment of a running broker (trimmed on roll and clean shutdown)", file, end)
            else:
                report.error(f"{kind}-format", f"{message}: an inactive segment's index is trimmed on "
                             f"roll, and Kafka would read the zeros as entries (base offset, position 0)",
                             file, end)
            return True
        return False

    # --- .index ---
    def check_offset_index(self, facts: SegmentColumns, active: bool) -> bool:
        """Returns True if the file is a preallocated (running broker) one."""
        seg, report = facts.segment, self.report
        if seg.index is None:
            report.note("offset-index-missing", "the segment has no .index: Kafka's log loading "
                        "recovers the segment whole, rebuilding its .index and .timeindex from the log "
                        "(LogSegment.sanityCheck throws NoSuchFileException, LogLoader recovers the "
                        "segment)", facts.file)
            return False
        file = self.part.display(seg.index)
        data = self._read(seg.index)
        cols, end, tail_bytes, nonzero = _entries_and_tail(data, OFFSET_ENTRY_SIZE, indexes.offset_columns,
                                                           seg.base_offset)
        preallocated = self._check_layout(data, file, OFFSET_ENTRY_SIZE, end, tail_bytes, nonzero,
                                          active, "offset-index")
        last_offset = facts.last_offset
        prev = None
        clean = cols is None or offset_entries_clean(cols, facts)
        for slot, entry in enumerate([] if clean else indexes.offset_entries(cols)):
            where = (file, slot * OFFSET_ENTRY_SIZE, entry.offset)
            o, p = entry.offset, entry.position
            if o < seg.base_offset:
                report.error("offset-index-entry", f"entry (offset {o}, position {p}) names an offset below "
                             f"the segment base {seg.base_offset} (a negative relative offset)", *where)
            if prev is not None and (o <= prev.offset or p <= prev.position):
                report.error("offset-index-entry", f"entry (offset {o}, position {p}) does not follow entry "
                             f"(offset {prev.offset}, position {prev.position}): expected offsets and "
                             f"positions to strictly increase", *where)
            prev = entry
            if last_offset is None or o > last_offset:
                report.error("offset-index-entry", f"entry (offset {o}, position {p}) names an offset past "
                             f"the log: the segment's last offset is {last_offset} (expected at most "
                             f"that; Kafka reads the log end from the last entry)", *where)
            i = facts.index_at(p)
            if i is None:
                if p < 0:
                    report.error("offset-index-entry", f"entry (offset {o}, position {p}) names a negative "
                                 f"position (expected the position where an entry starts)", *where)
                elif p >= facts.readable_end:
                    size = facts.segment.log.size
                    what = (f"the end of the log ({size} bytes)" if facts.readable_end == size else
                            f"the readable part of the log (it ends at position {facts.readable_end})")
                    report.error("offset-index-entry", f"entry (offset {o}, position {p}) points past "
                                 f"{what}", *where)
                else:
                    inside = facts[max(0, facts.index_before(p))]
                    report.error("offset-index-entry", f"entry (offset {o}, position {p}) points inside "
                                 f"the entry at position {inside.position} ({inside.size} bytes, offsets "
                                 f"{inside.base_offset}..{inside.last_offset}): expected the position "
                                 f"where an entry starts", *where)
                continue
            if i > 0 and facts.last_offsets[i - 1] >= o:
                before = facts[i - 1]
                report.error("offset-index-entry", f"entry (offset {o}, position {p}): the entry before "
                             f"position {p} (at {before.position}) already holds offset "
                             f"{before.last_offset} >= {o}, so lookups starting at {p} miss it (expected "
                             f"every earlier batch to end below {o})", *where)
        return preallocated

    # --- .timeindex ---
    def check_time_index(self, facts: SegmentColumns, active: bool, running_copy: bool) -> None:
        seg, report = facts.segment, self.report
        largest = facts.max_timestamp
        if seg.timeindex is None:
            # Without its .index the segment is recovered whole on load (LogSegment.sanityCheck throws
            # NoSuchFileException for the offset index; LogLoader recovers the segment), which
            # rebuilds the time index too: the "offset-index-missing" note covers it. Only beside an
            # existing .index does a missing .timeindex stay unrebuilt.
            if largest >= 0 and seg.index is not None:
                report.error("time-index-missing", f"the segment has no .timeindex although its batches "
                             f"carry timestamps (largest {largest}) and its .index exists: Kafka creates "
                             f"an empty one and never rebuilds it, so time lookups and retention lose "
                             f"this segment's timestamps", facts.file)
            return
        file = self.part.display(seg.timeindex)
        data = self._read(seg.timeindex)
        cols, end, tail_bytes, nonzero = _entries_and_tail(data, TIME_ENTRY_SIZE, indexes.time_columns,
                                                           seg.base_offset)
        entries = [] if cols is None or time_entries_clean(cols, facts) else indexes.time_entries(cols)
        running_copy = self._check_layout(data, file, TIME_ENTRY_SIZE, end, tail_bytes, nonzero, active,
                                          "time-index") or running_copy
        # prefix[i] = the largest maxTimestamp of the batches before batch i
        prefix = np.maximum.accumulate(np.concatenate(([-1], np.frombuffer(facts.max_timestamps, np.int64))))
        prev = None
        for slot, entry in enumerate(entries):
            t, x = entry.timestamp, entry.offset
            where = (file, slot * TIME_ENTRY_SIZE, x)
            if prev is not None and t <= prev.timestamp:
                report.error("time-index-order", f"entry (timestamp {t}, offset {x}) is not later than the "
                             f"previous entry's timestamp {prev.timestamp}: expected strictly increasing "
                             f"timestamps (lookups binary-search them)", *where)
            if prev is not None and x < prev.offset:
                report.error("time-index-order", f"entry (timestamp {t}, offset {x}) names an offset below "
                             f"the previous entry's {prev.offset}: expected non-decreasing offsets", *where)
            prev = entry
            if x < seg.base_offset:
                report.error("time-index-entry", f"entry (timestamp {t}, offset {x}) names an offset below "
                             f"the segment base {seg.base_offset}", *where)
                continue
            i = facts.index_holding(x)
            if i is None:
                report.error("time-index-entry", f"entry (timestamp {t}, offset {x}) names an offset no "
                             f"batch of the segment holds (its offsets end at {facts.last_offset})", *where)
                continue
            holder = facts[i]
            if holder.max_timestamp != t:
                report.error("time-index-entry", f"entry (timestamp {t}, offset {x}): the batch holding "
                             f"offset {x} (offsets {holder.base_offset}..{holder.last_offset}, position "
                             f"{holder.position}) has maxTimestamp {holder.max_timestamp}, expected {t}",
                             *where)
            # prefix starts at -1 (no batch): an entry's timestamp of -1 or below matches it alone
            j = next((j for j in range(i) if facts.max_timestamps[j] >= t), None) if prefix[i] >= t else None
            if j is not None:
                earlier = facts[j]
                report.error("time-index-entry", f"entry (timestamp {t}, offset {x}): an earlier batch "
                             f"(offsets {earlier.base_offset}..{earlier.last_offset}, position "
                             f"{earlier.position}) already has timestamp {earlier.max_timestamp} >= {t}, "
                             f"so lookups of timestamps from {t} start too late (expected the first batch "
                             f"reaching {t})", *where)
        some = cols is not None and len(cols) > 0
        last = int(cols.timestamps[-1]) if some else -1
        if largest > last:
            message = (f"the last entry's timestamp is {last if some else 'absent (no entries)'} but the "
                       f"segment's largest timestamp is {largest}")
            if active and running_copy:
                report.note("time-index-final", f"{message}: the active segment of a running broker gets its "
                            f"final entry on roll or clean shutdown", file, end)
            else:
                report.error("time-index-final", f"{message}: Kafka takes the last entry as the segment's "
                             f"largest timestamp (retention, time lookups); expected a final entry "
                             f"(timestamp {largest})", file, end)

