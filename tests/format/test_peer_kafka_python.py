"""kafka-python as a peer: kfmt decodes what kafka-python's builders write, and kafka-python's readers
decode what kfmt's encoders write, field by field, for every magic x compression both can do.

What kafka-python (3.0.x, `kafka.record`) can and cannot do, and how the tests cope:
* Its builders are a producer's: the broker assigns offsets, timestamps types and leader epochs.
  v2 batches are always written with baseOffset 0 and partitionLeaderEpoch 0, legacy compressed
  wrappers with offset 0 and timestamp 0. The tests assign them afterwards the way a broker does
  (bytes 0-7 and 12-15 are outside both CRCs) and also read the wrappers as built (a v1 wrapper
  with offset 0 is the librdkafka quirk of docs/format.md §3.4).
* It cannot build LogAppendTime data (the broker sets it): the tests apply the broker's in-place
  rewrite (docs/format.md §3.5, §4.3: attributes, timestamp, CRC recomputed with kafka-python's own CRC code).
* It cannot build control batches, empty batches or delete-horizon batches, and has no notion of
  the delete-horizon attribute (bit 6) when reading: record timestamps still come out right since
  they are baseTimestamp + delta (docs/format.md §4.3), which the test checks. Control batches are compared with
  the reference's computed bytes instead (docs/format.md §4.6, §4.7).
* Its v2 reader decodes header keys as UTF-8 `str`, so only UTF-8 header keys are compared here
  (binary header keys are covered by test_roundtrip_properties).
* Its v2 builder silently drops compression when it does not shrink the data: the values here
  are compressible and the codec is asserted.
* snappy: kafka-python needs python-snappy, which this venv does not have (kafka.codec.has_snappy()
  is False). kafka-python's own xerial framing code is still run, over cramjam's raw snappy
  blocks put in place of python-snappy's compress/decompress (the same raw block format).
"""
from __future__ import annotations

import struct
import types
import zlib

import cramjam
import kafka.codec
import pytest
from kafka.record._crc32c import crc as peer_crc32c
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

from kfmt.format import segment
from kfmt.format.model import BatchHeader, TimestampType, make_records
from kfmt.plugin import registry

NONE, GZIP, SNAPPY, LZ4, ZSTD = range(5)
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
PEER_LEGACY_CODECS = [NONE, GZIP, SNAPPY, LZ4]  # kafka-python refuses zstd below magic 2
PEER_V2_CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]

BIG = b"compressible text " * 120  # keeps kafka-python's v2 builder from dropping compression

# (timestamp, key, value, headers): null, empty and binary keys and values, out-of-order and -1
# timestamps, repeated and non-ASCII header keys, null and binary header values.
RECORDS = [
    (1700000000000, None, b"first value", []),
    (1700000000500, b"", b"", [("h", b"v")]),
    (1699999990000, b"\x00\xffbinary key", None, [("h", None), ("h", b"")]),
    (1700000001000, "ключ".encode(), "значение".encode() + BIG, [("заголовок", b"\x00\x01\xfe")]),
    (-1, b"k", BIG, []),
    (1700000002000, b"last", b"\x00" * 64, [("", b"empty key"), ("h", b"again")]),
]


@pytest.fixture(autouse=True)
def snappy_for_kafka_python(monkeypatch):
    """python-snappy's raw-block API, served by cramjam, so kafka-python can run its xerial code."""
    if not kafka.codec.has_snappy():
        monkeypatch.setattr(kafka.codec, "snappy", types.SimpleNamespace(
            compress=lambda data: bytes(cramjam.snappy.compress_raw(bytes(data))),
            decompress=lambda data: bytes(cramjam.snappy.decompress_raw(bytes(data)))))


def kfmt_read(data: bytes):
    """Batches of a byte string holding a sequence of entries, as kfmt decodes them (strict)."""
    return list(segment.batches(memoryview(bytes(data)), "peer.log"))


def kfmt_rows(batches) -> list[tuple]:
    rows = []
    for batch in batches:
        for r in batch.records.to_pylist():
            rows.append((r["offset"], r["timestamp"], r["key"], r["value"],
                         [(h["key"], h["value"]) for h in r["headers"]]))
    return rows


