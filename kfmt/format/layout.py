"""Kafka's on-disk layouts, declared once (docs/format.md; Kafka's DefaultRecordBatch, LegacyRecord,
ControlRecordType, OffsetIndex, TimeIndex, TransactionIndex and ProducerStateManager's snapshot schema).

Each structure is a table of fields in file order: Kafka's name (the one docs/format.md uses), the type,
a few words. Everything that depends on where a field lies comes from these tables and from nowhere else:

* the Python structs (`V2_BATCH.struct`, `V2_BATCH.struct_of("attributes", "recordsCount")`), the
  offset of a field (`V2_BATCH.at("crc")`), sizes (`V2_BATCH.size`, `V2_RECORD.min_size`) and the
  numpy dtype of a file of entries (`OFFSET_INDEX_ENTRY.dtype()`);
* the attribute bits and the magic values, named below;
* kfmt/csrc/layout.h, the C header the kernels include: kfmt.format.layout_c writes it from these
  tables (`python -m kfmt.format.layout_c`), and tests/format/test_layout.py fails when they differ,
  as it does when a table of docs/format.md says otherwise.

Message formats stay plugins (plugins/formats/): they build on these tables rather than restate them.
Types: int8, int16, int32, int64 and uint32 are big-endian fixed sizes (docs/format.md §0); varint and
varlong are zigzag varints; bytes32 is an int32 length then that many bytes (negative: null); varbytes
a varint length then the bytes; headers a varint count then record headers; records whatever follows.
A field after one of variable size has no fixed offset.
"""
from __future__ import annotations

import functools
import re
import struct
from dataclasses import dataclass

# The fixed-size types: struct code, size, numpy type, C type
FIXED = {"int8": ("b", 1, "i1", "int8_t"), "int16": ("h", 2, "i2", "int16_t"), "int32": ("i", 4, "i4", "int32_t"),
         "int64": ("q", 8, "i8", "int64_t"), "uint32": ("I", 4, "u4", "uint32_t"),
         # in Kafka's protocol messages (internal topics' records), not in the files' own structures
         "uint16": ("H", 2, "u2", "uint16_t"), "float64": ("d", 8, "f8", "double")}
# The variable-size types and the fewest bytes each takes
VARIABLE = {"varint": 1, "varlong": 1, "bytes32": 4, "varbytes": 1, "headers": 1, "records": 0}


@dataclass(frozen=True)
class Field:
    name: str  # Kafka's, as docs/format.md writes it (camelCase)
    type: str
    offset: int | None  # from the start of the structure; None after a field of variable size
    doc: str = ""

    @property
    def snake(self) -> str:
        """The name in Python and numpy (`baseOffset` -> `base_offset`)."""
        return re.sub(r"(?<!^)(?=[A-Z])", "_", self.name).lower()

    @property
    def size(self) -> int | None:
        return FIXED[self.type][1] if self.type in FIXED else None


@dataclass(frozen=True)
class Layout:
    name: str  # the prefix of its names in C (V2_BATCH_CRC_AT)
    section: str  # of docs/format.md
    title: str
    fields: tuple[Field, ...]

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(f"{self.title} has no field {name!r}")

    def at(self, name: str) -> int:
        """Where a field starts, from the start of the structure."""
        offset = self.field(name).offset
        if offset is None:
            raise ValueError(f"{name} of {self.title} has no fixed position")
        return offset

    @property
    def fixed(self) -> tuple[Field, ...]:
        """The fields up to the first of variable size."""
        out = []
        for f in self.fields:
            if f.type not in FIXED:
                break
            out.append(f)
        return tuple(out)

    @property
    def size(self) -> int:
        """Bytes of the fixed part (all of a fixed-size structure)."""
        return sum(f.size for f in self.fixed)

    @property
    def min_size(self) -> int:
        """The fewest bytes the whole structure takes (each variable field at its smallest)."""
        return sum(f.size if f.size is not None else VARIABLE[f.type] for f in self.fields)

    @functools.cached_property
    def struct(self) -> struct.Struct:
        """The fixed part, big-endian."""
        return self.struct_of(self.fixed[0].name, self.fixed[-1].name)

    @functools.lru_cache(maxsize=None)  # noqa: B019 (layouts are few and live as long as the module)
    def struct_of(self, first: str, last: str) -> struct.Struct:
        """Fields `first` to `last` (both included, all fixed), big-endian."""
        names = [f.name for f in self.fields]
        chosen = self.fields[names.index(first):names.index(last) + 1]
        if not chosen or any(f.type not in FIXED for f in chosen):
            raise ValueError(f"{first}..{last} of {self.title} are not all of fixed size")
        return struct.Struct(">" + "".join(FIXED[f.type][0] for f in chosen))

    @functools.lru_cache(maxsize=None)  # noqa: B019
    def dtype(self):
        """A numpy dtype of the structure (fixed size): one row per entry of a file of them."""
        import numpy as np  # only where a file of entries is read as columns

        return np.dtype([(f.snake, ">" + FIXED[f.type][2]) for f in self.fixed])


