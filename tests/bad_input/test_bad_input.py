"""Bad data: `kfmt cat` says what is wrong in one line naming the file, the byte position and the
offset, exits 65 and never shows a traceback; a zero-filled tail is the end of data, not an error.

Inputs are copies of corpus partitions damaged in tmp_path at positions taken from Kafka's own
batch listing (`dump-log.batches.txt`, kafka-dump-log's output), and kfmt-encoded batches for the
shapes the corpus does not have (control records, record counts, codec ids).
"""
from __future__ import annotations

import gzip
import json
import re
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import crc32c
import pytest
import zstandard
from support.cli import run_kfmt
from support.corpus import REALKAFKA
from support.corpus_truth import ListedEntry as Entry
from support.corpus_truth import consumer_records, kafka_listing
from support.legacy_messages import legacy_message
from support.partition_copies import copy_partition

from kfmt.format.control import end_txn_marker_value
from kfmt.format.model import BatchHeader, make_records
from kfmt.plugin import registry


def pick(name: str, *, magic=None, codec=None, index=0, min_size=0) -> Entry:
    """The index-th entry of a partition (in log order) with the given magic / codec / size."""
    found = [e for e in kafka_listing(name) if (magic is None or e.magic == magic)
             and (codec is None or e.codec == codec) and e.size >= min_size]
    return found[index]


def damage(part: Path, entry: Entry, edit) -> None:
    """Rewrite one segment: edit(bytearray of the whole file, entry) may change bytes or length."""
    path = part / entry.file
    data = bytearray(path.read_bytes())
    edit(data, entry)
    path.write_bytes(bytes(data))


def fix_v2_crc(data: bytearray, pos: int) -> None:
    size = struct.unpack_from(">i", data, pos + 8)[0] + 12
    struct.pack_into(">I", data, pos + 17, crc32c.crc32c(bytes(data[pos + 21:pos + size])))


def fix_legacy_crc(data: bytearray, pos: int) -> None:
    size = struct.unpack_from(">i", data, pos + 8)[0] + 12
    struct.pack_into(">I", data, pos + 12, zlib.crc32(bytes(data[pos + 16:pos + size])))


def cat_error(path, *args) -> str:
    """Run `kfmt cat` expecting bad data: exit 65 and exactly one error line, no traceback."""
    result = run_kfmt("cat", path, *args)
    assert result.code == 65, (result.code, result.err)
    assert "Traceback" not in result.err
    lines = result.err.strip().splitlines()
    assert len(lines) == 1, result.err
    assert lines[0].startswith("kfmt: error: ")
    return lines[0]


def assert_located(line: str, file: Path, position: int, offset: int) -> None:
    assert f"{file}, position {position}, offset {offset}: " in line, line


# --- truncated batches -----------------------------------------------------------------------

# Cut points inside the last entry of a partition (a crash-cut tail, left out with a warning): inside the 12-byte log overhead, inside the
# header before and after the magic byte, in the middle, one byte short. (A cut within the first
# bytes of an entry whose offset field starts with zero bytes leaves bytes indistinguishable from a
# zero-filled tail; those points are not used.)
@pytest.mark.parametrize("name", ["v2-none-0", "v2-zstd-0", "v1-gzip-0", "v0-none-0", "v0-lz4-0"])
@pytest.mark.parametrize("cut", ["in-overhead", "before-magic", "after-magic", "middle", "one-short"])
def test_truncated_last_entry(tmp_path, name, cut):
    part = copy_partition(name, tmp_path)
    last = kafka_listing(name)[-1]
    keep = {"in-overhead": 10, "before-magic": 16, "after-magic": 30, "middle": last.size // 2,
            "one-short": last.size - 1}[cut]

    def truncate(data, e):
        del data[e.position + keep:]
    damage(part, last, truncate)
    # The tail Kafka's log recovery truncates (LogSegment.recover): every complete record, one
    # warning naming the file, the position and the byte count, exit 0 (docs/consumer-view.md).
    result = run_kfmt("cat", part, "--format", "json")
    assert result.code == 0, result.err
    before = kafka_listing(name)[-2].last_offset
    assert [json.loads(line)["offset"] for line in result.lines] == \
        [r["offset"] for r in consumer_records(name) if r["offset"] <= before]
    lines = result.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kfmt: warning: "), result.err
    assert f"{part / last.file}: position {last.position}: {keep} byte(s) " in lines[0], lines[0]