def expected_rows(offsets, records, magic, log_append_time=None) -> list[tuple]:
    rows = []
    for offset, (ts, key, value, headers) in zip(offsets, records):
        if magic == 0:
            ts = -1
        elif log_append_time is not None:
            ts = log_append_time
        rows.append((offset, ts, key, value, [(k.encode(), v) for k, v in headers]))
    return rows


def legacy_records():
    return [(ts, k, v, []) for ts, k, v, _ in RECORDS]


# --- kafka-python writes, kfmt reads -----------------------------------------------------------

def peer_legacy_set(magic: int, codec: int, offsets: list[int]) -> bytes:
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    for offset, (ts, key, value, _) in zip(offsets, legacy_records()):
        assert builder.append(offset, timestamp=ts, key=key, value=value) is not None
    return bytes(builder.build())


@pytest.mark.parametrize("codec", PEER_LEGACY_CODECS, ids=CODEC_NAMES.get)
@pytest.mark.parametrize("magic", [0, 1])
def test_kfmt_reads_kafka_python_legacy_messages_as_built(magic, codec):
    offsets = [100, 101, 102, 103, 104, 105]
    data = peer_legacy_set(magic, codec, offsets)
    batches = kfmt_read(data)
    assert kfmt_rows(batches) == expected_rows(offsets, legacy_records(), magic)
    assert len(batches) == (1 if codec else len(offsets))
    for batch in batches:
        h = batch.header
        assert (h.magic, h.compression) == (magic, codec)
        assert h.timestamp_type == (TimestampType.NO_TIMESTAMP_TYPE if magic == 0
                                    else TimestampType.CREATE_TIME)
        assert batch.crc_valid and all(m.crc_valid for m in batch.legacy)
        assert all(m.magic == magic for m in batch.legacy)


def assign_wrapper_offset(entry: bytes, offset: int) -> bytes:
    """What the broker does to a compressed wrapper: its offset becomes the last inner offset."""
    return struct.pack(">q", offset) + entry[8:]


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4], ids=CODEC_NAMES.get)
@pytest.mark.parametrize("magic", [0, 1])
def test_kfmt_reads_kafka_python_wrappers_after_broker_offset_assignment(magic, codec):
    # v1 inner offsets are relative (0..n-1), v0 inner offsets absolute (docs/format.md §3.4).
    first = 5000
    absolute = list(range(first, first + len(RECORDS)))
    inner = [o - first for o in absolute] if magic == 1 else absolute
    data = assign_wrapper_offset(peer_legacy_set(magic, codec, inner), absolute[-1])
    (batch,) = kfmt_read(data)
    assert kfmt_rows([batch]) == expected_rows(absolute, legacy_records(), magic)
    assert (batch.header.base_offset, batch.header.last_offset) == (absolute[0], absolute[-1])
    assert batch.header.records_count == len(RECORDS)


def broker_log_append_time_legacy(entry: bytes, append_time: int) -> bytes:
    """The broker's in-place LogAppendTime path for a v1 wrapper (docs/format.md §3.5): the wrapper's attributes
    get bit 3, its timestamp becomes the append time, its CRC is recomputed; inner bytes untouched."""
    body = bytearray(entry[16:])
    body[1] |= 0x08
    struct.pack_into(">q", body, 2, append_time)
    return entry[:12] + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF) + bytes(body)


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4], ids=CODEC_NAMES.get)
def test_kfmt_reports_the_wrapper_time_of_a_log_append_time_wrapper(codec):
    entry = assign_wrapper_offset(peer_legacy_set(1, codec, list(range(len(RECORDS)))), 205)
    entry = broker_log_append_time_legacy(entry, 1750000000123)
    (batch,) = kfmt_read(entry)
    assert batch.header.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert kfmt_rows([batch]) == expected_rows(range(200, 206), legacy_records(), 1, 1750000000123)
    assert batch.crc_valid
    # the inner messages still say CreateTime with their own timestamps
    assert [m.stored_timestamp for m in batch.legacy] == [r[0] for r in RECORDS]
    assert not any(m.attributes & 0x08 for m in batch.legacy)
    # and kafka-python agrees on what a consumer sees
    (peer_batch,) = MemoryRecords(entry)
    assert [(r.offset, r.timestamp, r.timestamp_type) for r in peer_batch] == \
        [(o, 1750000000123, 1) for o in range(200, 206)]


