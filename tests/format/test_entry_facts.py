"""kfmt.format.entry_facts: the compiled walk gives what the reference (each entry decoded, its
columns read) gives -- where it stops and the facts up to there -- on every segment of the real
brokers' corpus and on hypothesis-made segments of every magic and codec, damaged ones included,
from any row on."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.corpus import REAL_DIRS, REALKAFKA
from support.kernels import SETTINGS, both, segments

from kfmt.format import segment
from kfmt.format.entry_facts import entry_facts
from kfmt.format.kernels import native

pytestmark = pytest.mark.skipif(native is None, reason="nothing to compare with the compiled kernels")


def runs_of(data: bytes, start: int = 0) -> list:
    """(stop, facts) of every run from row `start` on: each run, then the row it stopped at skipped."""
    chunks = list(segment.FrameScanner(memoryview(data), "seg.log").chunks())
    rows = np.concatenate(chunks) if chunks else np.zeros(0, segment.FRAME_DTYPE)
    out, i = [], min(start, len(rows))
    while i < len(rows):
        stop, facts = entry_facts(data, rows, i, len(rows))
        out.append((stop, tuple(facts)))
        i = stop + 1
    return out


@pytest.mark.parametrize("name", REAL_DIRS)
def test_the_same_facts_on_the_corpus(name):
    for log in sorted((REALKAFKA / name).rglob("*.log")):
        data = log.read_bytes()
        fast, reference = both(lambda: runs_of(data))
        assert fast == reference, log


@SETTINGS
@given(segments(), st.integers(0, 5))
def test_the_same_facts_on_made_up_segments(data, start):
    fast, reference = both(lambda: runs_of(data, start))
    assert fast == reference
