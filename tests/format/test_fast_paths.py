"""The pipelines' fast paths give what the one-batch-at-a-time definitions give.

* kfmt.format.batch_runs: runs of uncompressed v2 data batches checked and digested where they lie (the
  compiled digest_v2_batches) against decoding every batch and digesting its columns (the
  reference), on the corpus, on hypothesis-made segments, and on batches whose records are damaged
  under a valid CRC (so that only the record parser can tell);
* kfmt.format.batch_runs.decode_run: runs of uncompressed v2 data batches decoded as one column block
  (the compiled decode_v2_batches) against decoding every batch, on the corpus, on hypothesis-made
  segments, and on batches from kafka-python's encoder (damaged or not; undamaged, the records written);
* kfmt.format.inflated_runs: compressed v2 batches and v0/v1 wrappers inflated one by one and decoded
  as one column block (decode_v2_payloads, decode_legacy_payloads) against decoding every entry, on
  the corpus, on hypothesis-made segments, and on entries from kafka-python's encoders;
* kfmt.write.writer: frames placed and appended many at a time (SegmentPlanner.place_frames,
  SegmentRunWriter.append_frames) against place/append one by one: same segments, same files;
* kfmt.format.legacy_runs.RunUpgrader: a run converted in parts (--rebatch groups carried over) against
  the run converted whole;
* kfmt.storage.direct_io: files written past the page cache hold exactly the bytes written, whatever the
  sizes and alignments of the writes, and where O_DIRECT is refused;
* the transforms themselves: the output does not depend on where the frame scan cuts its chunks.
"""
from __future__ import annotations

import contextlib
import functools
import os
import random
import struct
import zlib

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from support import kernels
from support.corpus import REAL_DIRS, REALKAFKA
from support.kernels import (
    NATIVE_USERS,
    SETTINGS,
    both,
    legacy_runs_of_messages,
    outcome,
    record_columns,
    segments,
)
from support.v2_batches import legacy_message, v2_batch

from kfmt.errors import DataError, UsageError
from kfmt.format import batch_runs, inflated_runs, legacy_runs, segment, span_inflate
from kfmt.format.digest import ContentDigest
from kfmt.format.frames import header_of, rows_of
from kfmt.format.message_formats import LENIENT, STRICT
from kfmt.format.model import BatchHeader, TimestampType, make_records
from kfmt.format.wire import crc32c
from kfmt.plugin import registry
from kfmt.storage import direct_io
from kfmt.storage.staging import StagedOutput
from kfmt.storage.store import open_storage
from kfmt.write.planner import RollPolicy, SegmentPlanner
from kfmt.write.segment_writer import SegmentRunWriter

NATIVE_ALSO = NATIVE_USERS + ["kfmt.format.batch_runs", "kfmt.format.inflated_runs", "kfmt.write.writer"]
reference_code = functools.partial(kernels.reference_code, NATIVE_ALSO)


def same_both_ways(fn):
    fast, reference = both(fn, NATIVE_ALSO)
    assert fast == reference
    return fast


# --- kfmt.format.batch_runs ---

def checked_summary(data, options=STRICT, base=0, messages=False):
    """What batch_runs.checked gives for every chunk of a segment, reduced to facts that do not
    depend on how batches are grouped into runs: each batch's last offset in order, the digest of
    all the records, and the first data record's offset."""
    out, digest, firsts = [], ContentDigest(), []
    scanner = segment.FrameScanner(memoryview(data), "seg.log", base=base)
    for rows in scanner.chunks():
        for item in batch_runs.checked(memoryview(data), rows, "seg.log", options, base, messages):
            # batches named by their last offset: a checked run of legacy wrappers keeps their
            # frames, whose base offset is the wrapper's own (the decode gives the first inner one)
            if isinstance(item, batch_runs.CheckedRun):
                out += [("batch", r) for r in item.rows["last_offset"].tolist()]
                digest.merge(item.digest)
                firsts.append(item.first_offset)
            else:
                out.append(("batch", item.header.last_offset))
                if not item.header.is_control and len(item):
                    firsts.append(item.records.column(0)[0].as_py())
                if not item.header.is_control:
                    digest.update(item.records)
    # the first data record's offset (what a tally reports), however the batches were grouped
    out.append(("first", next((f for f in firsts if f is not None), None)))
    return out, digest.hexdigest(), scanner.tail


def decoded_digest(data, options=STRICT) -> str:
    digest = ContentDigest()
    for batch in segment.batches(memoryview(data), "seg.log", options):
        if not batch.header.is_control:
            digest.update(batch.records)
    return digest.hexdigest()


