"""The declaration of Kafka's layouts (kfmt.format.layout) is the one place the bytes are described:
docs/format.md's tables must say what it says (every table there that lays bytes out is one of its
declarations, field by field and offset by offset, the offsets adding up to the declared size), and
kafka-python, a peer implementation, must agree with it on every struct, offset, size and attribute
bit it has its own constant for. (That the C
header is what it generates, and that nothing else spells a layout: tests/test_architecture.py.)"""
from __future__ import annotations

import re

import pytest
from kafka.record.default_records import ControlRecord, DefaultRecordBase
from kafka.record.legacy_records import LegacyRecordBase
from support.corpus import REPO

from kfmt.format import layout

DOC = (REPO / "docs" / "format.md").read_text()


# --- docs/format.md ---

def section(number: str) -> str:
    marks = list(re.finditer(r"^#{2,3} (\d+(?:\.\d+)?)\.? ", DOC, re.M))
    for i, m in enumerate(marks):
        if m[1] == number:
            return DOC[m.end():marks[i + 1].start() if i + 1 < len(marks) else len(DOC)]
    raise AssertionError(f"docs/format.md has no §{number}")


def tables(text: str) -> list[list[dict]]:
    """Every markdown table of `text`: its rows as {header: cell}."""
    found = []
    for block in re.findall(r"((?:^\|.*\|\n)+)", text, re.M):
        lines = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in block.splitlines()]
        found.append([dict(zip(lines[0], row)) for row in lines[2:]])
    return found


def named(cell: str) -> str:
    return re.match(r"`?([A-Za-z][A-Za-z0-9]*)", cell)[1]


def as_number(cell: str) -> int | None:
    return int(cell) if cell.isdigit() else None


def wire_rows(item: layout.Layout) -> list[tuple]:
    """(name, type, offset) as docs/format.md lists a structure: a length-prefixed field as its length
    then its bytes, the headers of a v2 record as their count then the headers."""
    out = []
    for f in item.fields:
        after = None if f.offset is None else f.offset + 4
        if f.type == "bytes32":
            out += [(f.name + "Length", "int32", f.offset), (f.name, "bytes", after)]
        elif f.type == "varbytes":
            out += [(f.name + "Length", "varint", f.offset), (f.name, "bytes", None)]
        elif f.type == "headers":
            out += [("headerCount", "varint", f.offset), (f.name, "headers", None)]
        else:
            out.append((f.name, f.type, f.offset))
    return out


def offset_tables(number: str) -> list[list[tuple]]:
    return [[(named(r["field"]), r["size"] if r["size"] in layout.FIXED else "", as_number(r["offset"])) for r in rows]
            for rows in tables(section(number)) if {"offset", "size", "field"} <= set(rows[0])]


def documented(item: layout.Layout) -> list[tuple]:
    return [(name, kind if kind in layout.FIXED else "", offset)
            for name, kind, offset in wire_rows(item)]


# Two sections show several declarations in one table: v0 and v1 messages side by side (a column
# each), a v2 record with its headers (the last row); each other declaration has a table of its own.
COMBINED = {"3.1": (layout.V0_MESSAGE, layout.V1_MESSAGE), "4.4": (layout.V2_RECORD, layout.V2_RECORD_HEADER)}


def by_section() -> dict[str, list[layout.Layout]]:
    out: dict = {}
    for item in layout.LAYOUTS:
        out.setdefault(item.section, []).append(item)
    return out


OWN_TABLES = {number: items for number, items in by_section().items() if number not in COMBINED}


@pytest.mark.parametrize("number, items", sorted(OWN_TABLES.items()), ids=sorted(OWN_TABLES))
def test_a_sections_tables_are_its_declarations_in_order(number, items):
    assert offset_tables(number) == [documented(item) for item in items]


def test_the_combined_tables_are_what_their_sections_declare():
    assert {number: tuple(items) for number, items in by_section().items() if number in COMBINED} == COMBINED


def layout_tables() -> dict[str, int]:
    """section -> how many tables of docs/format.md there lay bytes out: a field column with offsets,
    per-format offsets (`v0 at`) or encodings (a v2 record), or attribute masks."""
    marks = list(re.finditer(r"^#{2,3} (\d+(?:\.\d+)?)\.? ", DOC, re.M))
    out: dict = {}
    for m in marks:
        for rows in tables(section(m[1])):
            headers = set(rows[0]) if rows else set()
            if "mask" in headers or ("field" in headers and headers & {"offset", "v0 at", "encoding"}):
                out[m[1]] = out.get(m[1], 0) + 1
    return out


def test_every_layout_table_of_docs_format_md_is_a_declaration():
    """No table describes bytes that kfmt.format.layout does not declare, and none is missing."""
    expected = {number: (1 if number in COMBINED else len(items)) for number, items in by_section().items()}
    expected.update({bits.section: 1 for bits in layout.BITS})
    assert layout_tables() == expected


@pytest.mark.parametrize("item", [i for i in layout.LAYOUTS if i.size and i.section not in COMBINED],
                         ids=lambda i: i.name)
def test_the_documented_offsets_follow_from_the_sizes_and_end_at_the_declared_size(item):
    (table,) = [t for t, declared in zip(offset_tables(item.section), OWN_TABLES[item.section])
                if declared is item]
    at = 0
    for name, size, offset in table:
        assert offset == at, f"§{item.section} {name}: at {offset}, after {at} bytes"
        if not size:  # the variable part after the fixed ones (a batch's records)
            break
        at += layout.FIXED[size][1]
    assert at == item.size


