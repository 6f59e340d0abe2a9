"""verify's log walk many entries at a time: runs of entries with nothing to report.

A segment of one-message v0/v1 entries or of small v2 batches holds hundreds of thousands of
entries; decoding each into a Batch and checking it in Python (LogChecker._check_batch) is most of
what `kfmt verify` spends. Most entries are fine, and the compiled `clean_entries`
(kfmt.format.clean_runs, kfmt/csrc/verify.c) says which: uncompressed messages and uncompressed v2 data batches whose CRC,
record structure and record offsets and timestamps _check_batch would accept. For such a run the
offset checks of LogChecker._check_offsets are made on the whole run with numpy; when none of them
would report anything, the run is counted and added to the segment's columns at once, and the
observers (the leader-epoch and transaction checks) see only the rows they ask for (`wants`).
Compressed data batches and wrappers join a run, at `--deep` when `compressed_clean` vouches for them:
inflated and their records walked without columns a run at a time (kfmt.format.inflated_runs.walk),
and judged by the same rules; at the default depth when they pass log recovery's check of the stored
bytes (`stored_clean`: framing and the CRC over the still-compressed bytes, never inflated).
Anything else (a run an offset check would complain about, control batches, damaged
entries) goes through the per-entry checks, which remain the definition of every message.
"""
from __future__ import annotations

from typing import Iterator

import numpy as np

from kfmt.format import clean_runs, copied_runs, inflated_runs
from kfmt.format.layout import ATTR_CONTROL, ATTR_TRANSACTIONAL, MAGIC_V1, MAGIC_V2
from kfmt.format.frames import FRAME_DTYPE
from kfmt.format.inflated_runs import DISORDERED, HAS_TS
from kfmt.format.message_formats import STRICT
from kfmt.format.model import INT32_MAX, NO_PARTITION_LEADER_EPOCH, TimestampType


def split(buf, rows: np.ndarray, deep: bool = True) -> Iterator[tuple[np.ndarray, int | None]]:
    """`rows` (a chunk of a whole segment's frames) in consecutive pieces: (run, record count) for
    runs the kernels vouch for, (rows, None) for the rest. Without the kernels, one piece: the
    whole chunk, unvouched. At `deep`, a compressed wrapper's row in a run has its first inner
    offset as its base offset, as its decoded header would; at the default depth it keeps its last
    (the frame's), and its records are not in the count (`uncounted_wrappers`)."""
    if not clean_runs.vouches() or rows.dtype != FRAME_DTYPE:
        yield rows, None
        return
    rows = np.array(rows)  # a copy: wrapper rows get their decoded base offset
    start = 0
    while start < len(rows):
        stop, records = _vouched(buf, rows, start, len(rows), deep)
        if stop > start:
            yield rows[start:stop], records
        if stop < len(rows):
            # the first entry it does not vouch for, and those after it up to the next clean one
            end = stop + 1
            while end < len(rows) and _vouched(buf, rows, end, end + 1, deep)[0] == end:
                end += 1
            yield rows[stop:end], None
            stop = end
        start = stop


def _vouched(buf, rows: np.ndarray, start: int, stop: int, deep: bool) -> tuple[int, int]:
    """(where it stopped, records) of the entries from `start` the kernels vouch for: uncompressed
    ones (clean_entries) and compressed data batches (`_inflated_clean` at `deep`, else
    `stored_clean`), in one run."""
    records = 0
    while start < stop:
        at, n = clean_runs.clean_entries(buf, rows, start, stop)
        records += n
        if at < stop and rows["compression"][at]:
            clean, n = (_inflated_clean if deep else stored_clean)(buf, rows, at, stop)
            records += n
            at += clean
        if at == start:
            break
        start = at
    return start, records


def _inflated_clean(buf, rows: np.ndarray, at: int, stop: int) -> tuple[int, int]:
    """(entries, records) from `at` that compressed_clean vouches for, inflated and walked; their
    wrappers' rows get their first inner offset as base offset."""
    walked = inflated_runs.walk(buf, rows, at, stop, 0, STRICT, digest=False)
    clean = compressed_clean(rows[at:walked.stop], walked.facts)
    wrappers = np.flatnonzero(rows["magic"][at:at + clean] < 2)
    rows["base_offset"][at + wrappers] = walked.facts["first"][wrappers]
    return clean, int(walked.facts["records"][:clean].sum())


def stored_clean(buf, rows: np.ndarray, at: int, stop: int) -> tuple[int, int]:
    """(entries, records) of the compressed data entries from `at` that pass what Kafka's log
    recovery asks of a batch (LogSegment.recover: RecordBatch.ensureValid, the CRC over the stored,
    still-compressed bytes, docs/format.md §3.1 and §4.1), checked in place and never inflated
    (copied_runs.entries_digest, the check byte-for-byte copies make). Records are the v2 headers'
    counts; a v0/v1 wrapper's are known only inflated (docs/format.md §3.4), so not counted here.
    Control batches are left to the per-entry check, which decodes them: the transaction checks
    need their markers."""
    piece = rows[at:stop]
    other = np.flatnonzero((piece["compression"] == 0)
                           | ((piece["magic"] >= MAGIC_V2) & (piece["attributes"] & ATTR_CONTROL != 0)))
    end = at + (int(other[0]) if len(other) else len(piece))
    checked = copied_runs.entries_digest(buf, rows, at, end)[0] if end > at else at
    taken = rows[at:checked]
    return checked - at, int(taken["records_count"][taken["magic"] >= MAGIC_V2].sum())


