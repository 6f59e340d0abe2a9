"""kfmt verify's many-entries-at-a-time walk (kfmt.inspect.verify.log_runs, the compiled clean_entries)
reports exactly what the entry-by-entry checks report: same problems, in the same order, same counts,
on the corpus, on hypothesis-made segments (damaged tails included), and on v2 batches whose records
break the record rules under a valid CRC (so that only the record checks can tell)."""
from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.corpus import REAL_DIRS, REALKAFKA
from support.kernels import NATIVE_USERS, SETTINGS, both, record_columns, segments
from support.v2_batches import v2_batch
from support.verify_inputs import gzip_wrapper, partition_with, verified

from kfmt.format.wire import crc32c

VERIFY_NATIVE = NATIVE_USERS + ["kfmt.inspect.verify.log_runs"]


def same_both_ways(path) -> tuple:
    """The kernels' walk and the reference report the same, at either depth."""
    for deep in (False, True):
        fast, reference = both(lambda: verified(path, deep), VERIFY_NATIVE)
        assert fast == reference
    return fast


@pytest.mark.parametrize("name", REAL_DIRS)
def test_verify_reports_the_same_on_the_corpus(name):
    same_both_ways(REALKAFKA / name)


@SETTINGS
@given(segments())
def test_verify_reports_the_same_on_made_up_segments(tmp_path_factory, data):
    same_both_ways(partition_with(tmp_path_factory.mktemp("v"), data))


@SETTINGS
@given(record_columns(max_size=6), st.booleans(), st.data())
def test_records_that_break_the_rules_under_a_valid_crc(tmp_path_factory, records, lat, data):
    """A field the record checks look at changed and the CRC made right again: lastOffsetDelta,
    maxTimestamp, a record byte."""
    entry = bytearray(v2_batch(records, 100, lat))
    how = data.draw(st.sampled_from(["last", "max_ts", "flip", "none"]))
    if how == "last":
        struct.pack_into(">i", entry, 23, data.draw(st.integers(-2, 8)))
    elif how == "max_ts":
        struct.pack_into(">q", entry, 35, data.draw(st.sampled_from([-1, 0, 1700000000000 - 1])))
    elif how == "flip" and len(entry) > 61:
        entry[data.draw(st.integers(61, len(entry) - 1))] = data.draw(st.integers(0, 255))
    struct.pack_into(">I", entry, 17, crc32c(bytes(entry[21:])))
    second = v2_batch(records, 200, lat)
    same_both_ways(partition_with(tmp_path_factory.mktemp("v"), bytes(entry) + second))


@pytest.mark.needs("speedups")
def test_clean_runs_are_taken_whole(tmp_path):
    """The fast walk is used at all: a clean segment of uncompressed entries gives one run."""
    import numpy as np
    from support.v2_batches import legacy_message

    from kfmt.format import segment
    from kfmt.inspect.verify import log_runs

    log = b"".join(legacy_message(i, 1, 1_700_000_000_000 + i, b"k", b"v") for i in range(100))
    rows = next(segment.FrameScanner(memoryview(log), "seg.log").chunks())
    for deep in (False, True):
        pieces = list(log_runs.split(log, rows, deep))
        assert [(len(r), n) for r, n in pieces] == [(100, 100)]
    assert np.array_equal(pieces[0][0], rows)


@SETTINGS
@given(st.lists(st.integers(0, 6), min_size=1, max_size=5), st.integers(0, 12),
       st.lists(st.integers(1_699_999_999_990, 1_700_000_000_010), min_size=5, max_size=5))
def test_compressed_records_checked_in_one_call_report_the_same(tmp_path_factory, inner, wrapper, ts):
    """Wrapper offsets that are not their last inner one, inner offsets out of order, timestamps
    above the wrapper's: the compiled records_keep_rules must send every such batch to the checks."""
    log = gzip_wrapper(wrapper, ts[:len(inner)], inner) + gzip_wrapper(wrapper + 20, ts[:1], [0])
    same_both_ways(partition_with(tmp_path_factory.mktemp("v"), log))
