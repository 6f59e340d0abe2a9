"""The compression codecs against Kafka's framing (docs/format.md §5) and against decompression bombs.

Expected bytes come from the reference's worked examples (docs/format.md §5.3, §5.4), which were computed from
Kafka's own writers; foreign payloads are made with independent libraries (python's gzip, cramjam,
python-lz4's frame writer, zstandard, kafka-python's old-Kafka LZ4 writer), the way producers other
than Java's write them and the broker then stores them verbatim (docs/format.md §5.1).
"""
from __future__ import annotations

import gzip
import io
import random
import struct
import subprocess
import sys
import tracemalloc
import zlib

import cramjam
import lz4.block
import lz4.frame
import pytest
import xxhash
import zstandard
from support.legacy_messages import legacy_message

from kfmt.errors import CompressionError, DataError, DecompressionLimitExceeded
from kfmt.format.message_formats import ReadOptions
from kfmt.format.model import BatchHeader, make_records
from kfmt.plugin import registry

TEXT = b"".join(b"record %d: the quick brown fox jumps over the lazy dog\n" % i for i in range(4000))
SUPER = b"Super"


def codec(name: str):
    return registry.get().compression_named(name)


def roundtrip_magics(name: str):
    return sorted(codec(name).magics)


# --- snappy (docs/format.md §5.3) ---------------------------------------------------------------------------

XERIAL_SUPER = bytes.fromhex("82534e415050590000000001000000010000000705105375706572")


@pytest.mark.parametrize("magic", [0, 1, 2])
def test_snappy_writes_xerial_framing_for_every_magic(magic):
    assert codec("snappy").compress(SUPER, magic=magic) == XERIAL_SUPER
    assert codec("snappy").decompress(XERIAL_SUPER, magic=magic) == SUPER


def test_snappy_blocks_hold_at_most_32_kib_of_input():
    framed = codec("snappy").compress(TEXT, magic=2)
    assert framed[:16] == XERIAL_SUPER[:16]
    pos, pieces = 16, []
    while pos < len(framed):
        n = struct.unpack_from(">i", framed, pos)[0]
        pieces.append(bytes(cramjam.snappy.decompress_raw(framed[pos + 4:pos + 4 + n])))
        pos += 4 + n
    assert all(len(p) <= 32 * 1024 for p in pieces[:-1]) and len(pieces) > 1
    assert b"".join(pieces) == TEXT


def _xerial(data: bytes, version: bytes = b"\x00\x00\x00\x01\x00\x00\x00\x01", block=32 * 1024) -> bytes:
    """xerial framing built by hand around cramjam's raw snappy blocks."""
    out = bytearray(b"\x82SNAPPY\x00" + version)
    for i in range(0, len(data), block):
        raw = bytes(cramjam.snappy.compress_raw(data[i:i + block]))
        out += struct.pack(">i", len(raw)) + raw
    return bytes(out)


@pytest.mark.parametrize("magic", [0, 1, 2])
def test_snappy_reads_raw_unframed_blocks(magic):
    # sarama writes one raw block with no framing; snappy-java falls back to reading it that way.
    assert codec("snappy").decompress(bytes(cramjam.snappy.compress_raw(TEXT)), magic=magic) == TEXT


def test_snappy_ignores_the_byte_order_of_the_version_fields():
    little_endian = _xerial(TEXT, version=b"\x01\x00\x00\x00\x01\x00\x00\x00")  # kafka-python #2414
    assert codec("snappy").decompress(little_endian, magic=2) == TEXT


def test_snappy_reads_concatenated_xerial_streams():
    assert codec("snappy").decompress(_xerial(TEXT[:5000]) + _xerial(TEXT[5000:]), magic=1) == TEXT


def test_snappy_rejects_the_official_framing_format():
    # cramjam.snappy.compress writes the Google framing format, which Kafka cannot read.
    with pytest.raises(CompressionError):
        codec("snappy").decompress(bytes(cramjam.snappy.compress(TEXT)), magic=2)


def test_snappy_rejects_a_bad_chunk_length():
    framed = bytearray(_xerial(TEXT))
    struct.pack_into(">i", framed, 16, len(framed))  # the first chunk claims more than there is
    with pytest.raises(CompressionError):
        codec("snappy").decompress(bytes(framed), magic=2)


# --- lz4 (docs/format.md §5.4) ------------------------------------------------------------------------------

LZ4_SUPER = bytes.fromhex("04224d18604082050000805375706572" "00000000")


def test_lz4_writes_kafkas_frame_with_the_correct_header_checksum():
    for magic in (1, 2):
        assert codec("lz4").compress(SUPER, magic=magic) == LZ4_SUPER