@pytest.mark.parametrize("name", REAL_DIRS)
def test_checked_runs_digest_what_decoding_digests_on_the_corpus(name):
    for log in sorted((REALKAFKA / name).glob("*.log")):
        data = log.read_bytes()
        fast = same_both_ways(lambda: checked_summary(data))
        assert fast[1][1] == decoded_digest(data)


@SETTINGS
@given(segments(), st.sampled_from([STRICT, LENIENT]), st.booleans())
def test_checked_runs_on_made_up_and_damaged_segments(data, options, messages):
    fast = same_both_ways(lambda: checked_summary(data, options, base=7, messages=messages))
    if fast[0] == "value" and not fast[1][2].is_error:
        assert fast[1][1] == decoded_digest(data, options)


@pytest.mark.parametrize("name", REAL_DIRS)
def test_checked_message_runs_digest_what_decoding_digests_on_the_corpus(name):
    for log in sorted((REALKAFKA / name).glob("*.log")):
        data = log.read_bytes()
        fast = same_both_ways(lambda: checked_summary(data, messages=True))
        assert fast[1][1] == decoded_digest(data)


@pytest.mark.parametrize("magic,lat", [(0, False), (1, False), (1, True)])
def test_message_runs_digest_the_records_decode_gives(magic, lat):
    """Messages from an independent encoder, null keys and values among them: the run's digest and
    first offset are those of the decoded records, with or without the kernel."""
    log = b"".join(legacy_message(40 + i, magic, 1_700_000_000_000 + 3 * i,
                                  None if i % 3 == 0 else b"k%d" % i, None if i % 5 == 4 else b"v" * i, lat)
                   for i in range(50))
    rows = next(segment.FrameScanner(memoryview(log), "seg.log").chunks())

    def run():
        at, digest, first = batch_runs.digest_messages(log, rows, 0, len(rows))
        return at, digest.hexdigest(), first
    fast = same_both_ways(run)
    assert fast[1] == (50, decoded_digest(log), 40)


@pytest.mark.needs("speedups")
def test_a_row_that_does_not_describe_its_message_is_not_vouched_for():
    entry = legacy_message(9, 1, 1_700_000_000_000, b"key", b"value")
    rows = rows_of([registry.get().format_for(1).read_header(memoryview(entry), 0)])
    assert batch_runs.digest_messages(entry, rows, 0, 1)[0] == 1
    for field, value in (("base_offset", 8), ("last_offset", 10), ("max_timestamp", 1),
                         ("size", rows["size"][0] - 1), ("crc", 0), ("magic", 0), ("compression", 1)):
        wrong = rows.copy()
        wrong[field] = value
        assert batch_runs.digest_messages(entry, wrong, 0, 1)[0] == 0, field
    damaged = bytearray(entry)
    damaged[-1] ^= 1  # the CRC no longer matches: a strict check refuses, a lenient one digests
    assert batch_runs.digest_messages(bytes(damaged), rows, 0, 1)[0] == 0
    assert batch_runs.digest_messages(bytes(damaged), rows, 0, 1, options=LENIENT)[0] == 1


@SETTINGS
@given(record_columns(max_size=6), st.booleans(), st.data())
def test_records_damaged_under_a_valid_crc(records, lat, data):
    """A record byte changed (or the count) and the CRC made right again: only the record parser
    can tell, and the kernel's verdict must be the reference's."""
    entry = bytearray(v2_batch(records, 100, lat))
    how = data.draw(st.sampled_from(["flip", "count", "none"]))
    if how == "flip" and len(entry) > 61:
        entry[data.draw(st.integers(61, len(entry) - 1))] = data.draw(st.integers(0, 255))
    elif how == "count":
        struct.pack_into(">i", entry, 57, records.num_rows + data.draw(st.integers(-2, 2)))
    struct.pack_into(">I", entry, 17, crc32c(bytes(entry[21:])))
    rows = rows_of([registry.get().format_for(2).read_header(memoryview(entry), 0)])

    def run():
        at, digest, first = batch_runs.digest_run(bytes(entry), rows, 0, 1)
        return at, digest.hexdigest(), first
    fast = same_both_ways(run)
    if fast[1][0] == 1:  # accepted: the digest is the decoded records'
        assert fast[1][1] == decoded_digest(bytes(entry))