def declare(name: str, section: str, title: str, *fields: tuple[str, str, str]) -> Layout:
    offset: int | None = 0
    declared = []
    for field_name, kind, doc in fields:
        if kind not in FIXED and kind not in VARIABLE:
            raise ValueError(f"{title}: unknown type {kind!r}")
        declared.append(Field(field_name, kind, offset, doc))
        offset = offset + FIXED[kind][1] if offset is not None and kind in FIXED else None
    return Layout(name, section, title, tuple(declared))


@dataclass(frozen=True)
class Bits:
    """The bits of an attributes field: name -> mask."""

    name: str  # the prefix of its names in C (V2_ATTR_CONTROL)
    section: str
    masks: tuple[tuple[str, int, str], ...]  # (name, mask, what a set bit means)

    def mask(self, name: str) -> int:
        return next(m for n, m, _ in self.masks if n == name)


# --- magic values (docs/format.md §2): the byte at offset 16 of every entry ---
MAGIC_V0 = 0  # Kafka 0.8-0.9 messages (§3)
MAGIC_V1 = 1  # Kafka 0.10 messages, with a timestamp (§3, KIP-31/32)
MAGIC_V2 = 2  # record batches, Kafka 0.11 on (§4); a magic below it is a legacy message
LEGACY_MAGICS = (MAGIC_V0, MAGIC_V1)
MAGICS = (MAGIC_V0, MAGIC_V1, MAGIC_V2)

# --- the start of every entry of a .log, whatever its format (§2, FileLogInputStream) ---
LOG_ENTRY = declare(
    "LOG_ENTRY", "2", "the start of every entry",
    ("offset", "int64", "v2: the base offset; v0/v1: the message's offset (a wrapper's last inner one)"),
    ("size", "int32", "the bytes after this field"),
    ("crcOrLeaderEpoch", "int32", "v0/v1: the message CRC; v2: the partition leader epoch"),
    ("magic", "int8", "the message format"),
)

# --- legacy messages v0 and v1 (§3.1, LegacyRecord); a compressed wrapper is such a message whose
# attributes name a codec and whose value holds the compressed inner messages (§3.4) ---
V0_MESSAGE = declare(
    "V0_MESSAGE", "3.1", "a v0 message",
    ("offset", "int64", "absolute; a compressed wrapper's is its last inner offset"),
    ("messageSize", "int32", "bytes from crc to the end of the value"),
    ("crc", "uint32", "CRC-32 of magic .. end of value"),
    ("magic", "int8", "0"),
    ("attributes", "int8", "§3.2"),
    ("key", "bytes32", "keyLength int32 (negative: null), then the key"),
    ("value", "bytes32", "valueLength int32 (negative: null), then the value"),
)
V1_MESSAGE = declare(
    "V1_MESSAGE", "3.1", "a v1 message",
    ("offset", "int64", "absolute; a compressed wrapper's is its last inner offset"),
    ("messageSize", "int32", "bytes from crc to the end of the value"),
    ("crc", "uint32", "CRC-32 of magic .. end of value"),
    ("magic", "int8", "1"),
    ("attributes", "int8", "§3.2"),
    ("timestamp", "int64", "CreateTime or LogAppendTime (attributes bit 3)"),
    ("key", "bytes32", "keyLength int32 (negative: null), then the key"),
    ("value", "bytes32", "valueLength int32 (negative: null), then the value"),
)
LEGACY_MESSAGES = {MAGIC_V0: V0_MESSAGE, MAGIC_V1: V1_MESSAGE}
LEGACY_ATTRIBUTES = Bits("LEGACY_ATTR", "3.2", (
    ("compression", 0x07, "the codec id"),
    ("timestampType", 0x08, "LogAppendTime (v1 only)"),
))