def test_the_legacy_message_table_is_the_v0_and_v1_declarations():
    (rows,) = tables(section("3.1"))
    for column, item in (("v0 at", layout.V0_MESSAGE), ("v1 at", layout.V1_MESSAGE)):
        doc = [(named(r["field"]), r["size"] if r["size"] in layout.FIXED else "bytes", as_number(r[column]))
               for r in rows if r[column] != "-"]
        assert doc == wire_rows(item), column


def test_the_v2_record_table_is_the_declaration():
    (rows,) = tables(section("4.4"))
    doc = [(named(r["field"]), "headers" if r["field"] == "headers" else r["encoding"]) for r in rows]
    assert doc == [(n, t) for n, t, _ in wire_rows(layout.V2_RECORD)]
    header = re.findall(r"`(\w+)` (varint|bytes)", rows[-1]["encoding"])
    assert header == [(n, t) for n, t, _ in wire_rows(layout.V2_RECORD_HEADER)]


@pytest.mark.parametrize("bits", layout.BITS, ids=lambda b: b.name)
def test_the_attribute_tables_are_the_declared_bits(bits):
    (rows,) = [t for t in tables(section(bits.section)) if "mask" in t[0]]
    assert [int(r["mask"], 16) for r in rows if r["mask"]] == [mask for _, mask, _ in bits.masks]
    for row in rows:  # the bits column says the same as the mask
        low, _, high = row["bits"].partition("–")
        spanned = sum(1 << b for b in range(int(low), int(high or low) + 1))
        assert not row["mask"] or int(row["mask"], 16) == spanned, row


def test_the_named_sizes_are_the_ones_docs_format_md_gives():
    assert f"`LOG_OVERHEAD` = {layout.LOG_OVERHEAD} (offset and size), `HEADER_SIZE_UP_TO_MAGIC` = " \
           f"{layout.HEADER_SIZE_UP_TO_MAGIC}" in section("2")
    assert f"{layout.V2_BATCH_OVERHEAD} bytes (`RECORD_BATCH_OVERHEAD`)" in section("4.1")
    assert f"The smallest `messageSize` is {layout.RECORD_OVERHEAD_V0} for v0 and {layout.RECORD_OVERHEAD_V1} " \
           f"for v1" in section("3.1")
    assert f"fixed\n{layout.TXN_INDEX_ENTRY.size}-byte entries" in section("7")


# --- kafka-python, a peer ---

def test_kafka_python_agrees_on_the_v2_batch():
    assert layout.V2_BATCH.struct.format == DefaultRecordBase.HEADER_STRUCT.format
    assert layout.V2_CRC_FROM == DefaultRecordBase.ATTRIBUTES_OFFSET
    assert layout.V2_BATCH.at("crc") == DefaultRecordBase.CRC_OFFSET
    assert layout.V2_BATCH.at("partitionLeaderEpoch") == DefaultRecordBase.AFTER_LEN_OFFSET == layout.LOG_OVERHEAD
    assert (layout.CODEC_MASK, layout.ATTR_LOG_APPEND_TIME, layout.ATTR_TRANSACTIONAL, layout.ATTR_CONTROL) == (
        DefaultRecordBase.CODEC_MASK, DefaultRecordBase.TIMESTAMP_TYPE_MASK, DefaultRecordBase.TRANSACTIONAL_MASK,
        DefaultRecordBase.CONTROL_MASK)
    assert layout.CONTROL_KEY.struct.format == ControlRecord.KEY_STRUCT.format


def test_kafka_python_agrees_on_legacy_messages():
    assert layout.V0_MESSAGE.struct.format == LegacyRecordBase.HEADER_STRUCT_V0.format
    assert layout.V1_MESSAGE.struct.format == LegacyRecordBase.HEADER_STRUCT_V1.format
    assert (layout.V0_MESSAGE.at("key"), layout.V1_MESSAGE.at("key")) == (LegacyRecordBase.KEY_OFFSET_V0,
                                                                         LegacyRecordBase.KEY_OFFSET_V1)
    assert (layout.RECORD_OVERHEAD_V0, layout.RECORD_OVERHEAD_V1) == (LegacyRecordBase.RECORD_OVERHEAD_V0,
                                                                      LegacyRecordBase.RECORD_OVERHEAD_V1)
    assert layout.LOG_OVERHEAD == LegacyRecordBase.LOG_OVERHEAD
    assert layout.V0_MESSAGE.at("magic") == LegacyRecordBase.MAGIC_OFFSET
    assert (layout.CODEC_MASK, layout.ATTR_LOG_APPEND_TIME) == (LegacyRecordBase.CODEC_MASK,
                                                                LegacyRecordBase.TIMESTAMP_TYPE_MASK)


def test_what_the_declaration_derives():
    assert layout.V2_BATCH.struct_of("attributes", "recordsCount").format == ">hiqqqhii"
    with pytest.raises(ValueError):
        layout.V2_BATCH.struct_of("recordsCount", "records")
    with pytest.raises(ValueError):
        layout.V0_MESSAGE.at("value")
    assert layout.V2_MIN_RECORD_SIZE == 7 and layout.V0_MESSAGE.min_size == 26
    assert layout.OFFSET_INDEX_ENTRY.dtype().names == ("relative_offset", "position")
    assert layout.SNAPSHOT_ENTRY.dtype().itemsize == layout.SNAPSHOT_ENTRY.size == 46
