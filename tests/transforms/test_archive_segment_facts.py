"""What `kfmt archive` records about a segment, found a run at a time by the kernels
(kfmt.transforms.archive.segment_facts.segment_facts), is what decoding every batch gives
(archived_segment_reference): counts, offsets, content digest, least and greatest timestamp, and the
same error for damaged data; on the real-broker corpus and on made-up segments of every magic and
codec with any timestamp (negative ones too) and damaged or junk tails."""
from __future__ import annotations

import warnings

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.corpus import REAL_DIRS, REALKAFKA
from support.kernels import SETTINGS, segments

from kfmt.errors import DataError, KfmtWarning
from kfmt.transforms.archive.segment_facts import (
    archived_segment_reference,
    segment_facts,
)

pytestmark = pytest.mark.needs("speedups")


def facts(fn, data, ends_log):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", KfmtWarning)
        try:
            tally, low, high = fn(memoryview(data), "seg.log", ends_log)
        except DataError as err:
            return "error", str(err)
    return "value", tally.finish(), low, high, [str(w.message) for w in caught]


def same(data, ends_log):
    fast = facts(segment_facts, data, ends_log)
    assert fast == facts(archived_segment_reference, data, ends_log)
    return fast


@pytest.mark.parametrize("name", REAL_DIRS)
def test_the_facts_of_the_corpus_segments_are_the_decoded_ones(name):
    logs = sorted((REALKAFKA / name).glob("*.log"))
    for i, log in enumerate(logs):
        fast = same(log.read_bytes(), i == len(logs) - 1)
        assert fast[0] == "value"


@SETTINGS
@given(segments(), st.booleans())
def test_the_facts_of_made_up_and_damaged_segments_are_the_decoded_ones(data, ends_log):
    same(data, ends_log)