def test_truncated_entry_in_an_earlier_segment_stops_there(tmp_path):
    part = copy_partition("v2-lz4-0", tmp_path)
    entry = pick("v2-lz4-0", index=3)
    damage(part, entry, lambda data, e: data.__delitem__(slice(e.position + e.size - 7, None)))
    result = run_kfmt("cat", part, "--format", "json")
    assert result.code == 65
    offsets = [int(re.search(r'"offset":(\d+)', line)[1]) for line in result.lines]
    assert offsets == list(range(entry.offset))  # everything before the damaged batch was printed
    assert_located(result.err, part / entry.file, entry.position, entry.offset)


# --- bad CRCs --------------------------------------------------------------------------------

@pytest.mark.parametrize("name,magic,codec", [
    ("v2-none-0", 2, "none"), ("v2-gzip-0", 2, "gzip"), ("txn-v2-none-0", 2, "none"),
    ("v1-none-0", 1, "none"), ("v0-none-0", 0, "none"), ("v1-snappy-0", 1, "snappy"),
    ("v0-gzip-0", 0, "gzip")])
def test_bad_crc(tmp_path, name, magic, codec):
    part = copy_partition(name, tmp_path)
    entry = pick(name, magic=magic, codec=codec, index=2)

    def flip_a_bit_near_the_end(data, e):
        data[e.position + e.size - 3] ^= 0x10
    damage(part, entry, flip_a_bit_near_the_end)
    line = cat_error(part)
    assert_located(line, part / entry.file, entry.position, entry.offset)
    assert "crc" in line


@pytest.mark.parametrize("name", ["v1-gzip-0", "v0-snappy-0", "v1-lz4-0"])
def test_bad_crc_of_an_inner_message(tmp_path, name):
    """The wrapper's CRC is right, one inner message's is not (checked as a consumer with
    check.crcs does, §3.4)."""
    part = copy_partition(name, tmp_path)
    entry = pick(name, index=1)
    magic = entry.magic
    codec = registry.get().compression_named(entry.codec)

    def corrupt_inner(data, e):
        wrapper = bytes(data[e.position:e.position + e.size])
        key_at = 18 if magic == 0 else 26
        value_at = key_at + 8  # wrappers have a null key: keyLength -1, then valueLength
        inner = bytearray(codec.decompress(wrapper[value_at:], magic=magic))
        first_size = struct.unpack_from(">i", inner, 8)[0]
        inner[12 + first_size - 1] ^= 0x01  # the first inner message's last value byte
        value = codec.compress(bytes(inner), magic=magic)
        body = wrapper[16:key_at] + struct.pack(">i", -1) + struct.pack(">i", len(value)) + value
        rebuilt = wrapper[:8] + struct.pack(">iI", len(body) + 4, zlib.crc32(body)) + body
        data[e.position:e.position + e.size] = rebuilt
    damage(part, entry, corrupt_inner)
    line = cat_error(part)
    assert_located(line, part / entry.file, entry.position, entry.last_offset)
    assert "inner message 0" in line and "crc" in line


# --- lengths that disagree with the bytes ----------------------------------------------------

def test_v2_record_length_disagrees_with_its_fields(tmp_path):
    part = copy_partition("v2-none-0", tmp_path)
    entry = pick("v2-none-0", index=1)

    def lengthen_first_record(data, e):
        assert data[e.position + 61] < 0x7E  # a one-byte zigzag varint: +2 is one more byte
        data[e.position + 61] += 2
        fix_v2_crc(data, e.position)
    damage(part, entry, lengthen_first_record)
    line = cat_error(part)
    assert_located(line, part / entry.file, entry.position + 61, entry.offset)
    assert "record 0 declares" in line


def test_v2_compressed_record_length_disagrees(tmp_path):
    # inside a compressed stream positions mean nothing in the file: the batch's position is named
    part = copy_partition("v2-gzip-0", tmp_path)
    entry = pick("v2-gzip-0", index=1)

    def lengthen_in_stream(data, e):
        records = bytearray(gzip.decompress(bytes(data[e.position + 61:e.position + e.size])))
        records[0] += 2
        payload = gzip.compress(bytes(records))
        data[e.position + 61:e.position + e.size] = payload
        struct.pack_into(">i", data, e.position + 8, 49 + len(payload))  # batchLength
        fix_v2_crc(data, e.position)
    damage(part, entry, lengthen_in_stream)
    line = cat_error(part)
    assert_located(line, part / entry.file, entry.position, entry.offset)
    assert "record 0 declares" in line and "decompressed" in line


