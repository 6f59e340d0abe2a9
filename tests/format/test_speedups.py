"""The compiled kernels (kfmt._speedups) give exactly what the pure-Python reference gives.

Every comparison runs the same call twice in one process: once as kfmt runs (the kernels, when
built) and once with the kernels switched off in every module that uses them, which is what
KFMT_PURE_PYTHON=1 does for a whole run. Results must be equal: record columns, header facts, frame
rows and tails, encoded bytes, digests; and for bad input the same DataError (message, position,
offset). The inputs: every segment of the real-broker corpus, batches written by kafka-python, and
hypothesis-generated records, segments and damaged bytes.

The rest of the suite runs on whichever code is active; run it both ways:
    python -m pytest tests/                        # compiled kernels (when built)
    KFMT_PURE_PYTHON=1 python -m pytest tests/     # the pure-Python fallback
"""
from __future__ import annotations

import importlib
import random

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from support.corpus import REAL_DIRS, REALKAFKA
from support.kernels import (
    LEGACY_CODECS,
    SETTINGS,
    both,
    int64s,
    legacy_runs_of_messages,
    outcome,
    record_columns,
    segments,
    timestamps,
)

from kfmt.format import legacy_runs, segment
from kfmt.format.digest import ContentDigest, record_hashes_sum
from kfmt.format.frames import headers_of, rows_of
from kfmt.format.message_formats import LENIENT, STRICT
from kfmt.format.model import BatchHeader, TimestampType, make_records
from kfmt.plugin import registry


def comparable(value):
    """Turn results into things == compares fully (Arrow data by content, arrays by rows)."""
    if isinstance(value, tuple):
        return tuple(comparable(v) for v in value)
    if isinstance(value, list):
        return [comparable(v) for v in value]
    if isinstance(value, pa.RecordBatch):
        assert value.schema == make_records([], [], [], []).schema
        return ("records", value.to_pylist())
    if isinstance(value, np.ndarray):
        return ("array", value.tolist())
    if isinstance(value, legacy_runs.DecodedRun):
        return ("run", comparable(value.records), value.crc_valid.tolist())
    if isinstance(value, legacy_runs.UpgradedRun):
        return ("upgraded", value.entries, value.rows.tolist(), value.digest)
    if hasattr(value, "records") and hasattr(value, "header"):  # a Batch
        legacy = None if value.legacy is None else list(value.legacy)
        return ("batch", value.header, comparable(value.records), legacy, value.crc_valid)
    return value


def assert_same(fn):
    fast, reference = both(fn)
    assert comparable(fast) == comparable(reference)
    return fast


# --- everything a segment holds ---

def scan_all(data, file="seg.log"):
    scanner = segment.FrameScanner(memoryview(data), file)
    headers = list(scanner)
    chunks = segment.FrameScanner(memoryview(data), file)
    rows = [r.tolist() for r in chunks.chunks()]
    return headers, scanner.tail, rows, chunks.tail


def decode_all(data, options, file="seg.log"):
    scanner = segment.FrameScanner(memoryview(data), file)
    out = []
    for header in scanner:
        out.append(outcome(lambda: segment.decode(memoryview(data), header, file, options)))
    return out


def segment_facts(data):
    """Frames, tails, strict and lenient decodes and the digest of a segment's bytes."""
    def digest():
        d = ContentDigest()
        for batch in segment.batches(memoryview(data), "seg.log", LENIENT):
            d.update(batch.records)
        return d
    return (scan_all(data), decode_all(data, STRICT), decode_all(data, LENIENT), outcome(digest))


@pytest.mark.parametrize("name", REAL_DIRS)
@pytest.mark.needs("speedups")
def test_corpus_segments(name):
    for log in sorted((REALKAFKA / name).glob("*.log")):
        assert_same(lambda: segment_facts(log.read_bytes()))