def peer_v2_batch(codec: int, deltas: list[int], *, producer=(-1, -1, -1), transactional=False) -> bytes:
    pid, epoch, seq = producer
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=transactional,
                                        producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                                        batch_size=1 << 20)
    for delta, (ts, key, value, headers) in zip(deltas, RECORDS):
        assert builder.append(delta, timestamp=ts, key=key, value=value, headers=headers) is not None
    return bytes(builder.build())


def broker_assign(entry: bytes, base_offset: int, leader_epoch: int) -> bytes:
    """baseOffset and partitionLeaderEpoch, which the broker sets; neither is under the CRC (docs/format.md §4.1)."""
    return struct.pack(">q", base_offset) + entry[8:12] + struct.pack(">i", leader_epoch) + entry[16:]


@pytest.mark.parametrize("codec", PEER_V2_CODECS, ids=CODEC_NAMES.get)
@pytest.mark.parametrize("producer", ["none", "idempotent", "transactional"])
def test_kfmt_reads_kafka_python_v2_batches(codec, producer):
    fields = {"none": ((-1, -1, -1), False), "idempotent": ((4001, 3, 77), False),
              "transactional": ((4002, 0, 2147483646), True)}[producer]
    deltas = [0, 1, 2, 5, 6, 9]  # gaps, as compaction leaves them
    entry = broker_assign(peer_v2_batch(codec, deltas, producer=fields[0], transactional=fields[1]),
                          base_offset=1000, leader_epoch=7)
    (batch,) = kfmt_read(entry)
    h = batch.header
    assert kfmt_rows([batch]) == expected_rows([1000 + d for d in deltas], RECORDS, 2)
    assert (h.magic, h.compression, h.timestamp_type) == (2, codec, TimestampType.CREATE_TIME)
    assert (h.base_offset, h.last_offset, h.records_count) == (1000, 1009, len(RECORDS))
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == fields[0]
    assert h.is_transactional == fields[1] and not h.is_control and not h.has_delete_horizon
    assert h.partition_leader_epoch == 7
    assert h.base_timestamp == RECORDS[0][0]
    assert h.max_timestamp == max(r[0] for r in RECORDS)
    if producer == "transactional":
        assert h.last_sequence == 7  # 2147483646 + 9 wraps past INT32_MAX to 0 (docs/format.md §4.3)
    assert batch.crc_valid


@pytest.mark.parametrize("codec", PEER_V2_CODECS, ids=CODEC_NAMES.get)
def test_kfmt_reads_a_log_append_time_v2_batch(codec):
    entry = bytearray(broker_assign(peer_v2_batch(codec, list(range(len(RECORDS)))), 50, 0))
    # the broker's LogAppendTime rewrite: attribute bit 3, maxTimestamp, CRC-32C recomputed
    struct.pack_into(">h", entry, 21, struct.unpack_from(">h", entry, 21)[0] | 0x08)
    struct.pack_into(">q", entry, 35, 1760000000000)
    struct.pack_into(">I", entry, 17, peer_crc32c(bytes(entry[21:])))
    (batch,) = kfmt_read(bytes(entry))
    assert batch.header.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert kfmt_rows([batch]) == expected_rows(range(50, 56), RECORDS, 2, log_append_time=1760000000000)


@pytest.mark.parametrize("magic,codec", [(m, c) for m in (0, 1) for c in PEER_LEGACY_CODECS]
                         + [(2, c) for c in PEER_V2_CODECS])
def test_kfmt_reads_memory_records_builder_output(magic, codec):
    builder = MemoryRecordsBuilder(magic=magic, compression_type=codec, batch_size=1 << 20, offset=300)
    offsets = []
    for i, (ts, key, value, headers) in enumerate(RECORDS):
        if i == 3:
            builder.skip(4)  # "exposed for testing compacted records"
        offsets.append(builder.next_offset())
        assert builder.append(ts, key, value, headers if magic == 2 else None) is not None
    builder.close()
    records = RECORDS if magic == 2 else legacy_records()
    assert kfmt_rows(kfmt_read(builder.buffer())) == expected_rows(offsets, records, magic)


# --- kfmt writes, kafka-python reads -----------------------------------------------------------