def test_legacy_message_fields_disagree_with_its_size(tmp_path):
    part = copy_partition("v1-none-0", tmp_path)
    entry = pick("v1-none-0", index=4)

    def longer_key(data, e):
        key_length = struct.unpack_from(">i", data, e.position + 26)[0]
        struct.pack_into(">i", data, e.position + 26, max(key_length, 0) + 3)
        fix_legacy_crc(data, e.position)
    damage(part, entry, longer_key)
    line = cat_error(part)
    assert_located(line, part / entry.file, entry.position, entry.offset)


# --- what follows the last entry ---------------------------------------------------------------

@pytest.mark.parametrize("garbage", [b"garb", b"\x01" * 17, b"garbage! not a batch, not zeros" * 3])
@pytest.mark.parametrize("name", ["v2-none-0", "v1-none-0", "compact-v1-gzip-0"])
def test_trailing_garbage(tmp_path, name, garbage):
    """Garbage after the last entry of a segment: an error (exit 65) in a segment that is not the
    partition's last; in the last one, the tail log recovery truncates."""
    part = copy_partition(name, tmp_path)
    last = kafka_listing(name)[-1]
    log = part / last.file
    end = log.stat().st_size
    log.write_bytes(log.read_bytes() + garbage)
    if log != max(part.glob("*.log")):
        line = cat_error(part)
        # garbage has no offset of its own: the error names the offset the last entry leads to
        assert_located(line, log, end, last.last_offset + 1)
        return
    # After the last complete entry of the partition's last segment, garbage is a tail Kafka's log
    # recovery truncates (LogSegment.recover stops at the first entry it cannot read): every
    # record, one warning naming the file, the position and the byte count, exit 0.
    result = run_kfmt("cat", part, "--format", "json")
    assert result.code == 0, result.err
    assert result.out == run_kfmt("cat", REALKAFKA / name, "--format", "json").out
    lines = result.err.splitlines()
    assert len(lines) == 1 and f"{log}: position {end}: {len(garbage)} byte(s) " in lines[0], result.err


@pytest.mark.parametrize("name", ["v2-none-0", "v1-lz4-0", "v0-none-0", "compact-v2-none-0"])
def test_zero_filled_tails_are_the_end_of_data(tmp_path, name):
    expected = run_kfmt("cat", REALKAFKA / name, "--format", "json")
    assert expected.code == 0
    part = copy_partition(name, tmp_path)
    for i, log in enumerate(sorted(part.glob("*.log"))):
        # preallocated segments (log.preallocate=true) and copies from a running broker
        log.write_bytes(log.read_bytes() + bytes([1, 5, 17, 4096, 70000][i % 5]))
    result = run_kfmt("cat", part, "--format", "json")
    assert (result.code, result.err) == (0, "")
    assert result.out == expected.out


# --- impossible lengths, unknown magic ---------------------------------------------------------

@pytest.mark.parametrize("size", [-1, -2147483648, 0, 5, 13, 2147483647, 1 << 24])
def test_impossible_entry_size(tmp_path, size):
    part = copy_partition("v2-none-0", tmp_path)
    entry = pick("v2-none-0", index=1)
    damage(part, entry, lambda data, e: struct.pack_into(">i", data, e.position + 8, size))
    line = cat_error(part)
    assert_located(line, part / entry.file, entry.position, entry.offset)


@pytest.mark.parametrize("name,size", [("v1-none-0", 20), ("v0-none-0", 10), ("v2-none-0", 40)])
def test_entry_smaller_than_its_format_allows(tmp_path, name, size):
    # >= the scanner's minimum of 14, < the format's own minimum (v1 22, v2 49)
    part = copy_partition(name, tmp_path)
    entry = pick(name, index=2)
    damage(part, entry, lambda data, e: struct.pack_into(">i", data, e.position + 8, size))
    line = cat_error(part)
    assert_located(line, part / entry.file, entry.position, entry.offset)