@pytest.mark.needs("speedups")
def test_a_row_that_does_not_describe_its_batch_is_not_vouched_for():
    records = make_records([5, 6, 7], [1, 2, 3], [b"a", None, b"c"], [b"x", b"y", None])
    entry = v2_batch(records, 5, False)
    rows = rows_of([registry.get().format_for(2).read_header(memoryview(entry), 0)])
    assert batch_runs.digest_run(entry, rows, 0, 1)[0] == 1
    for field, value in (("base_offset", 6), ("max_timestamp", 1), ("size", rows["size"][0] - 1),
                         ("records_count", 4), ("crc", 0), ("producer_id", 3)):
        wrong = rows.copy()
        wrong[field] = value
        assert batch_runs.digest_run(entry, wrong, 0, 1)[0] == 0, field


# --- kfmt.format.batch_runs.decode_run: runs of v2 batches as one column block ---

def as_tuples(records) -> list[tuple]:
    return [(r["offset"], r["timestamp"], r["key"], r["value"],
             [(h["key"], h["value"]) for h in r["headers"]]) for r in records.to_pylist()]


def decoded_runs(data, base=0, options=STRICT) -> list:
    """decode_run over every run of uncompressed v2 data batches of a segment, a few MB at a time,
    each with its rows' record counts (what the export spreads batch facts by)."""
    view = memoryview(data)  # the file from position `base` on
    out = []
    for rows in segment.FrameScanner(view, "seg.log", base=base).chunks():
        plain = batch_runs.plain_batches(rows)
        edges = np.flatnonzero(np.diff(np.concatenate(([0], plain.view(np.int8), [0]))))
        for a, b in zip(edges[::2], edges[1::2]):
            for start, stop in legacy_runs.call_slices(rows[a:b]):
                piece = rows[a:b][start:stop]
                records = batch_runs.decode_run(view, piece, "seg.log", options, base)
                assert records.num_rows == int(piece["records_count"].sum())
                out.append(as_tuples(records))
    return out


@SETTINGS
@given(kernels.plain_v2_batches(), st.sampled_from([STRICT, LENIENT]))
def test_decoded_runs_are_the_records_written(case, options):
    """Batches from kafka-python's encoder, maybe one damaged: the kernel's records (or error) are the
    reference's, and undamaged they are exactly the records written."""
    data, written = case
    fast = same_both_ways(lambda: decoded_runs(data, options=options))
    if written is not None:
        assert fast == ("value", [written])
    elif fast[0] == "error":
        assert fast[3] == "seg.log" and fast[4] is not None  # file and position, as the reader says


@SETTINGS
@given(segments())
def test_decoded_runs_on_made_up_and_damaged_segments(data):
    same_both_ways(lambda: decoded_runs(data, base=7))


@pytest.mark.parametrize("name", REAL_DIRS)
def test_decoded_runs_on_the_corpus(name):
    for log in sorted((REALKAFKA / name).glob("*.log")):
        same_both_ways(lambda: decoded_runs(log.read_bytes()))


@pytest.mark.needs("speedups")
def test_a_batch_the_kernel_is_not_sure_of_is_left_to_the_decode():
    """The kernel stops at a row that does not describe its batch, or a batch decode refuses; the
    records before it come back as one block."""
    from kfmt.format.kernels import native

    first = v2_batch(make_records([5, 6], [1, 2], [b"a", None], [b"x", None]), 5, False)
    second = v2_batch(make_records([7], [3], [b"c"], [b"z"]), 7, True)
    data = first + second
    rows = np.concatenate(list(segment.FrameScanner(data, "seg.log").chunks()))
    at, records = native.decode_v2_batches(data, rows, 0, 2, 0, True)
    assert at == 2 and as_tuples(records) == [(5, 1, b"a", b"x", []), (6, 2, None, None, []),
                                              (7, 1700000000000, b"c", b"z", [])]
    for field, value in (("base_offset", 8), ("max_timestamp", 1), ("records_count", 2), ("crc", 0)):
        wrong = rows.copy()
        wrong[field][1] = value
        at, records = native.decode_v2_batches(data, wrong, 0, 2, 0, True)
        assert at == 1 and records.num_rows == 2, field
    damaged = bytearray(data)
    damaged[-2] ^= 1  # the second batch's value: its CRC no longer matches
    assert native.decode_v2_batches(bytes(damaged), rows, 0, 2, 0, True)[0] == 1
    assert native.decode_v2_batches(bytes(damaged), rows, 0, 2, 0, False)[0] == 2


# --- kfmt.format.inflated_runs: compressed entries inflated one by one, decoded as one block ---

