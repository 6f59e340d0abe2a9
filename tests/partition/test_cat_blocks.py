"""`kfmt cat --format json`'s lines made a batch at a time (kfmt.rows.json_lines, the compiled
json_record_lines) are the lines kfmt.cli.cat.records_of makes record by record: keys, values and
header values of any bytes, header keys of any text (quotes, backslashes, control characters,
non-ASCII) and of bytes that are not UTF-8, any skip, with and without a topic and partition.
(tests/test_cat_truth.py holds cat against the consumer's truth on the corpus.)"""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.kernels import SETTINGS

from kfmt.cli.cat import records_of
from kfmt.format.model import Batch, BatchHeader, TimestampType, make_records
from kfmt.rows import json_lines

maybe_bytes = st.none() | st.binary(max_size=40)
header_keys = st.text(max_size=8).map(lambda t: t.encode("utf-8", "surrogatepass")) | st.binary(max_size=8)


@st.composite
def batches(draw):
    n = draw(st.integers(0, 8))
    base = draw(st.integers(0, 2**40))
    epoch = draw(st.integers(-1, 5))
    records = make_records(list(range(base, base + n)),
                           draw(st.lists(st.integers(-2**63, 2**63 - 1), min_size=n, max_size=n)),
                           draw(st.lists(maybe_bytes, min_size=n, max_size=n)),
                           draw(st.lists(maybe_bytes, min_size=n, max_size=n)),
                           draw(st.lists(st.lists(st.tuples(header_keys, maybe_bytes), max_size=3),
                                         min_size=n, max_size=n)))
    header = BatchHeader(2, base, base + max(n - 1, 0), 0, draw(st.sampled_from(list(TimestampType))),
                         partition_leader_epoch=epoch, records_count=n)
    return Batch(header=header, records=records)


@pytest.mark.needs("speedups")
@SETTINGS
@given(batches(), st.integers(0, 9), st.sampled_from([{}, {"topic": "t", "partition": 3},
                                                      {"topic": "tö\"\n", "partition": 0}]))
def test_json_block_is_the_per_record_lines(batch, skip, where):
    block = json_lines.record_block(batch, skip, where)
    if isinstance(block, bytes):  # ASCII lines, written as they are
        block = block.decode("ascii")
    expected = "\n".join(records_of(batch, skip, where, True))
    if block is not None:
        assert block == expected
    else:  # left to the per-record path: only for header keys that are not UTF-8
        assert any(not _utf8(h["key"]) for hs in batch.records.column(4).to_pylist() for h in hs)


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False
