"""`kfmt dump` of an `.index` or `.timeindex` reads, at each entry, what Kafka's tool reads there
(DumpLogSegments: the first batch at an offset-index entry's position; the batches from a
time-index entry's position up to the one holding its offset), not the --max-message-size window
behind it: a 945-entry index of a 4 MB segment of single v1 messages took 8.5 s (each entry framed a
whole chunk of the window), 0.3 s now. The output stays Kafka's, byte for byte
(tests/inspect/test_dump.py compares it with the corpus's kafka-dump-log output)."""
from __future__ import annotations

import pytest
from support.cli import run_kfmt
from support.corpus import REALKAFKA

from kfmt.format import segment

pytestmark = pytest.mark.needs("speedups")  # counts the frames the compiled scanner hands out


class CountingScanner:
    """The compiled kernels, counting the frames scan_frames returns."""

    def __init__(self, native):
        self.native, self.framed = native, 0

    def scan_frames(self, *args):
        rows, count, pos = self.native.scan_frames(*args)
        self.framed += count
        return rows, count, pos

    def __getattr__(self, name):
        return getattr(self.native, name)


@pytest.fixture(scope="module")
def one_segment(tmp_path_factory):
    """v1-none-0 (400 single v1 messages) in one segment, indexed every 4096 bytes as Kafka does."""
    out = tmp_path_factory.mktemp("one") / "v1-none-0"
    result = run_kfmt("resegment", REALKAFKA / "v1-none-0", out, "--segment-bytes", "1073741824")
    assert result.code == 0, result.err
    return out


@pytest.mark.parametrize("suffix, entry_size, per_entry", [("index", 8, 1), ("timeindex", 12, 32)])
def test_an_index_dump_frames_only_what_each_entry_needs(one_segment, monkeypatch, suffix, entry_size,
                                                         per_entry):
    [index] = one_segment.glob(f"*.{suffix}")
    entries = index.stat().st_size // entry_size
    expected = run_kfmt("dump", index)
    counting = CountingScanner(segment.native)
    monkeypatch.setattr(segment, "native", counting)
    result = run_kfmt("dump", index)
    assert (result.code, result.out, result.err) == (0, expected.out, expected.err)
    assert entries >= 20
    # an offset-index entry needs one frame; a time-index entry the frames from its offset index
    # position to its batch, fewer than the 4096 bytes between index entries hold, framed 1, 2, 4, ...
    assert counting.framed <= per_entry * entries, (counting.framed, entries)
