"""Per-partition summaries: segments, offset and time ranges, bytes, batches, records, and a census of
(magic, compression) -- the answer to "how much old-format data is still here?".

Batches and records are counted as a consumer sees the partition: from its log start offset
(PartitionDir.log_start_offset) on, unless `include_deleted`; segments and bytes are the files on
disk, whatever they hold.

A compressed batch is counted from its header (kfmt.format.copied_runs.header_counts), as reading a
log's size needs no more: a v2 batch says how many records it holds, its last offset and greatest
timestamp; a compressed v0/v1 wrapper says only its last offset and timestamp, so wrappers are
counted apart (`uncounted_wrappers`), and where compressed data is present the least timestamp is
unknown (None). `deep` inflates every compressed batch and counts every record (`check` "records")."""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field

import numpy as np

from kfmt.errors import DataError
from kfmt.format import inflated_runs
from kfmt.format.copied_runs import header_counts
from kfmt.format.entry_facts import entry_facts
from kfmt.format.frames import header_of, rows_of
from kfmt.format.inflated_runs import HAS_TS
from kfmt.format.layout import MAGIC_V2
from kfmt.format.message_formats import STRICT
from kfmt.format.model import NO_TIMESTAMP
from kfmt.format.segment import decode
from kfmt.inspect.per_partition import map_partitions
from kfmt.partition.layout import PartitionDir
from kfmt.partition.live import read_whole
from kfmt.partition.reader import PartitionReader
from kfmt.partition.summary import ENTRIES_CHECK, RECORDS_CHECK
from kfmt.plugin import registry


@dataclass
class FormatCount:
    batches: int = 0
    records: int = 0
    bytes: int = 0


@dataclass
class PartitionInfo:
    topic: str | None
    partition: int | None
    path: str
    segments: int = 0
    bytes: int = 0  # of .log files
    batches: int = 0
    records: int = 0  # data records (control records counted apart)
    control_records: int = 0
    first_offset: int | None = None  # of the first record
    last_offset: int | None = None  # of the last record
    log_start_offset: int | None = None  # where a broker serves from (PartitionDir.log_start_offset)
    log_end_offset: int | None = None  # the last segment's next offset (its base offset when empty)
    min_timestamp: int | None = None  # over records that carry one
    max_timestamp: int | None = None
    census: dict = field(default_factory=dict)  # (magic, codec name) -> FormatCount
    check: str = ENTRIES_CHECK  # "records": every compressed batch inflated (deep)
    uncounted_wrappers: int = 0  # compressed v0/v1 wrappers, not in `records` (not deep)

    def to_json(self) -> dict:
        out = {k: v for k, v in self.__dict__.items() if k != "census"}
        out["formats"] = [{"magic": m, "compression": c, **vars(n)}
                          for (m, c), n in sorted(self.census.items())]
        return out


def partition_infos(parts: list[PartitionDir], include_deleted: bool = False,
                    deep: bool = False) -> list[PartitionInfo]:
    """partition_info of each, in parallel where it pays (kfmt.inspect.per_partition)."""
    return map_partitions(functools.partial(partition_info, include_deleted=include_deleted, deep=deep),
                          parts, "info")


def partition_info(part: PartitionDir, include_deleted: bool = False, deep: bool = False) -> PartitionInfo:
    """The partition's summary; a running broker's partition is read again from a new listing
    when a segment goes while it is counted (kfmt.partition.live)."""
    return read_whole(part, lambda p: _partition_info(p, include_deleted, deep))


def _partition_info(part: PartitionDir, include_deleted: bool, deep: bool = False) -> PartitionInfo:
    walk = InfoWalk(part, include_deleted, deep)
    PartitionReader(part, recover_tail=True).walk([walk])
    return walk.result()


