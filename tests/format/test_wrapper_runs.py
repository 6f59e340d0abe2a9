"""kfmt.format.wrapper_runs: compressed v0/v1 wrappers converted to v2 a block at a time give the bytes of
the per-entry definition (convert_wrapper_reference: kfmt.format.convert's batch, encoded by the v2
format plugin), byte for byte, with frame rows as a scan of those bytes gives them and digests equal to
the records' -- on every wrapper of the real-broker corpus (v0 and v1, gzip, snappy, lz4, LogAppendTime),
on hypothesis-made segments (damaged ones included: the same error as the per-entry decode), at other
levels and into another codec (kfmt recompress); and the transforms built on it write what the
per-entry path writes (upgrade and recompress, compiled kernels against KFMT_PURE_PYTHON's path)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.corpus import REAL_DIRS, REALKAFKA
from support.kernels import SETTINGS, outcome, segments
from support.transform_runs import log_dir_of, transform

from kfmt.format import segment, wrapper_runs
from kfmt.format.digest import ContentDigest
from kfmt.format.frames import header_of
from kfmt.format.kernels import native
from kfmt.format.model import Batch
from kfmt.plugin import registry

GZIP, LZ4, ZSTD = 1, 3, 4


def wrapper_rows(data):
    rows = np.concatenate(list(segment.FrameScanner(data, "seg.log").chunks()) or [np.zeros(0)])
    return rows[(rows["magic"] < 2) & (rows["compression"] != 0)] if len(rows) else rows


def converted(data, levels=None, codec=None):
    """(bytes, rows, digest before, digest after) of every wrapper converted by the block path, and
    the same from the reference, entry by entry; wrappers the block path hands back as Batches are
    converted by the reference."""
    levels = levels or {}
    view = memoryview(data)
    fast, fast_rows, before, after = bytearray(), [], ContentDigest(), ContentDigest()
    rows = wrapper_rows(view)
    if not len(rows):
        return None
    # runs of consecutive wrappers, as a rewrite hands them over
    breaks = np.flatnonzero(rows["position"][1:] != rows["position"][:-1] + rows["size"][:-1]) + 1
    for run in np.split(rows, breaks):
        for item in wrapper_runs.upgraded_wrappers(view, run, "seg.log", levels, codec):
            if isinstance(item, Batch):
                fast += wrapper_runs.convert_wrapper_reference(item, levels, codec)
                continue
            shifted = item.rows.copy()
            shifted["position"] += len(fast)
            fast_rows += shifted.tolist()
            fast += item.entries
            before.merge(item.before)
            after.merge(item.after)
    reference, digest = bytearray(), ContentDigest()
    for row in rows.tolist():
        batch = segment.decode(view, header_of(row), "seg.log")
        reference += wrapper_runs.convert_wrapper_reference(batch, levels, codec)
        digest.update(batch.records)
    assert bytes(fast) == bytes(reference)
    scanned = np.concatenate(list(segment.FrameScanner(bytes(fast), "out.log").chunks()))
    made = {tuple(r)[0]: tuple(r) for r in fast_rows}
    assert all(made[r[0]] == tuple(r) for r in scanned.tolist() if r[0] in made)
    assert before.hexdigest() == after.hexdigest() or before.records == 0
    return bytes(fast), before.records


LEGACY_WITH_WRAPPERS = [d for d in REAL_DIRS if d.startswith(("v0-", "v1-", "compact-v1")) and "none" not in d]
kernels_only = pytest.mark.skipif(not wrapper_runs.available(), reason="the block path needs the kernels")


@kernels_only
@pytest.mark.parametrize("name", LEGACY_WITH_WRAPPERS)
def test_every_corpus_wrapper_converts_as_the_reference_does(name):
    for log in sorted((REALKAFKA / name).glob("*.log")):
        data = log.read_bytes()
        converted(data)
        converted(data, {GZIP: 9, LZ4: 1})
        converted(data, {ZSTD: 5}, codec=ZSTD)


@kernels_only
@SETTINGS
@given(segments())
def test_made_up_and_damaged_segments_convert_or_fail_as_the_reference_does(data):
    # damage must give the decode's error (or the same bytes where the reference takes the entry)
    fast = outcome(lambda: converted(data))
    if fast[0] == "error":
        rows = wrapper_rows(memoryview(data))
        first_bad = outcome(lambda: [segment.decode(memoryview(data), header_of(r), "seg.log")
                                     for r in rows.tolist()])
        assert first_bad == fast


@pytest.mark.parametrize(("command", "args"), [
    ("upgrade", []), ("upgrade", ["--compression-level", "gzip=3", "--compression-level", "lz4=12"]),
    ("recompress", ["--compression", "zstd"]), ("recompress", ["--compression", "gzip", "--level", "isal-2"])])
def test_transforms_write_what_the_per_entry_path_writes(tmp_path, monkeypatch, command, args):
    names = [d for d in LEGACY_WITH_WRAPPERS if not d.startswith("compact")]
    src = log_dir_of(tmp_path, names)
    transform(command, src, tmp_path / "runs", *args)
    monkeypatch.setattr(wrapper_runs, "available", lambda: False)
    transform(command, src, tmp_path / "one-by-one", *args)
    for name in names:
        for log in sorted((tmp_path / "runs" / name).iterdir()):
            assert log.read_bytes() == (tmp_path / "one-by-one" / name / log.name).read_bytes(), log


@st.composite
def framings(draw):
    """Records sections (any bytes, empty ones too) with header facts over the fields' whole ranges."""
    n = draw(st.integers(0, 12))
    sections = [draw(st.binary(max_size=300)) for _ in range(n)]
    int64 = st.integers(-(1 << 63), (1 << 63) - 1)
    table = []
    for _ in range(n):
        first = draw(int64)
        delta = draw(st.integers(0, (1 << 31) - 1))
        last = min(first + delta, (1 << 63) - 1)
        table.append((first, last, draw(int64), draw(int64), draw(st.integers(0, 0x7FFF)),
                      draw(st.integers(0, (1 << 31) - 1))))
    return sections, np.array(table, np.int64).reshape(-1, 6)


@SETTINGS
@given(framings())
def test_frame_v2_batches_is_its_reference(case):
    """The framing kernel gives its reference's bytes, sizes and CRCs; and each batch it makes reads back,
    through the v2 format plugin's header reader, as the facts it was given."""
    sections, table = case
    expected = wrapper_runs.frame_v2_reference(sections, table)
    if native is not None:
        assert native.frame_v2_batches([memoryview(s) for s in sections], table) == expected
    entries, sizes = expected[0], np.frombuffer(expected[1], np.int64)
    fmt, position = registry.get().format_for(2), 0
    for section, row, size in zip(sections, table.tolist(), sizes.tolist()):
        header = fmt.read_header(memoryview(entries)[position:position + size], position)
        assert (header.base_offset, header.last_offset, header.base_timestamp, header.max_timestamp,
                header.records_count, header.size) == (row[0], row[1], row[2], row[3], row[5], size)
        assert entries[position + size - len(section):position + size] == section
        position += size
    assert position == len(entries)
