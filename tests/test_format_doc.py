"""The worked examples of docs/format.md are right: each hex example is rebuilt here from its
description with independent code (kafka-python's encoders, zlib, the crc32c and xxhash packages,
struct) and must appear in the page as printed. A typo in the page, or a section that lost its
example, fails."""
from __future__ import annotations

import re
import struct
import zlib

import crc32c
import pytest
import xxhash
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from support.corpus import REPO

DOC = (REPO / "docs" / "format.md").read_text()
HEX_TOKEN = re.compile(r"^[0-9a-f]{2}$")


def sections() -> dict[str, str]:
    """'4.5' -> the text of that (sub)section, up to the next heading."""
    marks = list(re.finditer(r"^#{2,3} (\d+(?:\.\d+)?)\.? ", DOC, re.M))
    return {m[1]: DOC[m.end():(marks[i + 1].start() if i + 1 < len(marks) else len(DOC))]
            for i, m in enumerate(marks)}


def printed_bytes(text: str) -> list[bytes]:
    """Every example in `text`: each fenced block (the leading hex tokens of its lines, annotations
    after them ignored) and each inline `xx xx ...` run."""
    found = []
    for block in re.findall(r"```\n(.*?)```", text, re.S):
        data = bytearray()
        for line in block.splitlines():
            for token in line.split():
                if not HEX_TOKEN.match(token):
                    break
                data.append(int(token, 16))
        if data:
            found.append(bytes(data))
    found += [bytes.fromhex(run) for run in re.findall(r"`((?:[0-9a-f]{2} )+[0-9a-f]{2})`", text)]
    return found


SECTIONS = sections()


def assert_printed(section: str, expected: bytes) -> None:
    assert expected in printed_bytes(SECTIONS[section]), \
        f"docs/format.md §{section} does not show {expected.hex(' ')}"


def test_every_section_the_code_cites_exists():
    wanted = ["0", "1", "1.1", "1.2", "2", "3", "3.1", "3.2", "3.3", "3.4", "3.5", "4", "4.1", "4.2", "4.3",
              "4.4", "4.5", "4.6", "4.7", "5", "5.1", "5.2", "5.3", "5.4", "5.5", "6", "6.1", "6.2", "6.3",
              "6.4", "6.5", "6.6", "7", "7.1", "8", "8.1", "9", "10", "11", "11.1", "11.2", "11.3", "11.4", "12", "12.1",
              "12.2", "12.3", "12.4", "12.5", "12.6", "13", "14", "15", "15.1", "15.2", "16", "16.1", "16.2",
              "16.3", "16.4", "17", "17.1", "18", "19"]
    assert [s for s in wanted if s not in SECTIONS] == []
    items = re.findall(r"^(\d+)\. \*\*", SECTIONS["18"], re.M)
    assert items == [str(i) for i in range(1, 23)]  # code cites §18.N


@pytest.mark.parametrize("magic, timestamp", [(0, None), (1, 9999999)])
def test_legacy_messages(magic, timestamp):
    builder = LegacyRecordBatchBuilder(magic, 0, 1 << 20)
    builder.append(0, timestamp, b"test", b"Super")
    message = bytes(builder.build())
    assert zlib.crc32(message[16:]) == struct.unpack(">I", message[12:16])[0]
    assert_printed("3.3", message)


def test_v2_batch():
    builder = DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, 1 << 20)
    builder.append(0, 1700000000000, b"test", b"Super", [])
    assert_printed("4.5", bytes(builder.build()))


def v2_header(base, last_delta, epoch, attributes, base_ts, max_ts, pid, pepoch, base_seq, count,
              records: bytes) -> bytes:
    """A v2 batch from the field table of §4.1, its CRC-32C over [21, end) computed here."""
    body = struct.pack(">hiqqqhii", attributes, last_delta, base_ts, max_ts, pid, pepoch, base_seq, count) + records
    crc = crc32c.crc32c(body)
    return struct.pack(">qiibI", base, len(body) + 9, epoch, 2, crc) + body


def test_commit_marker():
    # record: length 16, attributes 0, deltas 0, key (version 0, COMMIT), value (version 0, epoch 5), 0 headers
    record = bytes([0x20, 0, 0, 0, 0x08]) + struct.pack(">hh", 0, 1) + bytes([0x0c]) + struct.pack(">hi", 0, 5) + b"\0"
    marker = v2_header(10, 0, 0, 0x30, 1700000000000, 1700000000000, 1000, 0, -1, 1, record)
    assert len(marker) == 78
    assert_printed("4.6", marker)


def test_empty_batch_left_by_compaction():
    empty = v2_header(20, 4, 0, 0, -1, 1700000000000, 1000, 0, 5, 0, b"")
    assert len(empty) == 61
    assert_printed("4.7", empty)


def test_snappy_and_lz4_frames():
    import cramjam

    block = bytes(cramjam.snappy.compress_raw(b"Super"))
    xerial = bytes.fromhex("82534e415050590000000001 00000001".replace(" ", "")) + struct.pack(">i", len(block)) + block
    assert_printed("5.3", xerial)
    header_checksum = (xxhash.xxh32(b"\x60\x40", seed=0).intdigest() >> 8) & 0xFF
    assert header_checksum == 0x82
    frame = (struct.pack("<I", 0x184D2204) + bytes([0x60, 0x40, header_checksum])
             + struct.pack("<I", 0x80000000 | 5) + b"Super" + b"\0\0\0\0")
    assert_printed("5.4", frame)
    wrong = (xxhash.xxh32(struct.pack("<I", 0x184D2204) + b"\x60\x40", seed=0).intdigest() >> 8) & 0xFF
    assert f"`0x{wrong:02x}`" in SECTIONS["18"]  # the v0 value edge case 4 names


def test_index_entries():
    assert_printed("6.1", struct.pack(">ii", 57, 4210))
    assert_printed("6.2", struct.pack(">qi", 1700000000000, 57))


def test_txnindex_entry():
    assert_printed("7", struct.pack(">hqqqq", 0, 1000, 5, 9, 10))


def snapshot(entries: list[tuple]) -> bytes:
    body = struct.pack(">i", len(entries)) + b"".join(struct.pack(">qhiqiqiq", *e) for e in entries)
    return struct.pack(">hI", 1, crc32c.crc32c(body)) + body


def test_producer_snapshots():
    assert_printed("8", snapshot([]))
    assert_printed("8", snapshot([(1000, 0, 4, 9, 4, 1700000000000, -1, -1)]))


def test_varints_and_crc32c_check_value():
    def zigzag_varint(n: int) -> str:
        z, out = (n << 1) ^ (n >> 63), []
        while True:
            byte, z = z & 0x7F, z >> 7
            out.append(byte | (0x80 if z else 0))
            if not z:
                return bytes(out).hex(" ")

    listed = dict(re.findall(r"(−?\d+) → `([0-9a-f ]+)`", SECTIONS["4.4"]))
    assert len(listed) == 8
    for number, encoded in listed.items():
        assert zigzag_varint(int(number.replace("−", "-"))) == encoded
    assert crc32c.crc32c(b"123456789") == 0xE3069283 and "0xE3069283" in SECTIONS["17.1"]