def kfmt_legacy_entries(magic: int, codec: int, offsets, lat: int | None = None) -> bytes:
    fmt = registry.get().format_for(magic)
    recs = legacy_records()
    ts_type = (TimestampType.NO_TIMESTAMP_TYPE if magic == 0 else
               TimestampType.LOG_APPEND_TIME if lat is not None else TimestampType.CREATE_TIME)

    def header(last_offset):
        return BatchHeader(magic=magic, base_offset=None, last_offset=last_offset, compression=codec,
                           timestamp_type=ts_type, max_timestamp=-1 if lat is None else lat)

    timestamps = [-1 if magic == 0 else r[0] for r in recs]
    if codec:
        return fmt.encode(header(offsets[-1]), make_records(
            list(offsets), timestamps, [r[1] for r in recs], [r[2] for r in recs]))
    return b"".join(fmt.encode(header(o), make_records([o], [t], [r[1]], [r[2]]))
                    for o, t, r in zip(offsets, timestamps, recs))


def peer_read(data: bytes):
    """(batch, batch CRC valid, records) as kafka-python's MemoryRecords reads them."""
    out = []
    for batch in MemoryRecords(bytes(data)):
        crc_ok = batch.validate_crc()  # before iterating: iteration replaces the buffer
        out.append((batch, crc_ok, list(batch)))
    return out


def peer_rows(read) -> list[tuple]:
    return [(r.offset, r.timestamp, r.key, r.value, [(k.encode(), v) for k, v in r.headers])
            for _, _, records in read for r in records]


@pytest.mark.parametrize("codec", PEER_LEGACY_CODECS, ids=CODEC_NAMES.get)
@pytest.mark.parametrize("magic", [0, 1])
def test_kafka_python_reads_kfmt_legacy_messages(magic, codec):
    offsets = [7, 8, 9, 10, 11, 12]
    read = peer_read(kfmt_legacy_entries(magic, codec, offsets))
    # kafka-python reports v0 timestamps as None (kfmt and Java: -1)
    rows = [(o, -1 if t is None else t, k, v, h) for o, t, k, v, h in peer_rows(read)]
    assert rows == expected_rows(offsets, legacy_records(), magic)
    assert len(read) == (1 if codec else len(offsets))
    for batch, crc_ok, records in read:
        assert crc_ok and (batch.magic, batch.compression_type) == (magic, codec)
        assert batch.timestamp_type == (None if magic == 0 else 0)
        for r in records:
            assert r.validate_crc() and r.magic == magic
            assert r.timestamp_type == (None if magic == 0 else 0)
    if codec:  # a wrapper carries its last inner offset and (CreateTime) the max inner timestamp
        assert read[0][0].base_offset == offsets[-1]
        if magic == 1:
            assert read[0][0]._timestamp == max(r[0] for r in RECORDS)


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4], ids=CODEC_NAMES.get)
def test_kafka_python_reads_kfmt_log_append_time_wrappers(codec):
    read = peer_read(kfmt_legacy_entries(1, codec, range(40, 46), lat=1750000000999))
    assert peer_rows(read) == expected_rows(range(40, 46), legacy_records(), 1, 1750000000999)
    (batch, crc_ok, records), = read
    assert crc_ok and batch.timestamp_type == 1 and all(r.validate_crc() for r in records)


def kfmt_v2(codec: int, offsets, timestamps, *, records=RECORDS, **fields) -> bytes:
    header = dict(magic=2, base_offset=offsets[0] if offsets else 0, compression=codec,
                  base_timestamp=timestamps[0] if timestamps else -1,
                  max_timestamp=max(timestamps) if timestamps else -1)
    header["last_offset"] = offsets[-1] if offsets else header["base_offset"]
    header.update(fields)
    rows = make_records(list(offsets), list(timestamps), [r[1] for r in records],
                        [r[2] for r in records], [[(k.encode(), v) for k, v in r[3]] for r in records])
    return registry.get().format_for(2).encode(BatchHeader(**header), rows)