def uncounted_wrappers(rows: np.ndarray) -> int:
    """The compressed v0/v1 wrappers among `rows`: records the default depth does not count."""
    return int(((rows["magic"] < MAGIC_V2) & (rows["compression"] != 0)).sum())


def compressed_clean(rows: np.ndarray, facts: np.ndarray) -> int:
    """How many of the compressed data batches (v2) and wrappers (v0/v1) of `rows`, walked
    (kfmt.format.inflated_runs.walk: inflated, decoded strictly, their records' facts taken without
    columns), from the first, LogChecker._check_batch would find nothing wrong with, judged by the
    rules of _check_records and _check_inner_messages; the entry after them is for those checks."""
    v2 = rows["magic"] >= MAGIC_V2
    flags = facts["flags"]
    hi = np.where(flags & HAS_TS, facts["max_ts"], -1)
    clean = ((flags & DISORDERED) == 0) & (facts["last"] <= rows["last_offset"])
    # a wrapper carries its last inner offset; inner magics other than its own are noted
    clean &= v2 | ((facts["last"] == rows["last_offset"]) & ((flags >> 8) & 0xFF == 1 << rows["magic"]))
    clean &= ~v2 | (facts["first"] >= rows["base_offset"])
    create_time = (rows["magic"] >= MAGIC_V1) & (rows["timestamp_type"] == TimestampType.CREATE_TIME.value)
    clean &= ~create_time | (hi <= rows["max_timestamp"])
    clean |= v2 & (facts["records"] == 0)  # an empty batch: no record to check
    refused = np.flatnonzero(~clean)
    return int(refused[0]) if len(refused) else len(rows)


def offsets_clean(rows: np.ndarray, prev_last: int | None, segment_base: int, first: bool) -> bool:
    """Whether LogChecker._check_offsets would find nothing to report in any of `rows`, given the
    last offset before them (`prev_last`) and whether the first is the segment's first batch."""
    base, last = rows["base_offset"], rows["last_offset"]
    before = np.empty_like(last)
    before[1:] = last[:-1]
    if prev_last is not None:
        before[0] = prev_last
    follows = base > before
    if prev_last is None:
        follows[0] = True
    return bool((last >= base).all() and follows.all()
                and not (first and base[0] < segment_base)
                and not ((rows["magic"] >= MAGIC_V2)
                         & (rows["partition_leader_epoch"] < NO_PARTITION_LEADER_EPOCH)).any()
                and (last - segment_base <= INT32_MAX).all())


def add_clean_run(checker, rows: np.ndarray, records: int, facts, file: str, batch_facts) -> bool:
    """Account for a run clean_entries vouched for as _check_batch would, if no offset check
    complains about it; False (nothing done) when one would, for the per-entry checks to report.
    `batch_facts`: the BatchFacts class (kfmt.inspect.verify.log) the observers are shown."""
    if not offsets_clean(rows, checker.prev_last, facts.segment.base_offset, first=not len(facts)):
        return False
    report = checker.report
    report.counts.batches += len(rows)
    report.counts.records += records
    if not checker.deep:
        wrappers = uncounted_wrappers(rows)
        report.counts.uncounted_wrappers += wrappers
        facts.exact_bases &= not wrappers
    for name, column in (("positions", "position"), ("sizes", "size"), ("base_offsets", "base_offset"),
                         ("last_offsets", "last_offset"), ("max_timestamps", "max_timestamp")):
        getattr(facts, name).frombytes(rows[column].astype(np.int64).tobytes())
    _observe(checker.observers, rows, file, report, batch_facts)
    checker.prev_last, checker.prev_file = int(rows["last_offset"][-1]), file
    return True


def inner_messages_clean(batch, magic: int) -> bool:
    """Whether LogChecker._check_inner_messages would find nothing to report in a decoded wrapper,
    judged on its per-message facts as arrays when the decode kept them so (LegacyInfos.rows)
    rather than one object per inner message."""
    rows = getattr(batch.legacy, "rows", None)
    if not isinstance(rows, np.ndarray):
        return False
    return bool(rows["crc_valid"].all() and (rows["magic"] == magic).all())


def _observe(observers, rows: np.ndarray, file: str, report, batch_facts) -> None:
    """on_batch for the rows any observer wants, each row shown to its observers in turn (as the
    per-entry walk does, so that what they report comes in the same order)."""
    masks = []
    for observer in observers:
        wants = getattr(observer, "wants", None)
        masks.append(np.ones(len(rows), bool) if wants is None else np.asarray(wants(rows), bool))
    if not masks:
        return
    picked = np.flatnonzero(np.logical_or.reduce(masks))
    if not len(picked):
        return
    columns = [rows[c][picked].tolist() for c in ("position", "size", "base_offset", "last_offset",
                                                  "max_timestamp", "magic", "producer_id",
                                                  "producer_epoch", "partition_leader_epoch", "attributes")]
    for i, (position, size, base, last, max_ts, magic, pid, pepoch, epoch, attrs) in zip(picked.tolist(),
                                                                                        zip(*columns)):
        facts = batch_facts(position=position, size=size, base_offset=base, last_offset=last,
                           max_timestamp=max_ts, magic=magic, producer_id=pid, producer_epoch=pepoch,
                           is_transactional=magic >= MAGIC_V2 and bool(attrs & ATTR_TRANSACTIONAL),
                           is_control=False, partition_leader_epoch=epoch)
        for observer, mask in zip(observers, masks):
            if mask[i]:
                observer.on_batch(facts, file, report)