def test_lz4_writes_the_broken_header_checksum_for_magic_0():
    broken = LZ4_SUPER[:6] + b"\x1a" + LZ4_SUPER[7:]
    assert codec("lz4").compress(SUPER, magic=0) == broken
    # 0x1a is xxh32 over magic+FLG+BD (KAFKA-3160), 0x82 over FLG+BD.
    assert (xxhash.xxh32_intdigest(LZ4_SUPER[:6]) >> 8) & 0xFF == 0x1A
    assert (xxhash.xxh32_intdigest(LZ4_SUPER[4:6]) >> 8) & 0xFF == 0x82


def test_lz4_broken_header_checksum_is_accepted_for_magic_0_only():
    broken = codec("lz4").compress(TEXT, magic=0)
    assert broken[6] == 0x1A
    assert codec("lz4").decompress(broken, magic=0) == TEXT
    for magic in (1, 2):
        with pytest.raises(CompressionError, match="header checksum"):
            codec("lz4").decompress(broken, magic=magic)


def test_lz4_magic_0_reader_also_accepts_the_correct_checksum():
    # Kafka >= 0.10 skips the HC byte for magic 0, so either value reads.
    assert codec("lz4").decompress(codec("lz4").compress(TEXT, magic=1), magic=0) == TEXT


def test_lz4_reads_kafka_pythons_old_kafka_frames():
    from kafka.codec import lz4_encode_old_kafka

    assert codec("lz4").decompress(lz4_encode_old_kafka(TEXT), magic=0) == TEXT


def test_lz4_stores_incompressible_blocks_raw():
    noise = random.Random(7).randbytes(5000)
    frame = codec("lz4").compress(noise, magic=2)
    (word,) = struct.unpack_from("<I", frame, 7)
    assert word & 0x80000000 and word & 0x7FFFFFFF == len(noise)
    assert codec("lz4").decompress(frame, magic=2) == noise