@pytest.mark.parametrize("magic", [3, 0x7F, 0x80, 0xFF])
@pytest.mark.parametrize("name", ["v2-snappy-0", "v1-none-0"])
def test_unknown_magic(tmp_path, name, magic):
    part = copy_partition(name, tmp_path)
    entry = pick(name, index=2)
    damage(part, entry, lambda data, e: data.__setitem__(e.position + 16, magic))
    line = cat_error(part)
    assert_located(line, part / entry.file, entry.position, entry.offset)
    assert "magic" in line


# --- corrupt compressed payloads ----------------------------------------------------------------

def replace_payload(data: bytearray, e: Entry, edit) -> None:
    """Give an entry a new compressed payload edit(old) with lengths and CRC recomputed, so that
    only the payload itself is wrong. Legacy wrappers have a null key (docs/format.md §3.4)."""
    if e.magic == 2:
        payload = edit(bytes(data[e.position + 61:e.position + e.size]))
        data[e.position + 61:e.position + e.size] = payload
        struct.pack_into(">i", data, e.position + 8, 49 + len(payload))
        fix_v2_crc(data, e.position)
        return
    value_at = 26 if e.magic == 0 else 34
    payload = edit(bytes(data[e.position + value_at:e.position + e.size]))
    data[e.position + value_at:e.position + e.size] = payload
    struct.pack_into(">i", data, e.position + value_at - 4, len(payload))
    struct.pack_into(">i", data, e.position + 8, value_at - 12 + len(payload))
    fix_legacy_crc(data, e.position)


@pytest.mark.parametrize("how", ["cut-short", "frame-header"])
@pytest.mark.parametrize("name", ["v2-gzip-0", "v2-snappy-0", "v2-lz4-0", "v2-zstd-0", "v1-gzip-0",
                                  "v1-snappy-0", "v1-lz4-0", "v0-gzip-0", "v0-snappy-0", "v0-lz4-0",
                                  "v1-logappendtime-gzip-0", "compact-v1-gzip-0"])