class InfoWalk:
    """A partition's PartitionInfo, added up from its entries as a SegmentWalker
    (kfmt.partition.reader) is shown them: by PartitionReader.walk for `kfmt info`, or by verify's
    log check beside verify's own checks (the report: one pass over the bytes for both). The first
    bad data ends it (`error`, raised by result()), as `kfmt info` stops there."""

    def __init__(self, part: PartitionDir, include_deleted: bool = False, deep: bool = False):
        self.part = part
        # A partition without segments is loaded as one empty segment at its log start offset
        # (LogLoader.recoverLog: the checkpoint's entry, else 0): both offsets are that.
        empty_start = None if part.segments else part.log_start_entry or 0
        info = PartitionInfo(part.topic, part.partition, part.storage.url_of(part.path),
                             segments=len(part.segments), log_start_offset=part.log_start_offset,
                             log_end_offset=empty_start, check=RECORDS_CHECK if deep else ENTRIES_CHECK)
        if empty_start is not None:
            info.log_start_offset = empty_start
        floor = None if include_deleted or info.log_start_offset is None else info.log_start_offset
        self.info, self.counter = info, _Counter(info, floor)
        self.error: DataError | None = None
        self.done = False

    def on_segment(self, seg, d) -> None:
        self.info.bytes += seg.size
        # The log end offset is the last segment's next offset, its base offset when it holds no
        # batch (LogSegment.readNextOffset, UnifiedLog.logEndOffset): set here, raised by its batches.
        self.info.log_end_offset = seg.base_offset

    def on_chunk(self, seg, d, rows: np.ndarray) -> None:
        try:
            self.counter.add_rows(seg, d, rows)
        except DataError as err:
            self.error, self.done = err, True

    def on_tail(self, seg, d, tail) -> None:
        if self.done or not tail.is_error:
            return
        # as PartitionReader.frames: only the last segment's tail is recovered
        if seg is not self.part.segments[-1]:
            self.error, self.done = tail.error(d.file), True
        else:
            tail.recovered(d.file)

    def result(self) -> PartitionInfo:
        """The partition's info; raises the DataError that ended the walk."""
        if self.error is not None:
            raise self.error
        self.info.census = self.counter.census
        if self.counter.min_unknown:
            self.info.min_timestamp = None
        return self.info