@pytest.mark.parametrize("name", REAL_DIRS)
@pytest.mark.needs("speedups")
def test_corpus_reencoded(name):
    """Every corpus batch re-encoded from its decoded columns: same bytes either way."""
    for log in sorted((REALKAFKA / name).glob("*.log")):
        for batch in segment.batches(memoryview(log.read_bytes()), log.name):
            fmt = registry.get().format_for(batch.header.magic)
            assert_same(lambda: fmt.encode(batch.header, batch.records))


@pytest.mark.parametrize("name", ["v0-none-0", "v1-none-0"])
@pytest.mark.needs("speedups")
def test_corpus_legacy_runs(name):
    for log in sorted((REALKAFKA / name).glob("*.log")):
        data = log.read_bytes()
        rows = np.concatenate(list(segment.FrameScanner(data, log.name).chunks()) or [rows_of([])])
        for start, stop in legacy_runs.message_runs(rows):
            run = rows[start:stop]
            assert_same(lambda: legacy_runs.decode_run(data, run, log.name))
            for rebatch in (False, True):
                assert_same(lambda: legacy_runs.upgrade_run(data, run, log.name, rebatch=rebatch,
                                                            max_batch_bytes=1000, out_position=5))


def companions_by_rows(part_dir, by_rows: bool) -> dict:
    """A partition's companion files from CompanionBuilder: fed header by header (add_batch), or
    with runs of data batches as frame rows (add_frames) and control batches decoded."""
    from kfmt.partition.companions import CompanionBuilder
    from kfmt.partition.segment_recovery import RecoveredSegmentBuilder
    builder = CompanionBuilder(now_ms=1_800_000_000_000)
    out, facts = {}, []
    for log in sorted(part_dir.glob("*.log")):
        data = log.read_bytes()
        base = int(log.stem)
        builder.begin_segment(base)
        writer_side = RecoveredSegmentBuilder(base)
        for rows in segment.FrameScanner(data, log.name).chunks():
            control = (rows["magic"] == 2) & (rows["attributes"] & 0x20 != 0)
            edges = [0] + [i for i in np.flatnonzero(control).tolist() for i in (i, i + 1)] + [len(rows)]
            for a, b in zip(edges[::2], edges[1::2]):
                if by_rows:
                    builder.add_frames(rows[a:b])
                    writer_side.add_frames(rows[a:b])
                else:
                    for h in headers_of(rows[a:b]):
                        builder.add_batch(h)
                        writer_side.add(h)
                if b < len(rows):  # the control batch at b
                    h = headers_of(rows[b:b + 1])[0]
                    batch = segment.decode(data, h, log.name)
                    builder.add_decoded_batch(batch)
                    from kfmt.partition.companions import control_facts
                    kind, epoch, ts = control_facts(batch)
                    writer_side.add(h, kind, epoch, ts)
        out.update(builder.end_segment().files())
        facts.append(writer_side.finish())
    out.update(builder.finish().files())
    return out, [(c.files(), f) for c, f in facts]


@pytest.mark.parametrize("name", REAL_DIRS)
@pytest.mark.needs("speedups")
def test_companions_from_rows(name):
    """CompanionBuilder.add_frames / RecoveredSegmentBuilder.add_frames give what add per header gives."""
    expected = companions_by_rows(REALKAFKA / name, by_rows=False)
    assert_same(lambda: companions_by_rows(REALKAFKA / name, by_rows=True))
    assert comparable(companions_by_rows(REALKAFKA / name, by_rows=True)) == comparable(expected)


@pytest.mark.needs("speedups")
@pytest.mark.parametrize("chunk_rows", [1, 3, 7])
def test_chunk_boundaries(monkeypatch, chunk_rows):
    """Scans cut into many array chunks (the compiled scanner stops and resumes at each) give the
    same frames, and runs of legacy messages decoded chunk by chunk the same records."""
    monkeypatch.setattr(segment, "CHUNK_ROWS", chunk_rows)
    for name in ["v0-none-0", "v1-none-0", "v2-none-0", "txn-v2-none-0", "v1-gzip-0"]:
        for log in sorted((REALKAFKA / name).glob("*.log"))[:6]:
            data = log.read_bytes()
            assert_same(lambda: segment_facts(data))
            assert_same(lambda: [b.to_pylist() for b in legacy_runs.record_blocks(memoryview(data), log.name)])


