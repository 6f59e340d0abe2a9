"""The facts of a run of uncompressed entries -- how many records, the first and last offset, the
least and greatest timestamp -- without record columns: what `kfmt info` counts and `kfmt archive`
records about a segment.

`entry_facts` walks consecutive uncompressed v0/v1 messages and uncompressed v2 data batches of a
segment's frame rows (kfmt.format.frames), each checked as decode checks it (structure, CRC), up to
the first row it leaves to the caller's per-batch path: a compressed or control entry, a magic no
format here knows, or an entry decode refuses (the caller's decode then reports it). The compiled
kernel (kfmt/csrc/facts.c) reads the facts where the bytes lie; `entry_facts_reference`, the
definition, decodes each entry and reads its columns. tests/inspect/test_info_facts.py and
tests/format/test_entry_facts.py hold the two together.

Timestamps are the records' as decode gives them (a LogAppendTime batch's for all of its records);
-1 (NO_TIMESTAMP) is no timestamp and left out, other negative ones are not.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from kfmt.errors import DataError
from kfmt.format import segment
from kfmt.format.frames import FRAME_DTYPE, header_of
from kfmt.format.kernels import native
from kfmt.format.layout import ATTR_CONTROL, MAGIC_V2
from kfmt.format.message_formats import STRICT
from kfmt.format.model import NO_TIMESTAMP


class EntryFacts(NamedTuple):
    records: int
    first_offset: int | None  # None: the run holds no record
    last_offset: int | None
    min_timestamp: int | None  # None: no record of the run has a timestamp
    max_timestamp: int | None
    offsets_increasing: bool  # from record to record across the run
    inner_magics: int  # a bit mask of a compressed wrapper's inner messages' magics; 0 here


def entry_facts(data, rows: np.ndarray, start: int, stop: int, base: int = 0) -> tuple[int, EntryFacts]:
    """(where it stopped, the facts of rows[start:that]) of `data`, the file from position `base` on."""
    if native is None:
        return entry_facts_reference(data, rows, start, stop, base)
    if rows.dtype != FRAME_DTYPE or not rows.flags.c_contiguous:
        rows = np.ascontiguousarray(rows.astype(FRAME_DTYPE, copy=False))
    at, facts = native.entry_facts(data, rows, start, stop, base)
    return at, EntryFacts._make(facts)


def entry_facts_reference(data, rows: np.ndarray, start: int, stop: int, base: int = 0) -> tuple[int, EntryFacts]:
    records, first, last, low, high, increasing, i = 0, None, None, None, None, True, start
    for i in range(start, stop):
        row = rows[i]
        if row["compression"] or row["magic"] > MAGIC_V2 or (row["magic"] == MAGIC_V2
                                                             and row["attributes"] & ATTR_CONTROL):
            break
        try:
            batch = segment.decode(data, header_of(row.item()), "", STRICT, base)
        except DataError:  # the caller's decode of this row reports it
            break
        offsets = batch.records.column(0).to_numpy()
        if not len(offsets):
            continue
        stamps = batch.records.column(1).to_numpy()
        stamps = stamps[stamps != NO_TIMESTAMP]
        increasing &= bool((np.diff(offsets) > 0).all()) and (last is None or int(offsets[0]) > last)
        records, last = records + len(offsets), int(offsets[-1])
        first = int(offsets[0]) if first is None else first
        if len(stamps):
            low = int(stamps.min()) if low is None else min(low, int(stamps.min()))
            high = int(stamps.max()) if high is None else max(high, int(stamps.max()))
    else:
        i = stop
    return i, EntryFacts(records, first, last, low, high, increasing, 0)
