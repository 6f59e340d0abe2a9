"""kfmt.format.inflated_runs.walk: runs of compressed data entries inflated and their records walked a run
at a time (compressed_spans, walk_inflated) give what the per-entry kernels give entry by entry
(walk_reference: inflated_v2 / inflated_wrapper, then digest_* and *_facts), and that is what decoding
each entry gives: where the run stops (the first entry the decode must decide on), each entry's
records, first and last offsets and timestamp range, and the content digest. On the real-broker
corpus, on hypothesis-made and damaged segments, and on entries from kafka-python's encoders.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from support import kernels
from support.corpus import REAL_DIRS, REALKAFKA
from support.kernels import SETTINGS, segments

from kfmt.errors import DataError, UsageError
from kfmt.format import inflated_runs, segment, span_inflate
from kfmt.format.digest import ContentDigest
from kfmt.format.frames import header_of
from kfmt.format.inflated_runs import DISORDERED, HAS_TS
from kfmt.format.message_formats import LENIENT, STRICT
from kfmt.format.model import NO_TIMESTAMP

pytestmark = pytest.mark.needs("speedups")


def walks(data, walk, base=0) -> list:
    """Every walk from every compressed row of every chunk: (start, stop, facts, digest)."""
    view = memoryview(data)
    out = []
    for rows in segment.FrameScanner(view, "seg.log", base=base).chunks():
        rows = np.ascontiguousarray(rows)
        for start in range(len(rows)):
            if rows["compression"][start]:
                w = walk(view, rows, start, len(rows), base)
                out.append((start, w.stop, w.facts.tolist(), w.digest.hexdigest()))
    return out


def decoded_facts(data, base=0) -> list:
    """What each entry's decode gives, in WALK_DTYPE's terms (None: the decode refuses it)."""
    view = memoryview(data)
    out = []
    for rows in segment.FrameScanner(view, "seg.log", base=base).chunks():
        for row in rows.tolist():
            try:
                batch = segment.decode(view, header_of(row), "seg.log", STRICT, base)
            except DataError:
                out.append(None)
                continue
            offsets = batch.records.column(0).to_pylist()
            times = [t for t in batch.records.column(1).to_pylist() if t != NO_TIMESTAMP]
            digest = ContentDigest()
            digest.update(batch.records)
            out.append(((len(offsets), offsets[0] if offsets else 0, offsets[-1] if offsets else 0,
                         min(times, default=0), max(times, default=0),
                         bool(times) * HAS_TS | any(b <= a for a, b in zip(offsets, offsets[1:])) * DISORDERED),
                        digest))
    return out


def check(data, base=0):
    fast = walks(data, inflated_runs.walk, base)
    assert fast == walks(data, inflated_runs.walk_reference, base)
    # and each entry walked is what its decode gives (the inner magics aside: the decode keeps them apart)
    truth = decoded_facts(data, base)
    for start, stop, facts, _digest in fast:
        for i, entry in enumerate(facts, start):
            assert truth[i] is not None
            assert (*entry[:5], entry[5] & 0xFF) == truth[i][0]
    return fast


@pytest.mark.parametrize("name", REAL_DIRS)
def test_walks_on_the_corpus(name):
    for log in sorted((REALKAFKA / name).glob("*.log")):
        check(log.read_bytes())


@SETTINGS
@given(kernels.compressed_entries())
def test_walks_of_entries_from_kafka_python(case):
    data, written = case
    fast = check(data)
    if written is not None:  # nothing damaged: no entry refused (a builder leaves some uncompressed)
        view = memoryview(data)
        rows = np.concatenate(list(segment.FrameScanner(view, "seg.log").chunks()))
        assert all(stop == len(rows) or not rows["compression"][stop] for _s, stop, _f, _d in fast)


@SETTINGS
@given(segments())
def test_walks_on_made_up_and_damaged_segments(data):
    check(data)
    check(b"\0" * 7 + data, base=-7)


def test_a_lenient_read_is_not_walked():
    with pytest.raises(UsageError):
        inflated_runs.walk(b"", np.zeros(0, inflated_runs.FRAME_DTYPE), 0, 0, options=LENIENT)


def test_a_run_is_walked_a_few_megabytes_at_a_time(monkeypatch):
    """The payloads of one kernel call are bounded; the result does not depend on the bound."""
    log = sorted((REALKAFKA / "v1-gzip-0").glob("*.log"))[0]
    whole = walks(log.read_bytes(), inflated_runs.walk)
    for bound in (1, 1 << 12):  # one payload per call, a few per call
        monkeypatch.setattr(span_inflate, "MAX_CALL_BYTES", bound)
        assert walks(log.read_bytes(), inflated_runs.walk) == whole