class _Counter:
    """Adds a partition's batches up into its PartitionInfo, in file order. The per-batch path
    (add_header: decode, then the batch's columns) is the definition; add_rows gives the same from a
    chunk of frame rows without columns, many entries at a time: runs of uncompressed entries checked
    and walked where they lie (kfmt.format.entry_facts), compressed batches inflated and their records
    walked (kfmt.format.inflated_runs, where it can walk), every other entry (control batches,
    anything those leave to decode, the batch the log start offset cuts) through the per-batch path."""

    def __init__(self, info: PartitionInfo, floor: int | None):
        self.info, self.floor = info, floor
        self.reg = registry.get()
        self.census: dict = {}
        self.first_known = False  # info.first_offset is final (None where a wrapper comes first)
        self.min_unknown = False  # a compressed batch was counted from its header

    def add_header(self, seg, d, header) -> None:
        info, floor = self.info, self.floor
        if floor is not None and header.last_offset < floor:
            info.log_end_offset = header.next_offset
            return  # deleted: a broker no longer serves it
        if (info.check == ENTRIES_CHECK and header.compression and not header.is_control
                and (floor is None or header.magic < MAGIC_V2 or header.base_offset >= floor)):
            self._add_headers(None, rows_of([header]), 0, 1)  # counted from its header
            info.log_end_offset = header.next_offset
            return
        batch = decode(d.buf, header, d.file, STRICT, d.base)
        if floor is not None and len(batch) and batch.records.column(0)[0].as_py() < floor:
            batch = _from(batch, floor)
        h, n = batch.header, len(batch)
        self._count(h.magic, h.compression, 1, n, h.size)
        info.log_end_offset = h.next_offset
        if not n:
            return
        if h.is_control:
            info.control_records += n
            return
        import pyarrow.compute as pc

        offsets = batch.records.column(0)
        timestamps = pc.filter(batch.records.column(1), pc.not_equal(batch.records.column(1), NO_TIMESTAMP))
        lo = hi = None
        if len(timestamps):
            lo, hi = (v.as_py() for v in pc.min_max(timestamps).values())
        self._note((n, offsets[0].as_py(), offsets[n - 1].as_py(), lo, hi))

    def add_rows(self, seg, d, rows: np.ndarray) -> None:
        if not len(rows):
            return
        # the next offset after the chunk's last entry, served or not (decode keeps last offsets)
        end = int(rows["last_offset"][-1]) + 1
        if self.floor is not None:
            below = rows["last_offset"] < self.floor
            if below.any():
                rows = rows[~below]
            # a v2 batch the log start offset cuts: its records from the floor on, as decode gives them
            cut = np.flatnonzero((rows["magic"] >= MAGIC_V2) & (rows["base_offset"] < self.floor)).tolist()
        else:
            cut = []
        rows = np.ascontiguousarray(rows)
        n, i = len(rows), 0
        while i < n:
            until = next((c for c in cut if c >= i), n)
            stop, facts = entry_facts(d.buf, rows, i, until, d.base) if until > i else (i, None)
            if stop > i:
                self._add_run(rows[i:stop], facts)
            if stop == n:
                break
            count = self._add_compressed if self.info.check == RECORDS_CHECK else self._add_headers
            taken = count(d, rows, stop, until) if stop < until else 0
            if taken:
                i = stop + taken
                continue
            self.add_header(seg, d, header_of(rows[stop].item()))
            i = stop + 1
        self.info.log_end_offset = end

    def _add_run(self, rows: np.ndarray, facts: tuple) -> None:
        """Uncompressed entries entry_facts vouched for (data only: it stops at control batches)."""
        magics = rows["magic"]
        kinds = np.unique(magics).tolist()
        for magic in kinds:
            mine = rows if len(kinds) == 1 else rows[magics == magic]
            self._count(magic, 0, len(mine), int(mine["records_count"].sum()), int(mine["size"].sum()))
        self._note(facts)

    def _add_compressed(self, d, rows: np.ndarray, start: int, stop: int) -> int:
        """How many compressed data batches and wrappers from rows[start] on (before `stop`) were
        counted from their inflated records, a run at a time (kfmt.format.inflated_runs.walk); the
        entry after them is for the per-batch path (its decode should decide, or the log start
        offset cuts it)."""
        if not rows["compression"][start] or not inflated_runs.can_walk(STRICT):
            return 0
        walked = inflated_runs.walk(d.buf, rows, start, stop, d.base, STRICT, digest=False)
        facts, run = walked.facts, rows[start:walked.stop]
        if self.floor is not None:  # a wrapper the log start offset cuts: its records from it on
            cut = np.flatnonzero((facts["records"] > 0) & (facts["first"] < self.floor))
            if len(cut):
                facts, run = facts[:cut[0]], run[:cut[0]]
        if not len(run):
            return 0
        kinds = run["magic"].astype(np.int64) * 8 + run["compression"]
        for kind in np.unique(kinds).tolist():
            mine = kinds == kind
            self._count(kind // 8, kind % 8, int(mine.sum()), int(facts["records"][mine].sum()),
                        int(run["size"][mine].sum()))
        held = np.flatnonzero(facts["records"])
        timed = facts[(facts["flags"] & HAS_TS) != 0]
        if len(held):
            self._note((int(facts["records"].sum()), int(facts["first"][held[0]]), int(facts["last"][held[-1]]),
                        int(timed["min_ts"].min()) if len(timed) else None,
                        int(timed["max_ts"].max()) if len(timed) else None))
        return len(run)

    def _add_headers(self, d, rows: np.ndarray, start: int, stop: int) -> int:
        """How many compressed data batches and wrappers from rows[start] on (before `stop`) were
        counted from their headers (kfmt.format.copied_runs.header_counts; see the module doc)."""
        compressed = inflated_runs.compressed_entries(rows[start:stop])
        taken = int(np.argmin(compressed)) if not compressed.all() else len(compressed)
        run = rows[start:start + taken]
        if not taken:
            return 0
        wrapper = run["magic"] < 2
        kinds = run["magic"].astype(np.int64) * 8 + run["compression"]
        for kind in np.unique(kinds).tolist():
            mine = kinds == kind
            self._count(kind // 8, kind % 8, int(mine.sum()), int(run["records_count"][mine & ~wrapper].sum()),
                        int(run["size"][mine].sum()))
        counts = header_counts(run)
        self.info.uncounted_wrappers += counts.uncounted
        stamps = run["max_timestamp"][run["max_timestamp"] != NO_TIMESTAMP]
        self.min_unknown = True
        self._note((counts.records, counts.first_offset, int(run["last_offset"][-1]), None,
                    int(stamps.max()) if len(stamps) else None), known=counts.first_known)
        return taken

    def _count(self, magic: int, compression: int, batches: int, records: int, size: int) -> None:
        count = self.census.setdefault((magic, self.reg.codec_name(compression)), FormatCount())
        count.batches += batches
        count.records += records
        count.bytes += size
        self.info.batches += batches

    def _note(self, facts: tuple, known: bool | None = None) -> None:
        """Data records: (how many, first offset, last offset, least and greatest timestamp); `known`:
        whether they settle the first offset (default: where they give one)."""
        records, first, last, lo, hi = facts[:5]
        info = self.info
        info.records += records
        if not self.first_known and (first is not None if known is None else known):
            info.first_offset, self.first_known = first, True
        if last is not None:
            info.last_offset = last
        if lo is not None:
            info.min_timestamp = _min(info.min_timestamp, lo)
        if hi is not None:
            info.max_timestamp = _max(info.max_timestamp, hi)


def _from(batch, floor: int):
    """The batch's records at offsets >= floor (the log start offset lies inside the batch)."""
    import pyarrow.compute as pc

    offsets = batch.records.column(0)
    kept = pc.greater_equal(offsets, floor)
    return dataclasses.replace(batch, records=batch.records.filter(kept))


def _min(a, b):
    return b if a is None else min(a, b)


def _max(a, b):
    return b if a is None else max(a, b)
