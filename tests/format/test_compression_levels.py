"""Compression levels: what each codec plugin declares (Compression.levels), what `--compression-level`
accepts, and that every level writes batches independent readers take as Kafka's: kafka-python and
aiokafka (pure Python and C) read back kfmt's output record for record, and zlib/gzip inflate its
gzip members. gzip's default, ISA-L level 1, is checked on compressible and incompressible payloads
(random bytes, as encrypted or already-compressed values are); its Kafka level 6 gives zlib's exact
bytes (what the broker writes, which compact keeps: tests/transforms/test_compaction.py)."""
from __future__ import annotations

import gzip
import random
import zlib
from base64 import b64decode

import pytest
from aiokafka.record.memory_records import MemoryRecords as AioMemoryRecords
from hypothesis import given, settings
from hypothesis import strategies as st
from isal import isal_zlib
from kafka.record.memory_records import MemoryRecords
from support.cli import run_kfmt
from support.corpus import REALKAFKA
from support.corpus_truth import consumer_records
from support.transform_runs import peer_records, transform

from kfmt.errors import UsageError
from kfmt.format.codecs import compression_levels
from kfmt.format.model import BatchHeader, TimestampType, make_records
from kfmt.plugin import registry

GZIP_LEVELS = [*range(1, 10), "isal-1", "isal-2", "isal-3"]


def codec(name: str):
    return registry.get().compression_named(name)


def test_each_codec_declares_its_levels_and_default():
    declared = {c.name: c.levels for c in registry.get().compressions.values()}
    assert declared["none"] is None and declared["snappy"] is None
    assert (declared["gzip"].lowest, declared["gzip"].highest, declared["gzip"].default) == (1, 9, "isal-1")
    assert declared["gzip"].names == ("isal-1", "isal-2", "isal-3")
    assert declared["gzip"].kafka_level == 6  # Kafka's compression.gzip.level default (KIP-390)
    assert (declared["lz4"].lowest, declared["lz4"].highest, declared["lz4"].kafka_level) == (1, 17, 9)
    assert (declared["zstd"].lowest, declared["zstd"].highest, declared["zstd"].kafka_level) == (-131072, 22, 3)


@pytest.mark.parametrize(("specs", "command_codec", "expected"), [
    (["gzip=6"], None, {1: 6}),
    (["gzip=isal-3", "zstd=-5", "lz4=17"], None, {1: "isal-3", 4: -5, 3: 17}),
    (["9"], "zstd", {4: 9}),
    (["zstd=9"], "zstd", {4: 9}),
    ({"gzip": "isal-2"}, None, {1: "isal-2"}),
    (None, None, {}),
])
def test_level_specs(specs, command_codec, expected):
    assert compression_levels(specs, command_codec) == expected


@pytest.mark.parametrize(("specs", "command_codec", "message"), [
    (["6"], None, "name the codec, as gzip=6"),
    (["gzip=10"], None, "outside gzip's levels 1..9, isal-1, isal-2, isal-3; default isal-1"),
    (["gzip=isal-0"], None, "outside gzip's levels"),
    (["zstd=23"], None, "outside zstd's levels"),
    (["snappy=1"], None, "snappy has no compression levels"),
    (["brotli=1"], None, "unknown compression 'brotli'"),
    (["gzip=6"], "zstd", "this command writes zstd, not gzip"),
])
def test_bad_level_specs_name_what_is_accepted(specs, command_codec, message):
    with pytest.raises(UsageError, match=message):
        compression_levels(specs, command_codec)


def _batch(magic: int, name: str, values: list[bytes], level) -> bytes:
    n = len(values)
    header = BatchHeader(magic=magic, base_offset=0, last_offset=n - 1, compression=codec(name).id,
                         timestamp_type=TimestampType.CREATE_TIME, max_timestamp=1_700_000_000_000 + n - 1)
    records = make_records(list(range(n)), [1_700_000_000_000 + i for i in range(n)],
                           [b"k%d" % i for i in range(n)], values)
    return registry.get().format_for(magic).encode(header, records, level=level)


def _peer_read(entry: bytes) -> list[tuple]:
    """(offset, key, value) as kafka-python reads the entry, checked equal to aiokafka's (C) read."""
    peer = [(r.offset, r.key, r.value) for b in MemoryRecords(entry) for r in b]
    aio, records = [], AioMemoryRecords(entry)
    while records.has_next():
        aio += [(r.offset, r.key, r.value) for r in records.next_batch()]
    assert aio == peer
    return peer


