"""Hypothesis strategies for records, batches and segments in every format and codec, and their
encoding with the peer library (kafka-python), for the round-trip and fuzz property tests."""
from __future__ import annotations

import itertools

from hypothesis import strategies as st

from kfmt.format.control import ControlType, control_key, end_txn_marker_value
from kfmt.format.model import BatchHeader, TimestampType, make_records
from kfmt.plugin import registry

LEGACY_CODECS = ["none", "gzip", "snappy", "lz4"]


V2_CODECS = LEGACY_CODECS + ["zstd"]


FORMAT_CODECS = [(m, c) for m in (0, 1) for c in LEGACY_CODECS] + [(2, c) for c in V2_CODECS]


MAX_TS = 2**43  # year 2248; deltas against any of these fit comfortably in a varlong


maybe_bytes = st.none() | st.binary(max_size=40)


timestamps = st.just(-1) | st.integers(0, MAX_TS)


header_keys = st.binary(max_size=12) | st.text(max_size=6).map(str.encode)  # non-ASCII included


headers = st.lists(st.tuples(header_keys, maybe_bytes), max_size=4)


def codec_id(name: str) -> int:
    return registry.get().compression_named(name).id


@st.composite
def record_lists(draw, *, min_size=1, max_size=12, with_headers=True):
    """(offset gaps, timestamps, keys, values, headers) for up to max_size records."""
    n = draw(st.integers(min_size, max_size))
    gaps = draw(st.lists(st.integers(1, 1000), min_size=n, max_size=n))
    ts = draw(st.lists(timestamps, min_size=n, max_size=n))
    keys = draw(st.lists(maybe_bytes, min_size=n, max_size=n))
    values = draw(st.lists(maybe_bytes, min_size=n, max_size=n))
    if with_headers and draw(st.booleans()):
        hs = draw(st.lists(headers, min_size=n, max_size=n))
        if n > 1 and draw(st.booleans()):
            hs[0] = hs[0] + [(b"dup", b"1"), (b"dup", None)]  # a repeated header key
    else:
        hs = [[] for _ in range(n)]
    return gaps, ts, keys, values, hs


@st.composite
def batches(draw, magic: int, codec: str, base: int):
    """(header, records, expected records) of one batch starting at offset `base`."""
    compressed = codec != "none"
    legacy_single = magic < 2 and not compressed  # an uncompressed legacy entry is one message
    gaps, ts, keys, values, hs = draw(record_lists(
        max_size=1 if legacy_single else 12, with_headers=magic == 2))
    # a v2 batch's first record may lie after its base offset once compaction removed some (docs/format.md §4.7)
    first = base + (draw(st.integers(0, 5)) if magic == 2 else 0)
    offsets = list(itertools.accumulate([first] + gaps[1:]))
    if magic == 2:
        kind = draw(st.sampled_from(["plain", "plain", "transactional", "control", "horizon", "empty"]))
    else:
        kind = "plain"
    if kind == "control":
        marker = draw(st.sampled_from([ControlType.ABORT, ControlType.COMMIT]))
        offsets, ts = offsets[:1], ts[:1]
        keys, values, hs = [control_key(marker)], [end_txn_marker_value(draw(st.integers(0, 2**31 - 1)))], [[]]
    if kind == "empty":
        offsets, ts, keys, values, hs = [], [], [], [], []
    records = make_records(offsets, ts, keys, values, hs)

    if magic == 0:
        ts_type = TimestampType.NO_TIMESTAMP_TYPE
    else:
        ts_type = draw(st.sampled_from([TimestampType.CREATE_TIME, TimestampType.LOG_APPEND_TIME]))
    lat = ts_type == TimestampType.LOG_APPEND_TIME
    append_time = draw(st.integers(0, MAX_TS))
    max_ts = append_time if lat else -1 if magic == 0 or not ts else max(ts)
    header = dict(magic=magic, base_offset=base,
                  last_offset=offsets[-1] if offsets else base + draw(st.integers(0, 20)),
                  compression=codec_id(codec), timestamp_type=ts_type, max_timestamp=max_ts)
    if magic == 2:
        header["last_offset"] = max(header["last_offset"], offsets[-1] if offsets else base)
        header["last_offset"] += draw(st.integers(0, 3))  # trailing records compacted away
        header["base_timestamp"] = ts[0] if ts else -1
        header["partition_leader_epoch"] = draw(st.integers(-1, 2**31 - 1))
        if kind in ("transactional", "control") or draw(st.booleans()):
            header.update(producer_id=draw(st.integers(0, 2**63 - 1)),
                          producer_epoch=draw(st.integers(0, 2**15 - 1)),
                          base_sequence=-1 if kind == "control" else draw(st.integers(0, 2**31 - 1)))
        header["is_transactional"] = kind in ("transactional", "control")
        header["is_control"] = kind == "control"
        if kind == "horizon":
            header.update(has_delete_horizon=True, base_timestamp=draw(st.integers(0, MAX_TS)))
        if kind == "empty":
            header["compression"] = 0  # the cleaner writes empty batches uncompressed (docs/format.md §4.7)
    expected_ts = [append_time if lat else -1 if magic == 0 else t for t in ts]
    expected = make_records(offsets, expected_ts, keys, values, hs)
    return BatchHeader(**header), records, expected


def encode(header, records) -> bytes:
    return registry.get().format_for(header.magic).encode(header, records)


@st.composite
def segments(draw):
    """Batches of mixed formats and codecs with increasing offsets, as one segment's bytes."""
    base = draw(st.integers(0, 2**40))
    parts = []
    for _ in range(draw(st.integers(1, 6))):
        magic, codec = draw(st.sampled_from(FORMAT_CODECS))
        header, records, expected = draw(batches(magic, codec, base))
        parts.append((header, records, expected))
        base = header.last_offset + 1
    return parts