def inflated_runs_of(data, base=0, options=STRICT) -> list:
    """inflated_blocks over every run of compressed data entries of a segment, with each entry's
    record count and base offset; the other entries decoded on their own (a builder may leave a
    batch uncompressed where compression does not pay)."""
    view = memoryview(data)
    out = []
    for rows in segment.FrameScanner(view, "seg.log", base=base).chunks():
        mask = inflated_runs.compressed_entries(rows)
        bounds = [0, *(np.flatnonzero(np.diff(mask.view(np.int8))) + 1).tolist(), len(rows)]
        for a, b in zip(bounds, bounds[1:]):
            if mask[a]:  # the blocks, joined: how the entries are grouped into blocks may differ
                blocks = list(inflated_runs.inflated_blocks(view, rows[a:b], "seg.log", options, base))
                assert np.concatenate([blk.rows for blk in blocks]).tolist() == rows[a:b].tolist()
                assert all(blk.records.num_rows == int(blk.counts.sum()) for blk in blocks)
                out.append(([r for blk in blocks for r in as_tuples(blk.records)],
                            [c for blk in blocks for c in blk.counts.tolist()],
                            [o for blk in blocks for o in blk.base_offsets.tolist()]))
            else:
                for row in rows[a:b].tolist():
                    batch = segment.decode(view, header_of(row), "seg.log", options, base)
                    out.append((as_tuples(batch.records),))
    return out


@SETTINGS
@given(kernels.compressed_entries(), st.sampled_from([STRICT, LENIENT]))
def test_inflated_runs_are_the_records_written(case, options):
    """v2 batches and v1 wrappers from kafka-python's encoders, maybe one damaged: the kernels' records
    (or error) are the reference's, and undamaged they are exactly the records written."""
    data, written = case
    fast = same_both_ways(lambda: inflated_runs_of(data, options=options))
    if written is not None:
        assert fast[0] == "value" and [r for run in fast[1] for r in run[0]] == written


@SETTINGS
@given(segments())
def test_inflated_runs_on_made_up_and_damaged_segments(data):
    same_both_ways(lambda: inflated_runs_of(data))


@pytest.mark.parametrize("name", REAL_DIRS)
def test_inflated_runs_on_the_corpus(name):
    for log in sorted((REALKAFKA / name).glob("*.log")):
        same_both_ways(lambda: inflated_runs_of(log.read_bytes()))


@pytest.mark.parametrize("bound", [1, 1 << 12])
def test_inflated_runs_do_not_depend_on_the_call_bound(monkeypatch, bound):
    """Payloads are inflated a slice of span rows at a time, the slice sized by the inflate ratio seen
    so far: one payload per call, or a few, give the records of one call per few MB."""
    logs = [log for name in ("v1-gzip-0", "v2-gzip-0", "v0-snappy-0")
            for log in sorted((REALKAFKA / name).glob("*.log"))]
    whole = [inflated_runs_of(log.read_bytes()) for log in logs]
    monkeypatch.setattr(span_inflate, "MAX_CALL_BYTES", bound)
    assert [inflated_runs_of(log.read_bytes()) for log in logs] == whole