def test_corrupt_compressed_payload(tmp_path, name, how):
    # (Garbling bytes in the middle is not reliably detectable: LZ4 and snappy store incompressible
    # data as literals without a checksum, and the batch CRC was made to match.)
    part = copy_partition(name, tmp_path)
    entry = pick(name, index=1, min_size=300)

    def cut_short(payload):
        return payload[:len(payload) // 2]

    def frame_header(payload):
        return bytes(b ^ 0x5A for b in payload[:4]) + payload[4:]
    damage(part, entry, lambda data, e: replace_payload(data, e, cut_short if how == "cut-short" else frame_header))
    line = cat_error(part)
    assert_located(line, part / entry.file, entry.position,
                   entry.offset if entry.magic == 2 else entry.last_offset)
    assert f"{entry.codec} payload" in line


# --- kfmt-encoded shapes the corpus does not have ------------------------------------------------

def encoded_partition(tmp_path: Path, entries: list[bytes]) -> Path:
    part = tmp_path / "made-0"
    part.mkdir()
    (part / "00000000000000000000.log").write_bytes(b"".join(entries))
    return part


def v2(base: int, keys, values, **fields) -> bytes:
    n = len(keys)
    header = BatchHeader(magic=2, base_offset=base, last_offset=base + max(n - 1, 0),
                         base_timestamp=1700000000000, max_timestamp=1700000000000, **fields)
    return registry.get().format_for(2).encode(header, make_records(
        list(range(base, base + n)), [1700000000000] * n, keys, values))


@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_malformed_control_record(tmp_path, isolation):
    data = v2(0, [b"k"], [b"v"], producer_id=5, producer_epoch=0, base_sequence=0, is_transactional=True)
    marker = v2(1, [b"\x00\x00"], [end_txn_marker_value(0)], producer_id=5, producer_epoch=0,
                is_transactional=True, is_control=True)  # a 2-byte key: shorter than 4 (docs/format.md §4.6)
    part = encoded_partition(tmp_path, [data, marker])
    line = cat_error(part, "--include-control", "--isolation", isolation)
    assert_located(line, part / "00000000000000000000.log", len(data), 1)
    assert "control record key" in line


def test_record_count_larger_than_the_batch_can_hold(tmp_path):
    entry = bytearray(v2(0, [b"k"] * 3, [b"v"] * 3))
    struct.pack_into(">i", entry, 57, 2**31 - 1)  # recordsCount, CRC fixed: must not allocate 2G slots
    fix_v2_crc(entry, 0)
    part = encoded_partition(tmp_path, [bytes(entry)])
    line = cat_error(part)
    assert_located(line, part / "00000000000000000000.log", 61, 0)
    assert "2147483647 records" in line


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_unknown_compression_id(tmp_path, codec_id):
    first = v2(0, [b"k"], [b"v"])
    entry = bytearray(v2(1, [b"k"], [b"v"]))
    struct.pack_into(">h", entry, 21, codec_id)
    fix_v2_crc(entry, 0)
    part = encoded_partition(tmp_path, [first, bytes(entry)])
    line = cat_error(part)
    assert_located(line, part / "00000000000000000000.log", len(first), 1)
    assert f"compression type id {codec_id}" in line


def test_zstd_in_a_legacy_wrapper(tmp_path):
    inner = legacy_message(0, 1, 0, None, b"v", 1700000000000)
    wrapper = legacy_message(0, 1, 4, None, zstandard.ZstdCompressor().compress(inner), 1700000000000)
    part = encoded_partition(tmp_path, [wrapper])
    line = cat_error(part)
    assert_located(line, part / "00000000000000000000.log", 0, 0)
    assert "zstd" in line


def test_timestamps_and_offsets_past_int64_wrap_as_in_java(tmp_path):
    # a corrupt (but CRC-valid) base + delta leaves the int64 range: Java's long arithmetic wraps
    top = 2**63 - 1
    entry = bytearray(registry.get().format_for(2).encode(
        BatchHeader(magic=2, base_offset=top - 3, last_offset=top - 3, base_timestamp=top - 10,
                    max_timestamp=top - 5),
        make_records([top - 3], [top - 5], [b"k"], [b"v"])))
    struct.pack_into(">q", entry, 27, top)  # baseTimestamp: top + 5 overflows
    fix_v2_crc(entry, 0)
    part = encoded_partition(tmp_path, [bytes(entry)])
    result = run_kfmt("cat", part, "--format", "json")
    assert result.code == 0, result.err
    assert '"timestamp":-9223372036854775804' in result.out


# --- the same, as a real process ------------------------------------------------------------------

def test_a_real_process_prints_one_line_and_exits_65(tmp_path):
    part = copy_partition("v2-lz4-0", tmp_path)
    entry = pick("v2-lz4-0", index=2)
    damage(part, entry, lambda data, e: data.__setitem__(e.position + 70, data[e.position + 70] ^ 1))
    proc = subprocess.run([sys.executable, "-m", "kfmt", "cat", str(part)], capture_output=True, text=True)
    assert proc.returncode == 65
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert_located(proc.stderr, part / entry.file, entry.position, entry.offset)


def test_damaged_copies_are_really_different(tmp_path):
    # guards the helpers above: a copy is writable and damage() changes it
    part = copy_partition("v0-none-0", tmp_path)
    entry = pick("v0-none-0")
    before = (part / entry.file).read_bytes()
    damage(part, entry, lambda data, e: data.__setitem__(e.position + 20, data[e.position + 20] ^ 1))
    assert (part / entry.file).read_bytes() != before


@pytest.mark.parametrize("codec_id,payload", [(1, b""), (3, b""), (0, b"\x02\x00"), (4, b"not zstd")])
def test_an_empty_batch_is_read_as_kafka_reads_it(tmp_path, codec_id, payload):
    # DefaultRecordBatch.iterator() returns no records for recordsCount 0 without decompressing or
    # checking what follows the header: such a batch is not bad data (its CRC still has to match).
    first = v2(0, [b"k"], [b"v"])
    empty = bytearray(registry.get().format_for(2).encode(
        BatchHeader(magic=2, base_offset=1, last_offset=4, base_timestamp=-1, max_timestamp=1700000000000),
        make_records([], [], [], [])))
    struct.pack_into(">h", empty, 21, codec_id)
    empty += payload
    struct.pack_into(">i", empty, 8, len(empty) - 12)
    fix_v2_crc(empty, 0)
    last = v2(5, [b"k5"], [b"v5"])
    part = encoded_partition(tmp_path, [first, bytes(empty), last])
    result = run_kfmt("cat", part, "--format", "json")
    assert (result.code, result.err) == (0, "")
    assert [json.loads(line)["offset"] for line in result.lines] == [0, 5]