def test_rows_describe_what_headers_say():
    """FrameScanner.chunks() rows are its headers, field for field, and convert back losslessly."""
    for log in sorted(REALKAFKA.glob("*-0/*.log"))[:200]:
        scanner = segment.FrameScanner(log.read_bytes(), log.name)
        headers = list(scanner)
        rows = list(segment.FrameScanner(log.read_bytes(), log.name).chunks())
        assert [h for r in rows for h in headers_of(r)] == headers
        if headers:
            assert rows_of(headers).tolist() == np.concatenate(rows).tolist()


# --- hypothesis: records, batches, segments ---


def v2_records():
    return importlib.import_module("kfmt.format.v2_records")


@SETTINGS
@given(record_columns(), int64s | st.integers(0, 2**40), timestamps, st.integers(0, 3))
@pytest.mark.needs("speedups")
def test_records_encode_and_decode(records, base_offset, base_timestamp, sliced):
    records = records.slice(min(sliced, records.num_rows))  # columns with an offset
    m = v2_records()
    fast, reference = both(lambda: m.encode_records(records, base_offset, base_timestamp))
    assert fast == reference
    assert outcome(lambda: record_hashes_sum(records)) == both(lambda: record_hashes_sum(records))[1]
    if fast[0] == "value":
        body = fast[1]
        for lat in (None, 1700000000000):
            assert_same(lambda: m.decode_records(body, records.num_rows, base_offset, base_timestamp, lat))


@SETTINGS
@given(record_columns(max_size=6), st.data())
@pytest.mark.needs("speedups")
def test_damaged_records(records, data):
    """Record bytes with a byte changed, bytes cut or added, a wrong count: same verdict."""
    m = v2_records()
    body = bytearray(m.encode_records_reference(records, 0, 0))
    how = data.draw(st.sampled_from(["flip", "cut", "extend", "count"]))
    count = records.num_rows
    if how == "flip" and body:
        i = data.draw(st.integers(0, len(body) - 1))
        body[i] = data.draw(st.integers(0, 255))
    elif how == "cut" and body:
        del body[data.draw(st.integers(0, len(body) - 1)):]
    elif how == "extend":
        body += data.draw(st.binary(min_size=1, max_size=12))
    else:
        count += data.draw(st.integers(-3, 3))
    assert_same(lambda: m.decode_records(bytes(body), count, 10, 20, None))


@SETTINGS
@given(segments())
@pytest.mark.needs("speedups")
def test_segments(data):
    assert_same(lambda: segment_facts(data))


@SETTINGS
@given(segments(), st.integers(0, 50), st.integers(0, 50))
@pytest.mark.needs("speedups")
def test_partial_ranges(data, cut_start, cut_end):
    """Scans of a byte range that starts and ends anywhere, with a base offset in the file."""
    base = 1000
    start = base + min(cut_start, len(data))
    end = max(start, base + len(data) - cut_end)

    def scan():
        scanner = segment.FrameScanner(memoryview(data), "seg.log", start, end, base)
        return list(scanner), scanner.tail, [r.tolist() for r in segment.FrameScanner(
            memoryview(data), "seg.log", start, end, base).chunks()]
    assert_same(scan)


@SETTINGS
@given(legacy_runs_of_messages(), st.sampled_from([STRICT, LENIENT]), st.integers(100, 3000),
       st.sampled_from([16, 1 << 23]))
@pytest.mark.needs("speedups")
def test_legacy_runs(run, options, max_batch_bytes, call_bytes):
    data, rows = run
    saved = legacy_runs.MAX_CALL_BYTES
    legacy_runs.MAX_CALL_BYTES = call_bytes  # many kernel calls, cut anywhere
    try:
        assert_same(lambda: legacy_runs.decode_run(data, rows, "x", options))
        for rebatch in (False, True):
            assert_same(lambda: legacy_runs.upgrade_run(data, rows, "x", options=options,
                                                        rebatch=rebatch, max_batch_bytes=max_batch_bytes))
    finally:
        legacy_runs.MAX_CALL_BYTES = saved