def test_an_entry_its_codec_refuses_goes_to_the_decode_mid_run():
    """A wrapper whose compressed bytes its codec refuses (CRC recomputed, so only the codec can tell)
    ends the inflated payloads there: the entries before it come as blocks, it is decoded on its own
    (the reader's error, naming it), and nothing after it is returned before that error."""
    log = sorted((REALKAFKA / "v1-gzip-0").glob("*.log"))[0]
    data = bytearray(log.read_bytes())
    rows = np.ascontiguousarray(next(segment.FrameScanner(memoryview(bytes(data)), "seg.log").chunks()))
    victim = rows[len(rows) // 2]
    at, size = int(victim["position"]), int(victim["size"])
    data[at + size - 12:at + size - 4] = b"\xff" * 8  # inside the deflate stream, before the gzip trailer
    crc = zlib.crc32(bytes(data[at + 16:at + size])) & 0xFFFFFFFF  # a v0/v1 message's CRC from magic on
    data[at + 12:at + 16] = crc.to_bytes(4, "big")
    blocks, error = [], None
    try:
        for block in inflated_runs.inflated_blocks(memoryview(bytes(data)), rows, "seg.log"):
            blocks.append(block)
    except DataError as e:
        error = e
    assert error is not None and error.offset == int(victim["last_offset"])
    assert np.concatenate([b.rows for b in blocks]).tolist() == rows[:len(rows) // 2].tolist()


# --- kfmt.write.writer: many at a time ---

@st.composite
def frame_rows(draw):
    """Rows of v2 data batches with increasing offsets, sizes and timestamps that make rolls happen."""
    n = draw(st.integers(1, 60))
    out, position, offset = [], 0, draw(st.integers(0, 1000))
    for _ in range(n):
        count = draw(st.integers(1, 5))
        size = draw(st.integers(61, 900))
        ts = draw(st.integers(-1, 10_000))
        out.append(BatchHeader(2, offset, offset + count - 1, 0, TimestampType.CREATE_TIME, ts, ts,
                               records_count=count, position=position, size=size, crc=0))
        position += size
        offset += count + draw(st.integers(0, 2))
    return rows_of(out)


policies = st.builds(RollPolicy, segment_bytes=st.integers(900, 20_000), segment_ms=st.integers(1, 20_000),
                     index_interval_bytes=st.integers(0, 3000), max_index_bytes=st.integers(12, 200))


def placements(rows, policy, start_offset, bulk: bool):
    planner = SegmentPlanner(policy, start_offset)
    out, i = [], 0
    while i < len(rows):
        placed = 0
        if bulk:
            rest = rows[i:].copy()
            sizes = rest["size"].astype(np.int64)
            rest["position"] = planner.size + np.concatenate(([0], np.cumsum(sizes)[:-1]))
            placed = planner.place_frames(rest)
            out += [None] * placed
        if not placed:
            out.append(planner.place(header_of(rows[i].item())))
            placed = 1
        i += placed
    return out, (planner.base_offset, planner.size, planner.last_offset, planner._offset_entries,
                 planner._time_entries, planner._max_timestamp)


@SETTINGS
@given(frame_rows(), policies, st.integers(0, 500))
def test_frames_placed_many_at_a_time_roll_where_one_by_one_does(rows, policy, start):
    start = min(start, int(rows["base_offset"][0]))
    expected = placements(rows, policy, start, bulk=False)
    assert same_both_ways(lambda: placements(rows, policy, start, bulk=True)) == ("value", expected)


def entries_for(rows) -> bytes:
    """Bytes that begin as the rows say (offset, size, magic), the rest filler."""
    out = bytearray()
    for row in rows.tolist():
        header = header_of(row)
        entry = bytearray(header.size)
        struct.pack_into(">qi", entry, 0, header.base_offset, header.size - 12)
        entry[16] = 2
        out += entry
    return bytes(out)


def written_files(tmp_path, name, rows, policy, bulk: bool, cut: int):
    storage, path = open_storage(str(tmp_path / name))
    with StagedOutput(storage, path) as out:
        writer = SegmentRunWriter(out.staged, "", policy, start_offset=int(rows["base_offset"][0]))
        data = entries_for(rows)
        if bulk:  # in two calls, cut anywhere
            at = int(rows["position"][cut]) if cut < len(rows) else len(data)
            if cut:
                writer.append_frames(rows[:cut], data[:at])
            if cut < len(rows):
                writer.append_frames(rows[cut:], data[at:])
        else:
            for row in rows.tolist():
                header = header_of(row)
                writer.append(header.replace(position=None), data[header.position:header.position + header.size],
                              facts=(None, -1, None))
        segments = writer.close()
    return ([(s.base_offset, s.log.size, s.facts.batches, s.facts.last_offset, s.reason) for s in segments],
            {p.name: p.read_bytes() for p in (tmp_path / name).iterdir()})


@SETTINGS
@given(frame_rows(), policies, st.integers(0, 60))
def test_segments_written_many_at_a_time_are_those_written_one_by_one(tmp_path_factory, rows, policy, cut):
    tmp = tmp_path_factory.mktemp("w")
    cut = min(cut, len(rows))
    expected = written_files(tmp, "one", rows, policy, False, cut)
    assert written_files(tmp, "many", rows, policy, True, cut) == expected
    with reference_code():
        assert written_files(tmp, "many-reference", rows, policy, True, cut) == expected


def test_rows_that_do_not_describe_the_bytes_are_refused(tmp_path):
    rows = rows_of([BatchHeader(2, 10, 12, 0, TimestampType.CREATE_TIME, 5, 5, records_count=3,
                                position=0, size=100, crc=0)])
    data = bytearray(entries_for(rows))
    data[16] = 1  # the magic says otherwise
    storage, path = open_storage(str(tmp_path / "x"))
    for code in (contextlib.nullcontext, reference_code):
        with code():
            out = StagedOutput(storage, path)
            writer = SegmentRunWriter(out.staged, "", RollPolicy(), start_offset=10)
            with pytest.raises(UsageError, match="does not describe the entry"):
                writer.append_frames(rows, bytes(data))
            writer.abort()
            out.abort()


# --- kfmt.format.legacy_runs.RunUpgrader ---

@SETTINGS
@given(legacy_runs_of_messages(), st.booleans(), st.integers(100, 3000), st.lists(st.integers(1, 9), max_size=6))
def test_a_run_converted_in_parts_is_the_run_converted_whole(run, rebatch, max_batch_bytes, cuts):
    data, rows = run

    def whole():
        return legacy_runs.upgrade_run(data, rows, "x", rebatch=rebatch, max_batch_bytes=max_batch_bytes)

    def parts():
        upgrader = legacy_runs.RunUpgrader(data, "x", rebatch=rebatch, max_batch_bytes=max_batch_bytes)
        pieces, start = [], 0
        for cut in cuts + [len(rows)]:
            stop = min(start + cut, len(rows))
            if stop > start:
                pieces += list(upgrader.pieces(rows[start:stop], more=stop < len(rows)))
            start = stop
        pieces += list(upgrader.finish())
        digest = ContentDigest()
        for p in pieces:
            digest.merge(p.digest)
        return b"".join(bytes(p.entries) for p in pieces), digest

    expected = outcome(whole)
    for code in (contextlib.nullcontext, reference_code):
        with code():
            got = outcome(parts)
        if expected[0] == "value":
            assert got[0] == "value"
            assert got[1] == (expected[1].entries, expected[1].digest)
        else:
            assert got == expected


# --- kfmt.storage.direct_io ---

@pytest.mark.parametrize("sizes", [
    [10], [direct_io.CHUNK - 1, 1], [direct_io.CHUNK + 4096 * 3, 7, 5000],
    [3 * direct_io.CHUNK + 12345], [100] * 50 + [2 * direct_io.CHUNK] + [1] * 3,
])
@pytest.mark.parametrize("direct", [True, False])
def test_direct_files_hold_exactly_what_was_written(tmp_path, monkeypatch, sizes, direct):
    if not direct:  # as on tmpfs: O_DIRECT refused
        real_open = os.open

        def no_direct(path, flags, *args):
            if flags & getattr(os, "O_DIRECT", 0):
                raise OSError(22, "Invalid argument")
            return real_open(path, flags, *args)
        monkeypatch.setattr(direct_io.os, "open", no_direct)
    rng = random.Random(sum(sizes))
    blob = rng.randbytes(sum(sizes) + 4096)
    view = memoryview(blob)[rng.randrange(4096):]  # not aligned, mostly
    path = tmp_path / "f"
    f = direct_io.DirectFile(str(path))
    at = 0
    for size in sizes:
        f.write(view[at:at + size])
        at += size
    f.close()
    assert path.read_bytes() == bytes(view[:at])


def test_an_aligned_mapping_is_written_without_a_copy(tmp_path):
    import mmap
    src = tmp_path / "src"
    src.write_bytes(random.Random(1).randbytes(3 * direct_io.CHUNK + 777))
    with open(src, "rb") as f:
        mapped = memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))
        out = direct_io.DirectFile(str(tmp_path / "dst"))
        out.write(mapped)
        out.close()
    assert (tmp_path / "dst").read_bytes() == src.read_bytes()


# --- the transforms: chunks of frames cut anywhere ---

@pytest.mark.parametrize("name", ["v0-none-0", "v1-none-0", "v1-gzip-0", "v2-none-0"])
@pytest.mark.parametrize("rebatch", [False, True])
def test_upgrade_output_does_not_depend_on_where_chunks_are_cut(tmp_path, monkeypatch, name, rebatch):
    from kfmt.partition.companions import CompanionOptions
    from kfmt.transforms.job_options import JobOptions
    from kfmt.transforms.upgrade import upgrade

    def run(dst):
        upgrade(str(REALKAFKA / name), str(dst), rebatch=rebatch, job=JobOptions(master="inprocess", progress=False),
                companions=CompanionOptions(now_ms=1_795_000_000_000))
        return {p.name: p.read_bytes() for p in dst.iterdir() if p.name != "kfmt-report.json"}

    expected = run(tmp_path / "default")
    monkeypatch.setattr(segment, "CHUNK_ROWS", 3)
    assert run(tmp_path / "small-chunks") == expected
    with reference_code():
        assert run(tmp_path / "reference") == expected