def _values(kind: str, n: int = 40, seed: int = 0) -> list[bytes]:
    rng = random.Random(seed)
    if kind == "random":
        return [rng.randbytes(rng.randrange(1, 900)) for _ in range(n)]
    return [b'{"event":"click","user":"user-%07d","path":"/product/%d"}' % (rng.randrange(10**6), i)
            for i in range(n)]


@pytest.mark.parametrize("kind", ["json", "random"])
@pytest.mark.parametrize("magic", [1, 2])
@pytest.mark.parametrize("level", GZIP_LEVELS + [None])
def test_every_gzip_level_writes_what_kafka_readers_read(magic, level, kind):
    values = _values(kind)
    entry = _batch(magic, "gzip", values, level)
    assert _peer_read(entry) == [(i, b"k%d" % i, v) for i, v in enumerate(values)]


@pytest.mark.parametrize("kind", ["json", "random"])
def test_gzip_members_are_valid_gzip_and_level_6_is_zlibs_bytes(kind):
    data = b"".join(_values(kind, 400))
    gz = codec("gzip")
    for level in GZIP_LEVELS + [None]:
        member = gz.compress(data, magic=2, level=level)
        assert gzip.decompress(member) == zlib.decompress(member, 31) == data
    deflater = zlib.compressobj(6, zlib.DEFLATED, -15)
    assert gz.compress(data, magic=2, level=6)[10:-8] == deflater.compress(data) + deflater.flush()
    default = gz.compress(data, magic=2)
    assert default == gz.compress(data, magic=2, level="isal-1")
    for name, isal_level in (("isal-1", 1), ("isal-2", 2), ("isal-3", 3)):  # Java's header, ISA-L's deflate
        trailer = (zlib.crc32(data) & 0xFFFFFFFF).to_bytes(4, "little") + len(data).to_bytes(4, "little")
        assert gz.compress(data, magic=2, level=name) == (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
                                                          + isal_zlib.compress(data, isal_level, -15) + trailer)
    if kind == "random":  # ISA-L's level 1 does not grow incompressible data (its level 0 would)
        assert len(default) <= len(data) * 1.01 + 64


@pytest.mark.parametrize(("name", "levels"), [("lz4", [1, 9, 12, 17]), ("zstd", [-5, 1, 3, 19])])
def test_other_codecs_levels_write_what_kafka_readers_read(name, levels):
    values = _values("json")
    for level in levels:
        assert _peer_read(_batch(2, name, values, level)) == [(i, b"k%d" % i, v) for i, v in enumerate(values)]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.binary(max_size=2000), min_size=1, max_size=30), st.sampled_from(GZIP_LEVELS))
def test_any_payload_at_any_gzip_level_round_trips(values, level):
    entry = _batch(2, "gzip", values, level)
    assert _peer_read(entry) == [(i, b"k%d" % i, v) for i, v in enumerate(values)]


@pytest.mark.parametrize("level", [None, "gzip=6", "gzip=isal-3"])
def test_upgraded_gzip_wrappers_read_as_the_java_consumer_read_them(tmp_path, level):
    name = "v1-gzip-0"
    args = [] if level is None else ["--compression-level", level]
    report = transform("upgrade", REALKAFKA / name, tmp_path / "out", *args)
    expected = {None: {}, "gzip=6": {"gzip": 6}, "gzip=isal-3": {"gzip": "isal-3"}}[level]
    assert report["options"]["compression_levels"] == expected
    def b(v):
        return None if v is None else b64decode(v)

    truth = [(r["offset"], r["timestamp"], b(r["key"]), b(r["value"]), []) for r in consumer_records(name)]
    assert peer_records(tmp_path / "out") == truth


def test_a_level_without_its_codec_is_a_usage_error(tmp_path):
    result = run_kfmt("upgrade", REALKAFKA / "v1-gzip-0", tmp_path / "out", "--compression-level", "6")
    assert result.code == 2 and "name the codec, as gzip=6" in result.err
    assert not (tmp_path / "out").exists()
    result = run_kfmt("compact", REALKAFKA / "v1-gzip-0", tmp_path / "out", "--compression-level", "gzip=0")
    assert result.code == 2 and "outside gzip's levels" in result.err