@SETTINGS
@given(record_columns(max_size=12), st.sampled_from([0, 1]), st.none() | st.integers(0, 2**43))
@pytest.mark.needs("speedups")
def test_legacy_encoding(records, magic, log_append_time):
    """Uncompressed runs, and every legacy format plugin encode (wrappers of every codec)."""
    records = records.drop_columns(["headers"]).append_column(
        "headers", pa.array([[]] * records.num_rows, records.schema.field("headers").type))
    assert_same(lambda: legacy_runs.encode_messages(records, magic, log_append_time))
    fmt = registry.get().format_for(magic)
    lat = magic == 1 and log_append_time is not None
    for codec in LEGACY_CODECS[magic]:
        header = BatchHeader(magic=magic, base_offset=0, last_offset=0,
                             compression=registry.get().compression_named(codec).id,
                             timestamp_type=(TimestampType.LOG_APPEND_TIME if lat else
                                             TimestampType.CREATE_TIME if magic else
                                             TimestampType.NO_TIMESTAMP_TYPE),
                             max_timestamp=log_append_time if lat else 0)
        if codec == "none" and records.num_rows:
            one = records.slice(0, 1)
            assert_same(lambda: fmt.encode(header, one))
        elif codec != "none" and records.num_rows:
            assert_same(lambda: refused_or(lambda: fmt.encode(header, records)))


def refused_or(fn):
    """What the encoder gives, or the kind of error it raises for records it cannot write."""
    try:
        return fn()
    except Exception as err:  # the same refusal either way (struct.error, ValueError, ...)
        return type(err).__name__


def test_upgraded_runs_read_back_as_the_records_converted():
    """The kernel's v2 output, read back by kfmt's reader: the input records, one batch per message
    (Kafka 4.0's rule), and the digest of what was converted."""
    builder = LegacyRecordBatchBuilder(1, 0, 10**7)
    rng = random.Random(7)
    for i in range(500):
        builder.append(i * 2, 1700000000000 + rng.randrange(1000), b"k%d" % i, bytes(rng.randrange(256) for _ in range(rng.randrange(50))))
    data = bytes(builder.build())
    rows = np.concatenate(list(segment.FrameScanner(data, "x").chunks()))
    run = legacy_runs.upgrade_run(data, rows, "x")
    batches = list(segment.batches(memoryview(run.entries), "out"))
    assert [b.header.magic for b in batches] == [2] * 500
    assert all(len(b) == 1 for b in batches)
    digest = ContentDigest()
    for b in batches:
        digest.update(b.records)
    assert digest == run.digest
    assert legacy_runs.decode_run(data, rows, "x").records.to_pylist() == \
        pa.Table.from_batches([b.records for b in batches]).to_pylist()


@pytest.mark.needs("speedups")
def test_kafka_python_batches(monkeypatch):
    """Batches written by an independent library (kafka-python), with headers and nulls."""
    import types

    import cramjam
    import kafka.codec
    if not kafka.codec.has_snappy():  # python-snappy's raw-block API from cramjam (as test_peer_kafka_python)
        monkeypatch.setattr(kafka.codec, "snappy", types.SimpleNamespace(
            compress=lambda data: bytes(cramjam.snappy.compress_raw(bytes(data))),
            decompress=lambda data: bytes(cramjam.snappy.decompress_raw(bytes(data)))))
    rng = random.Random(3)
    for codec in (0, 1, 2, 3, 4):
        builder = DefaultRecordBatchBuilder(2, codec, 0, -1, -1, -1, 10**7)
        for i in range(300):
            hs = [("h%d" % j, None if j == 1 else b"v" * j) for j in range(rng.randrange(3))]
            builder.append(i, 1700000000000 + i, None if i % 9 == 0 else b"k%d" % i,
                           None if i % 11 == 0 else bytes(rng.randrange(256) for _ in range(rng.randrange(300))), hs)
        data = bytes(builder.build())
        assert_same(lambda: segment_facts(data))