# --- message format v2: the record batch header (§4.1, DefaultRecordBatch) ---
V2_BATCH = declare(
    "V2_BATCH", "4.1", "the v2 record batch header",
    ("baseOffset", "int64", "the first offset the batch was given"),
    ("batchLength", "int32", "bytes after this field"),
    ("partitionLeaderEpoch", "int32", "not covered by the CRC"),
    ("magic", "int8", "2"),
    ("crc", "uint32", "CRC-32C of attributes .. end of batch"),
    ("attributes", "int16", "§4.2"),
    ("lastOffsetDelta", "int32", "last offset - baseOffset"),
    ("baseTimestamp", "int64", "or the delete horizon (attributes bit 6)"),
    ("maxTimestamp", "int64", "the largest record timestamp, or the LogAppendTime"),
    ("producerId", "int64", "-1 for none"),
    ("producerEpoch", "int16", "-1 for none"),
    ("baseSequence", "int32", "-1 for none"),
    ("recordsCount", "int32", "0 only in an empty batch compaction left"),
    ("records", "records", "the records (§4.4), or one compressed stream of them (§5)"),
)
V2_ATTRIBUTES = Bits("V2_ATTR", "4.2", (
    ("compression", 0x07, "the codec id"),
    ("timestampType", 0x08, "LogAppendTime"),
    ("transactional", 0x10, "transactional"),
    ("control", 0x20, "a control batch (§4.6)"),
    ("deleteHorizon", 0x40, "baseTimestamp holds a delete horizon (§4.7)"),
))
# --- a record of a v2 batch (§4.4, DefaultRecord), and a header of a record ---
V2_RECORD = declare(
    "V2_RECORD", "4.4", "a v2 record",
    ("length", "varint", "bytes of the record after this field"),
    ("attributes", "int8", "unused, 0"),
    ("timestampDelta", "varlong", "from baseTimestamp"),
    ("offsetDelta", "varint", "from baseOffset"),
    ("key", "varbytes", "keyLength varint (negative: null), then the key"),
    ("value", "varbytes", "valueLength varint (negative: null), then the value"),
    ("headers", "headers", "headerCount varint, then the headers"),
)
V2_RECORD_HEADER = declare(
    "V2_RECORD_HEADER", "4.4", "a header of a v2 record",
    ("headerKey", "varbytes", "headerKeyLength varint (>= 0), then the key (UTF-8)"),
    ("headerValue", "varbytes", "headerValueLength varint (-1: null), then the value"),
)

# --- control records (§4.6, ControlRecordType, EndTransactionMarker) ---
CONTROL_KEY = declare(
    "CONTROL_KEY", "4.6", "the key of a control record",
    ("version", "int16", "0"),
    ("type", "int16", "0 ABORT, 1 COMMIT, 2 LEADER_CHANGE, 3-6 KRaft"),
)
END_TXN_MARKER = declare(
    "END_TXN_MARKER", "4.6", "the value of an ABORT or COMMIT control record",
    ("version", "int16", "0"),
    ("coordinatorEpoch", "int32", "the transaction coordinator's epoch"),
)

