"""Round-trip properties (hypothesis): whatever records and header facts a batch may hold survive
encode -> decode unchanged, in every message format and every codec valid for it, and whole
segments (concatenated batches of mixed formats) survive encode -> scan -> decode.

"Unchanged" means as a Kafka consumer reports them (docs/format.md §3.5, §4.3): v0 records have no
timestamp (-1), LogAppendTime batches give every record the batch's append time (the header's
max_timestamp), and everything else comes back exactly: offsets with their gaps, out-of-order and
-1 timestamps, null / empty / binary keys and values, headers with null and binary values,
repeated and non-ASCII keys, producer fields, transactional / control / delete-horizon flags.
"""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.record_strategies import FORMAT_CODECS, batches, encode, segments

from kfmt.format import segment
from kfmt.format.control import ControlType, control_type, end_txn_marker

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def decode_one(entry: bytes):
    (batch,) = list(segment.batches(memoryview(entry), "prop.log"))
    return batch


def assert_same_batch(decoded, header, expected):
    assert decoded.records.to_pylist() == expected.to_pylist()
    h = decoded.header
    assert decoded.crc_valid
    assert (h.magic, h.compression, h.timestamp_type) == (header.magic, header.compression,
                                                          header.timestamp_type)
    assert h.last_offset == header.last_offset
    assert h.records_count == expected.num_rows
    if header.magic == 2:
        assert h.base_offset == header.base_offset
        for name in ("max_timestamp", "base_timestamp", "partition_leader_epoch", "producer_id",
                     "producer_epoch", "base_sequence", "is_transactional", "is_control",
                     "has_delete_horizon"):
            assert getattr(h, name) == getattr(header, name), name
        if h.is_control and len(decoded):
            key, value = decoded.records.column(2)[0].as_py(), decoded.records.column(3)[0].as_py()
            assert control_type(key) in (ControlType.ABORT, ControlType.COMMIT)
            assert end_txn_marker(value)[0] == 0
    else:
        assert h.base_offset == expected.column(0)[0].as_py()
        assert h.max_timestamp == header.max_timestamp
        assert all(m.crc_valid for m in decoded.legacy)


def _roundtrip(magic, codec):
    @SETTINGS
    @given(data=st.data())
    def check(data):
        header, records, expected = data.draw(batches(magic, codec, data.draw(st.integers(0, 2**40))))
        assert_same_batch(decode_one(encode(header, records)), header, expected)
    return check


# One test per format x codec, so a failure names the combination.
for _magic, _codec in FORMAT_CODECS:
    globals()[f"test_roundtrip_v{_magic}_{_codec}"] = _roundtrip(_magic, _codec)


@SETTINGS
@given(parts=segments(), zero_tail=st.integers(0, 40))
def test_whole_segments_roundtrip(parts, zero_tail):
    entries = [encode(h, r) for h, r, _ in parts]
    data = b"".join(entries) + bytes(zero_tail)  # a preallocated tail is the end of data
    scanner = segment.FrameScanner(memoryview(data), "prop.log")
    frames = list(scanner)
    assert scanner.tail.kind == ("clean" if zero_tail == 0 else "zeros")
    assert [f.size for f in frames] == [len(e) for e in entries]
    assert [f.position for f in frames] == [sum(map(len, entries[:i])) for i in range(len(entries))]
    assert [f.last_offset for f in frames] == [h.last_offset for h, _, _ in parts]
    decoded = list(segment.batches(memoryview(data), "prop.log"))
    for batch, (header, _, expected) in zip(decoded, parts, strict=True):
        assert_same_batch(batch, header, expected)
