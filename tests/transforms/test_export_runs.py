"""The export rows of runs read as one block (kfmt.rows.ranges: uncompressed v2 data batches through
kfmt.format.batch_runs.decode_run, uncompressed legacy messages through legacy_runs.decode_run) are
those of reading every batch on its own (decode, Selection.left_out, export_batch): same rows, same
counts, digests and offsets in the tally, same error for damaged input; on hypothesis-made segments
of every magic and codec and on batches from kafka-python's encoder, with a log start offset inside
the range and read_committed readers whose aborted transactions and last stable offset fall anywhere.
"""
from __future__ import annotations

import itertools

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st
from support import kernels
from support.kernels import SETTINGS, outcome, segments

from kfmt.partition.transactions import AbortedTransaction, TransactionOutcomes
from kfmt.rows import ranges
from kfmt.rows.ranges import RangeTally, SegmentRange, Selection, read_range
from kfmt.storage.store import open_storage

_counter = itertools.count()


def read(tmp_path, data: bytes, selection: Selection, outcomes, log_start, rows_per_chunk):
    """(rows as Python values, the tally's facts) of reading a whole segment holding `data`."""
    directory = tmp_path / f"t-{next(_counter)}"
    directory.mkdir()
    (directory / "00000000000000000000.log").write_bytes(data)
    storage, root = open_storage(str(directory))
    rng = SegmentRange(storage.spec, storage.join(root, "00000000000000000000.log"), "seg.log", "t", 0, 0, 0,
                       0, len(data), log_start, True, len(data), True)
    tally = RangeTally()
    rows = list(read_range(rng, selection, outcomes, tally, rows_per_chunk=rows_per_chunk))
    table = pa.Table.from_batches(rows) if rows else None
    if table is not None:  # as numbers: Python's datetime cannot hold every timestamp Kafka can
        at = table.schema.get_field_index("timestamp")
        table = table.set_column(at, "timestamp", table.column(at).cast(pa.int64()))
    return (None if table is None else table.to_pylist(),
            (tally.batches, tally.records, tally.control_records, tally.control_seen, tally.left_out,
             tally.first_offset, tally.next_offset, tally.digest.hexdigest(), tally.tails))


def one_by_one(monkeypatch):
    """read_range with every row read on its own (the definition the run paths must meet)."""
    monkeypatch.setattr(ranges, "_runs",
                        lambda rows, *args: [(ranges._ONE, i, i + 1) for i in range(len(rows))])


selections = st.builds(Selection, st.booleans(), st.booleans(), st.booleans())


@st.composite
def outcomes(draw):
    aborted = draw(st.lists(st.builds(AbortedTransaction, st.sampled_from([-1, 7, 2**40]),
                                      st.integers(0, 2**40 + 50), st.integers(0, 2**40 + 60)), max_size=2))
    return TransactionOutcomes(aborted, draw(st.none() | st.integers(0, 2**40 + 60)))


def compare(tmp_path, data, selection, txn, log_start, rows_per_chunk):
    runs = outcome(lambda: read(tmp_path, data, selection, txn, log_start, rows_per_chunk))
    with pytest.MonkeyPatch.context() as patched:
        one_by_one(patched)
        single = outcome(lambda: read(tmp_path, data, selection, txn, log_start, rows_per_chunk))
    assert runs == single
    return runs


@SETTINGS
@given(kernels.plain_v2_batches(), selections, outcomes(), st.none() | st.integers(0, 2**40 + 60),
       st.integers(1, 12))
def test_runs_of_v2_batches_give_the_rows_of_every_batch_read_alone(tmp_path_factory, case, selection,
                                                                    txn, log_start, rows_per_chunk):
    data, written = case
    got = compare(tmp_path_factory.mktemp("runs"), data, selection, txn, log_start, rows_per_chunk)
    everything = not selection.read_committed and (selection.include_deleted or log_start is None)
    if written is not None and everything:
        rows = got[1][0] or []
        assert [(r["offset"], r["timestamp_ms"], r["key"], r["value"]) for r in rows] == \
            [w[:4] for w in written]  # the records kafka-python wrote


@SETTINGS
@given(segments(), selections, outcomes(), st.none() | st.integers(0, 1100), st.integers(1, 12))
def test_runs_in_segments_of_every_kind_give_the_rows_of_every_batch_read_alone(
        tmp_path_factory, data, selection, txn, log_start, rows_per_chunk):
    compare(tmp_path_factory.mktemp("mixed"), data, selection, txn, log_start, rows_per_chunk)