@pytest.mark.parametrize("options", [
    dict(store_size=True),
    dict(store_size=True, content_checksum=True),
    dict(store_size=False, block_checksum=True),
    dict(store_size=True, content_checksum=True, block_checksum=True),
    dict(block_size=lz4.frame.BLOCKSIZE_MAX256KB),
    dict(block_size=lz4.frame.BLOCKSIZE_MAX1MB, block_checksum=True),
    dict(block_size=lz4.frame.BLOCKSIZE_MAX4MB, compression_level=9),
], ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
def test_lz4_reads_frames_other_producers_write(options):
    frame = lz4.frame.compress(TEXT * 8, block_linked=False, **options)
    for magic in (1, 2):
        assert codec("lz4").decompress(frame, magic=magic) == TEXT * 8


def test_lz4_verifies_block_checksums():
    frame = bytearray(lz4.frame.compress(TEXT, block_linked=False, block_checksum=True, store_size=False))
    (size,) = struct.unpack_from("<I", frame, 7)
    frame[7 + 4 + (size & 0x7FFFFFFF)] ^= 0xFF  # the first block's checksum
    with pytest.raises(CompressionError, match="checksum"):
        codec("lz4").decompress(bytes(frame), magic=2)


def test_lz4_rejects_dependent_blocks():
    frame = lz4.frame.compress(TEXT, block_linked=True)
    with pytest.raises(CompressionError, match="[Dd]ependent"):
        codec("lz4").decompress(frame, magic=2)


def test_lz4_decodes_only_the_first_frame():
    # Lz4BlockInputStream reports EOF at the first end mark (docs/format.md §5.4).
    first = lz4.frame.compress(TEXT[:1000], block_linked=False)
    second = lz4.frame.compress(TEXT[1000:], block_linked=False)
    assert codec("lz4").decompress(first + second, magic=2) == TEXT[:1000]


@pytest.mark.parametrize("damage", ["magic", "version", "truncated"])
def test_lz4_rejects_damaged_frames(damage):
    frame = bytearray(codec("lz4").compress(TEXT, magic=2))
    if damage == "magic":
        frame[0] ^= 0xFF
    elif damage == "version":
        frame[4] = 0xA0  # version bits 10
    else:
        del frame[len(frame) // 2:]
    with pytest.raises(CompressionError):
        codec("lz4").decompress(bytes(frame), magic=2)


# --- gzip (docs/format.md §5.2) -----------------------------------------------------------------------------

def test_gzip_writes_one_member_with_javas_header():
    out = codec("gzip").compress(TEXT, magic=2)
    # GZIPOutputStream: no FNAME, mtime 0, XFL 0 (OS 0xff on JDK >= 16)
    assert out[:9] == b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00"
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    assert d.decompress(out) == TEXT and d.eof and d.unused_data == b""


def test_gzip_reads_a_member_with_a_file_name_and_extra_field():
    buf = io.BytesIO()
    with gzip.GzipFile(filename="records.bin", mode="wb", fileobj=buf, mtime=1700000000) as f:
        f.write(TEXT)
    named = buf.getvalue()
    assert named[3] & 0x08  # FNAME
    assert codec("gzip").decompress(named, magic=1) == TEXT
    # FEXTRA + FCOMMENT by hand, around the same deflate stream
    deflated = zlib.compressobj(6, zlib.DEFLATED, -15)
    body = deflated.compress(TEXT) + deflated.flush()
    header = b"\x1f\x8b\x08\x14" + b"\x00" * 4 + b"\x00\x03" + struct.pack("<H", 4) + b"ab\x00\x00" + b"note\x00"
    trailer = struct.pack("<II", zlib.crc32(TEXT), len(TEXT))
    assert codec("gzip").decompress(header + body + trailer, magic=2) == TEXT


def test_gzip_reads_concatenated_members():
    members = gzip.compress(TEXT[:7000]) + gzip.compress(TEXT[7000:], compresslevel=1)
    assert codec("gzip").decompress(members, magic=0) == TEXT


@pytest.mark.parametrize("cut", [5, 20, -4])
def test_gzip_rejects_truncated_members(cut):
    with pytest.raises(CompressionError):
        codec("gzip").decompress(gzip.compress(TEXT)[:cut], magic=2)


# --- zstd (docs/format.md §5.5) -----------------------------------------------------------------------------

def test_zstd_writes_one_frame_without_content_size():
    out = codec("zstd").compress(TEXT, magic=2)
    assert zstandard.get_frame_parameters(out).content_size == zstandard.CONTENTSIZE_UNKNOWN
    # A one-shot decoder that needs the size fails on such frames; a streaming one reads them.
    with pytest.raises(zstandard.ZstdError):
        zstandard.ZstdDecompressor().decompress(out)
    assert zstandard.ZstdDecompressor().decompressobj().decompress(out) == TEXT


def test_zstd_reads_frames_without_content_size_and_with_checksums():
    plain = zstandard.ZstdCompressor(level=3, write_content_size=False).compress(TEXT)
    checked = zstandard.ZstdCompressor(level=19, write_checksum=True).compress(TEXT)
    assert codec("zstd").decompress(plain, magic=2) == TEXT
    assert codec("zstd").decompress(checked, magic=2) == TEXT


def test_zstd_reads_several_frames():
    c = zstandard.ZstdCompressor(write_content_size=False)
    frames = c.compress(TEXT[:100]) + c.compress(b"") + c.compress(TEXT[100:])
    assert codec("zstd").decompress(frames, magic=2) == TEXT


def test_zstd_rejects_truncated_and_corrupt_frames():
    frame = zstandard.ZstdCompressor(write_checksum=True).compress(TEXT)
    with pytest.raises(CompressionError):
        codec("zstd").decompress(frame[:-10], magic=2)
    damaged = bytearray(frame)
    damaged[-1] ^= 0xFF  # the content checksum
    with pytest.raises(CompressionError):
        codec("zstd").decompress(bytes(damaged), magic=2)


@pytest.mark.parametrize("magic", [0, 1])
def test_zstd_in_a_legacy_message_is_invalid(magic):
    with pytest.raises(CompressionError):
        registry.get().compression_for(4, magic)
    inner = legacy_message(0, magic, 0, b"k", b"v")
    wrapper = legacy_message(0, magic, 4, None, zstandard.ZstdCompressor().compress(inner))
    fmt = registry.get().format_for(magic)
    header = fmt.read_header(memoryview(wrapper), 0)
    with pytest.raises(CompressionError, match="zstd"):
        fmt.decode(memoryview(wrapper), header)


# --- decompression bombs ---------------------------------------------------------------------

LIMIT = 1 << 20
BOMB = 128 << 20  # bytes a bomb expands to; the peak allocation must stay far below it
PEAK_ALLOWED = 12 << 20


def _bombs():
    zeros = bytes(BOMB)
    gz = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = bytes(cramjam.snappy.compress_raw(bytes(32 * 1024)))
    return {
        "none": (zeros, (0, 1, 2)),
        "gzip": (gz.compress(zeros) + gz.flush(), (0, 1, 2)),
        "snappy": (b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01"
                   + (struct.pack(">i", len(block)) + block) * (BOMB // (32 * 1024)), (0, 1, 2)),
        "snappy-raw": (bytes(cramjam.snappy.compress_raw(zeros)), (0, 1, 2)),
        "lz4": (lz4.frame.compress(zeros, block_linked=False, block_size=lz4.frame.BLOCKSIZE_MAX64KB),
                (0, 1, 2)),
        "lz4-4mb-blocks": (lz4.frame.compress(zeros, block_linked=False,
                                              block_size=lz4.frame.BLOCKSIZE_MAX4MB), (0, 1, 2)),
        "zstd": (zstandard.ZstdCompressor(level=19, write_content_size=False).compress(zeros), (2,)),
    }


@pytest.fixture(scope="module")
def bombs():
    return _bombs()


@pytest.mark.parametrize("kind", ["none", "gzip", "snappy", "snappy-raw", "lz4", "lz4-4mb-blocks", "zstd"])
def test_decompression_bombs_stop_at_the_limit_without_allocating_the_bomb(bombs, kind):
    payload, magics = bombs[kind]
    name = kind.split("-")[0]
    for magic in magics:
        tracemalloc.start()
        try:
            with pytest.raises(DecompressionLimitExceeded, match=str(LIMIT)):
                codec(name).decompress(payload, magic=magic, max_size=LIMIT)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < PEAK_ALLOWED, f"{kind} v{magic}: peak {peak} bytes for a {LIMIT}-byte limit"


@pytest.mark.parametrize("name", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_a_payload_exactly_at_the_limit_is_accepted(name):
    data = TEXT[:LIMIT] if len(TEXT) >= LIMIT else (TEXT * (LIMIT // len(TEXT) + 1))[:LIMIT]
    c = codec(name)
    assert c.decompress(c.compress(data, magic=2), magic=2, max_size=LIMIT) == data
    with pytest.raises(DecompressionLimitExceeded):
        c.decompress(c.compress(data, magic=2), magic=2, max_size=LIMIT - 1)


def _v2_batch(codec_id: int, value: bytes) -> bytes:
    fmt = registry.get().format_for(2)
    header = BatchHeader(magic=2, base_offset=0, last_offset=0, compression=codec_id,
                         max_timestamp=1700000000000, base_timestamp=1700000000000)
    return fmt.encode(header, make_records([0], [1700000000000], [None], [value]))


@pytest.mark.parametrize("name", ["gzip", "snappy", "lz4", "zstd"])
def test_read_options_cap_a_batch_and_the_error_names_its_offset(name):
    entry = _v2_batch(codec(name).id, bytes(4 * LIMIT))
    fmt = registry.get().format_for(2)
    header = fmt.read_header(memoryview(entry), 0)
    assert len(fmt.decode(memoryview(entry), header).records) == 1
    with pytest.raises(DecompressionLimitExceeded):
        fmt.decode(memoryview(entry), header, ReadOptions(max_decompressed=LIMIT))


def test_legacy_wrapper_is_capped_too():
    inner = legacy_message(0, 1, 0, None, bytes(4 * LIMIT), 1700000000000)
    wrapper = legacy_message(0, 1, 1, None, gzip.compress(inner), 1700000000000)
    fmt = registry.get().format_for(1)
    header = fmt.read_header(memoryview(wrapper), 0)
    with pytest.raises(DecompressionLimitExceeded):
        fmt.decode(memoryview(wrapper), header, ReadOptions(max_decompressed=LIMIT))


def test_environment_limit_makes_cat_exit_65_with_one_line(tmp_path):
    part = tmp_path / "bomb-0"
    part.mkdir()
    (part / "00000000000000000000.log").write_bytes(_v2_batch(1, bytes(4 * LIMIT)))
    env_run = subprocess.run([sys.executable, "-m", "kfmt", "cat", str(part)], capture_output=True,
                             text=True, env={"KFMT_MAX_DECOMPRESSED_BYTES": str(LIMIT),
                                             "PATH": "/usr/bin:/bin"})
    assert env_run.returncode == 65, env_run.stderr
    lines = env_run.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in env_run.stderr
    assert "00000000000000000000.log" in lines[0] and "position 0" in lines[0] and "offset 0" in lines[0]
    assert str(LIMIT) in lines[0]
    # without the variable the default cap (1 GiB) lets it through
    ok = subprocess.run([sys.executable, "-m", "kfmt", "cat", str(part)], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    # a limit that is not a number of bytes is a usage error, not a crash
    bad = subprocess.run([sys.executable, "-m", "kfmt", "cat", str(part)], capture_output=True, text=True,
                         env={"KFMT_MAX_DECOMPRESSED_BYTES": "1G", "PATH": "/usr/bin:/bin"})
    assert bad.returncode == 2 and "KFMT_MAX_DECOMPRESSED_BYTES" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


def test_every_codec_roundtrips_in_every_magic_it_allows():
    for c in registry.get().compressions.values():
        for magic in sorted(c.magics):
            for data in (b"", SUPER, TEXT):
                assert c.decompress(c.compress(data, magic=magic), magic=magic) == data, (c.name, magic)
    assert isinstance(CompressionError("x"), DataError)