@pytest.mark.parametrize("codec", PEER_V2_CODECS, ids=CODEC_NAMES.get)
@pytest.mark.parametrize("producer", ["none", "idempotent", "transactional"])
def test_kafka_python_reads_kfmt_v2_batches(codec, producer):
    fields = {"none": {}, "idempotent": dict(producer_id=9, producer_epoch=1, base_sequence=40),
              "transactional": dict(producer_id=10, producer_epoch=2, base_sequence=0,
                                    is_transactional=True)}[producer]
    offsets = [2000, 2001, 2004, 2005, 2006, 2010]
    timestamps = [r[0] for r in RECORDS]
    entry = kfmt_v2(codec, offsets, timestamps, partition_leader_epoch=12, last_offset=2011, **fields)
    (batch, crc_ok, records), = read = peer_read(entry)
    assert crc_ok
    assert peer_rows(read) == expected_rows(offsets, RECORDS, 2)
    assert all(r.timestamp_type == 0 for r in records)
    assert (batch.base_offset, batch.last_offset, batch.records_count) == (2000, 2011, 6)
    assert (batch.compression_type, batch.timestamp_type, batch.leader_epoch) == (codec, 0, 12)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (
        fields.get("producer_id", -1), fields.get("producer_epoch", -1), fields.get("base_sequence", -1))
    assert batch.is_transactional == (producer == "transactional") and not batch.is_control_batch
    assert (batch.first_timestamp, batch.max_timestamp) == (timestamps[0], max(timestamps))


@pytest.mark.parametrize("codec", PEER_V2_CODECS, ids=CODEC_NAMES.get)
def test_kafka_python_reads_kfmt_log_append_time_batches(codec):
    offsets = list(range(60, 66))
    entry = kfmt_v2(codec, offsets, [r[0] for r in RECORDS], timestamp_type=TimestampType.LOG_APPEND_TIME,
                    max_timestamp=1770000000000)
    (batch, crc_ok, records), = read = peer_read(entry)
    assert crc_ok and batch.timestamp_type == 1
    assert peer_rows(read) == expected_rows(offsets, RECORDS, 2, log_append_time=1770000000000)


@pytest.mark.parametrize("codec", PEER_V2_CODECS, ids=CODEC_NAMES.get)
def test_kafka_python_reads_kfmt_delete_horizon_batches(codec):
    # attribute bit 6: baseTimestamp holds the horizon, record timestamps stay base + delta (docs/format.md §4.7)
    offsets = [70, 72, 73, 74, 75, 79]
    timestamps = [r[0] for r in RECORDS]
    entry = kfmt_v2(codec, offsets, timestamps, has_delete_horizon=True, base_timestamp=1795419986455)
    (batch, crc_ok, records), = read = peer_read(entry)
    assert crc_ok and batch.attributes & 0x40 and batch.first_timestamp == 1795419986455
    assert peer_rows(read) == expected_rows(offsets, RECORDS, 2)
    assert kfmt_rows(kfmt_read(entry)) == expected_rows(offsets, RECORDS, 2)


def test_kafka_python_reads_kfmt_control_batches():
    from kfmt.format.control import ControlType, control_key, end_txn_marker_value

    rows = make_records([88], [1700000000000], [control_key(ControlType.ABORT)], [end_txn_marker_value(5)])
    header = BatchHeader(magic=2, base_offset=88, last_offset=88, max_timestamp=1700000000000,
                         base_timestamp=1700000000000, producer_id=1000, producer_epoch=3,
                         is_transactional=True, is_control=True, partition_leader_epoch=0)
    entry = registry.get().format_for(2).encode(header, rows)
    (batch, crc_ok, records), = peer_read(entry)
    assert crc_ok and batch.is_control_batch and batch.is_transactional
    (marker,) = records
    assert (marker.offset, marker.version, marker.abort, marker.commit) == (88, 0, True, False)
    assert marker.value == b"\x00\x00\x00\x00\x00\x05"


def test_kafka_python_reads_an_empty_kfmt_batch():
    # what the cleaner leaves for a producer's last batch (docs/format.md §4.7): header only, 61 bytes
    header = BatchHeader(magic=2, base_offset=20, last_offset=24, max_timestamp=1700000000000,
                         base_timestamp=-1, producer_id=1000, producer_epoch=0, base_sequence=5)
    entry = registry.get().format_for(2).encode(header, make_records([], [], [], []))
    assert len(entry) == 61
    (batch, crc_ok, records), = peer_read(entry)
    assert crc_ok and records == [] and batch.records_count == 0
    assert (batch.base_offset, batch.last_offset, batch.last_sequence) == (20, 24, 9)


# --- byte-identical where both sides write the same thing ------------------------------------

@pytest.mark.parametrize("magic", [0, 1])
def test_uncompressed_legacy_bytes_are_identical(magic):
    offsets = list(range(len(RECORDS)))
    assert kfmt_legacy_entries(magic, NONE, offsets) == peer_legacy_set(magic, NONE, offsets)