# --- index files (§6.1, §6.2, §7) and producer snapshots (§8) ---
OFFSET_INDEX_ENTRY = declare(
    "OFFSET_INDEX_ENTRY", "6.1", "an .index entry",
    ("relativeOffset", "int32", "offset - the segment's base offset"),
    ("position", "int32", "where an entry starts in the .log"),
)
TIME_INDEX_ENTRY = declare(
    "TIME_INDEX_ENTRY", "6.2", "a .timeindex entry",
    ("timestamp", "int64", "the largest timestamp so far"),
    ("relativeOffset", "int32", "offset - the segment's base offset"),
)
TXN_INDEX_ENTRY = declare(
    "TXN_INDEX_ENTRY", "7", "a .txnindex entry",
    ("version", "int16", "0"),
    ("producerId", "int64", ""),
    ("firstOffset", "int64", "the first data offset of the aborted transaction"),
    ("lastOffset", "int64", "the offset of the ABORT marker"),
    ("lastStableOffset", "int64", "the last stable offset once the abort was written"),
)
SNAPSHOT_HEADER = declare(
    "SNAPSHOT_HEADER", "8", "the header of a .snapshot",
    ("version", "int16", "1"),
    ("crc", "uint32", "CRC-32C of the rest of the file"),
    ("producerCount", "int32", "the entries that follow"),
)
SNAPSHOT_ENTRY = declare(
    "SNAPSHOT_ENTRY", "8", "a producer entry of a .snapshot",
    ("producerId", "int64", ""),
    ("producerEpoch", "int16", ""),
    ("lastSequence", "int32", ""),
    ("lastOffset", "int64", "its last data offset, -1 for none"),
    ("offsetDelta", "int32", "last - first offset of its last batch"),
    ("timestamp", "int64", "maxTimestamp of that batch"),
    ("coordinatorEpoch", "int32", "-1 for none"),
    ("currentTxnFirstOffset", "int64", "first offset of its open transaction, -1 for none"),
)

LAYOUTS = (LOG_ENTRY, V0_MESSAGE, V1_MESSAGE, V2_BATCH, V2_RECORD, V2_RECORD_HEADER, CONTROL_KEY,
           END_TXN_MARKER, OFFSET_INDEX_ENTRY, TIME_INDEX_ENTRY, TXN_INDEX_ENTRY, SNAPSHOT_HEADER,
           SNAPSHOT_ENTRY)
BITS = (LEGACY_ATTRIBUTES, V2_ATTRIBUTES)

# --- the sizes the code works with, by Kafka's names where it has them ---
LOG_OVERHEAD = LOG_ENTRY.at("crcOrLeaderEpoch")  # 12: offset and size (Records.LOG_OVERHEAD)
HEADER_SIZE_UP_TO_MAGIC = LOG_ENTRY.size  # 17 (Records.HEADER_SIZE_UP_TO_MAGIC)
MAGIC_AT = LOG_ENTRY.at("magic")  # 16, in every entry (Records.MAGIC_OFFSET)
# the smallest messageSize of each legacy magic (LegacyRecord.RECORD_OVERHEAD_V0/V1: 14, 22)
RECORD_OVERHEAD = {magic: m.min_size - LOG_OVERHEAD for magic, m in LEGACY_MESSAGES.items()}
RECORD_OVERHEAD_V0, RECORD_OVERHEAD_V1 = RECORD_OVERHEAD[MAGIC_V0], RECORD_OVERHEAD[MAGIC_V1]
MIN_ENTRY_SIZE = RECORD_OVERHEAD_V0  # a size below it is corruption (FileLogInputStream)
LEGACY_ATTRIBUTES_AT = V0_MESSAGE.at("attributes")  # 17, in v0 and v1 messages alike
assert LEGACY_ATTRIBUTES_AT == V1_MESSAGE.at("attributes")
V2_BATCH_OVERHEAD = V2_BATCH.size  # 61 (DefaultRecordBatch.RECORD_BATCH_OVERHEAD)
V2_CRC_FROM = V2_BATCH.at("attributes")  # the CRC-32C covers the batch from here to its end
V2_MIN_RECORD_SIZE = V2_RECORD.min_size  # 7: every varint of one byte, no key, value or header
# the attribute bits, by the names the code reads best
CODEC_MASK = V2_ATTRIBUTES.mask("compression")
ATTR_LOG_APPEND_TIME = V2_ATTRIBUTES.mask("timestampType")
ATTR_TRANSACTIONAL = V2_ATTRIBUTES.mask("transactional")
ATTR_CONTROL = V2_ATTRIBUTES.mask("control")
ATTR_DELETE_HORIZON = V2_ATTRIBUTES.mask("deleteHorizon")
assert (CODEC_MASK, ATTR_LOG_APPEND_TIME) == (LEGACY_ATTRIBUTES.mask("compression"),
                                              LEGACY_ATTRIBUTES.mask("timestampType"))
