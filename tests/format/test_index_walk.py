"""Log recovery's index walk (kfmt.format.index_walk): the compiled walk gives what the reference
gives, entries and state, and stops at the same row, on segments of every shape (hypothesis) with
rows SegmentIndexer refuses among them (a position out of file order, an offset not above the last,
one beyond the index's int32 relative offset); and SegmentIndexer's files from rows equal those
from headers one by one. The entries themselves are checked against the `.index` and `.timeindex`
files real brokers wrote (tests/partition/test_log_recovery.py)."""
from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from support.kernels import SETTINGS, both, segments

from kfmt.errors import DataError, UsageError
from kfmt.format import segment
from kfmt.format.frames import headers_of
from kfmt.format.index_walk import IndexWalk, walk_frames
from kfmt.format.model import INT32_MAX
from kfmt.partition.segment_recovery import SegmentIndexer


def frame_rows(data: bytes) -> np.ndarray:
    chunks = list(segment.FrameScanner(memoryview(data), "seg.log").chunks())
    return np.concatenate(chunks) if chunks else np.zeros(0, segment.FRAME_DTYPE)


def spoil(rows: np.ndarray, how: str, at: int) -> np.ndarray:
    rows = rows.copy()
    if how == "position":
        rows["position"][at] += 1
    elif how == "offset":
        rows["last_offset"][at] = rows["last_offset"][at - 1] if at else -1
    elif how == "beyond int32":
        rows["last_offset"][at] = rows["last_offset"][0] + INT32_MAX + 1
    return rows


@SETTINGS
@given(segments(), st.sampled_from([0, 1, 64, 4096]), st.sampled_from(["none", "position", "offset", "beyond int32"]),
       st.integers(0, 10), st.integers(0, 10))
def test_the_walk_over_rows_is_the_reference(data, interval, how, at, start):
    rows = frame_rows(data)
    if not len(rows):
        return
    rows = spoil(rows, how, at % len(rows))
    start %= len(rows)
    base = int(rows["base_offset"][0]) - 3

    def walked():
        walk = IndexWalk(base, interval, position=int(rows["position"][start]))
        stop, offsets, times = walk_frames(walk, rows, start)
        return stop, offsets, times, dataclasses.astuple(walk), walk.close()

    fast, reference = both(walked)
    assert fast == reference


@SETTINGS
@given(segments(), st.sampled_from([0, 1, 64, 4096]), st.sampled_from(["none", "position", "offset", "beyond int32"]),
       st.integers(0, 10))
def test_the_indexer_gives_the_same_files_from_rows_and_from_headers(data, interval, how, at):
    rows = frame_rows(data)
    if len(rows):
        rows = spoil(rows, how, at % len(rows))
    base = int(rows["base_offset"][0]) if len(rows) else 0

    def files(add):
        indexer = SegmentIndexer(base, interval)
        add(indexer)
        done = indexer.finish()
        return done.index, done.timeindex, done.next_offset, done.batches

    by_rows = refused_or(lambda: files(lambda indexer: indexer.add_frames(rows)))
    by_headers = refused_or(lambda: files(lambda indexer: [indexer.add(h) for h in headers_of(rows)]))
    assert by_rows == by_headers


def refused_or(fn):
    """What fn gives, or the error it raises (SegmentIndexer refuses a row out of file order as a
    UsageError, other rows as bad data)."""
    try:
        return "value", fn()
    except (DataError, UsageError) as err:
        return type(err).__name__, str(err)