def test_uncompressed_v2_bytes_are_identical():
    offsets = list(range(len(RECORDS)))
    timestamps = [r[0] for r in RECORDS]
    ours = kfmt_v2(NONE, offsets, timestamps, partition_leader_epoch=0, producer_id=6, producer_epoch=0,
                   base_sequence=12)
    theirs = peer_v2_batch(NONE, offsets, producer=(6, 0, 12))
    assert ours == theirs


# --- the reference's computed examples (docs/format.md §3.3, §4.5, §4.6, §4.7) --------------------------------

V0_TEST_SUPER = bytes.fromhex("0000000000000000 00000017 1095c9ca 00 00 00000004 74657374 00000005 5375706572")
V1_TEST_SUPER = bytes.fromhex("0000000000000000 0000001f 831fac85 01 00 000000000098967f "
                              "00000004 74657374 00000005 5375706572")
V2_TEST_SUPER = bytes.fromhex(
    "0000000000000000 00000041 00000000 02 38cb2fd7 0000 00000000 0000018bcfe56800 0000018bcfe56800"
    " ffffffffffffffff ffff ffffffff 00000001 1e0000000874657374 0a5375706572 00")
COMMIT_MARKER = bytes.fromhex(
    "000000000000000a 00000042 00000000 02 fc84b034 0030 00000000 0000018bcfe56800 0000018bcfe56800"
    " 00000000000003e8 0000 ffffffff 00000001 20 00 00 00 08 00000001 0c 000000000005 00")
EMPTY_BATCH = bytes.fromhex(
    "0000000000000014 00000031 00000000 02 1f209c90 0000 00000004 ffffffffffffffff 0000018bcfe56800"
    " 00000000000003e8 0000 00000005 00000000")


@pytest.mark.parametrize("magic,expected,timestamp", [(0, V0_TEST_SUPER, -1), (1, V1_TEST_SUPER, 9999999)])
def test_legacy_reference_example(magic, expected, timestamp):
    fmt = registry.get().format_for(magic)
    header = BatchHeader(magic=magic, base_offset=0, last_offset=0, timestamp_type=(
        TimestampType.NO_TIMESTAMP_TYPE if magic == 0 else TimestampType.CREATE_TIME))
    assert fmt.encode(header, make_records([0], [timestamp], [b"test"], [b"Super"])) == expected
    assert kfmt_rows(kfmt_read(expected)) == [(0, timestamp, b"test", b"Super", [])]
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=1024)
    builder.append(0, timestamp=timestamp, key=b"test", value=b"Super")
    assert bytes(builder.build()) == expected


def test_v2_reference_examples():
    fmt = registry.get().format_for(2)
    super_header = BatchHeader(magic=2, base_offset=0, last_offset=0, base_timestamp=1700000000000,
                               max_timestamp=1700000000000, partition_leader_epoch=0)
    assert fmt.encode(super_header, make_records([0], [1700000000000], [b"test"], [b"Super"])) == V2_TEST_SUPER
    (batch,) = kfmt_read(V2_TEST_SUPER)
    assert batch.header.crc == 952840151 and batch.crc_valid

    from kfmt.format.control import ControlType, control_key, end_txn_marker_value
    marker_header = BatchHeader(magic=2, base_offset=10, last_offset=10, base_timestamp=1700000000000,
                                max_timestamp=1700000000000, producer_id=1000, producer_epoch=0,
                                is_transactional=True, is_control=True, partition_leader_epoch=0)
    marker = make_records([10], [1700000000000], [control_key(ControlType.COMMIT)], [end_txn_marker_value(5)])
    assert fmt.encode(marker_header, marker) == COMMIT_MARKER
    (batch,) = kfmt_read(COMMIT_MARKER)
    assert batch.header.is_control and batch.header.is_transactional and batch.header.crc == 0xFC84B034

    empty_header = BatchHeader(magic=2, base_offset=20, last_offset=24, base_timestamp=-1,
                               max_timestamp=1700000000000, producer_id=1000, producer_epoch=0,
                               base_sequence=5, partition_leader_epoch=0)
    assert fmt.encode(empty_header, make_records([], [], [], [])) == EMPTY_BATCH
    (batch,) = kfmt_read(EMPTY_BATCH)
    assert len(batch) == 0 and batch.header.next_offset == 25 and batch.header.crc == 0x1F209C90
