"""Message formats v0 (Kafka 0.8-0.9) and v1 (0.10, KIP-31/32): legacy messages (docs/format.md §3),
declared in kfmt.format.layout (V0_MESSAGE, V1_MESSAGE: offset, messageSize, crc, magic, attributes, a
v1 timestamp, then keyLength and key, valueLength and value; LEGACY_ATTRIBUTES: codec, timestamp type).
Each message is one log entry; a compressed wrapper's offset is its LAST inner offset, and its value
the compressed inner message set.

Uncompressed legacy data is not batched: every message is its own entry. A compressed wrapper holds
inner messages framed the same way; their offsets are absolute in v0 and relative in v1 (possibly
with gaps after compaction): absolute = wrapper offset - last inner offset + inner offset (docs/format.md §3.4).

Decoding and encoding ask kfmt.format.legacy_sets first, which runs the compiled kernels when they
are built (kfmt/csrc/legacy.c: the messages of an entry or of a wrapper's inner set straight into
columns, their per-message facts as numpy rows, `LegacyInfos`); whatever it is not sure of it leaves
to the Python code here, the reference, which raises every error. Runs of uncompressed messages are decoded many entries at a time by
kfmt.format.legacy_runs.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from kfmt.errors import DataError
from kfmt.format import legacy_sets
from kfmt.format.layout import (
    ATTR_LOG_APPEND_TIME,
    CODEC_MASK,
    LEGACY_MAGICS,
    LEGACY_MESSAGES,
    LOG_OVERHEAD,
    MAGIC_AT,
    MAGIC_V0,
    MAGIC_V1,
    RECORD_OVERHEAD,
    V0_MESSAGE,
    V1_MESSAGE,
)
from kfmt.format.message_formats import STRICT, MessageFormat, ReadOptions
from kfmt.format.model import NO_TIMESTAMP, Batch, BatchHeader, LegacyMessageInfo, TimestampType, make_records
from kfmt.format.wire import INT32, OFFSET_AND_SIZE, UINT32, crc32, int64
from kfmt.plugin import registry
from kfmt.plugin.hookspecs import hookimpl

if TYPE_CHECKING:
    import pyarrow as pa  # imported where used: not on the paths that hold no record columns

PREFIX = V0_MESSAGE.struct  # offset, messageSize, crc, magic, attributes: the same in v0 and v1
UP_TO_CRC = V0_MESSAGE.struct_of("offset", "crc")
MAGIC_AND_ATTRIBUTES = V0_MESSAGE.struct_of("magic", "attributes")
V1_TIMESTAMP = V1_MESSAGE.struct_of("timestamp", "timestamp")
TIMESTAMP_AT = V1_MESSAGE.at("timestamp")
KEY_LENGTH_AT = {magic: message.at("key") for magic, message in LEGACY_MESSAGES.items()}
CRC_FROM = MAGIC_AT  # the CRC-32 covers magic .. end of value


class LegacyMessage:
    """One parsed legacy message (an entry of a segment or of a wrapper's inner message set)."""

    __slots__ = ("offset", "magic", "attributes", "crc", "crc_valid", "timestamp", "key", "value")

    def __init__(self, buf, start: int, end: int):
        """Parse the entry buf[start:end] (its 12-byte log overhead included)."""
        size = end - start - LOG_OVERHEAD
        self.offset, _size, self.crc, self.magic, self.attributes = PREFIX.unpack_from(buf, start)
        if self.magic not in RECORD_OVERHEAD:
            raise DataError(f"invalid magic {self.magic} in a legacy message", position=start)
        if size < RECORD_OVERHEAD[self.magic]:
            raise DataError(f"message of {size} bytes is smaller than the minimum "
                            f"{RECORD_OVERHEAD[self.magic]} for magic {self.magic}", position=start)
        self.crc_valid = crc32(buf[start + CRC_FROM:end]) == self.crc
        self.timestamp = (V1_TIMESTAMP.unpack_from(buf, start + TIMESTAMP_AT)[0] if self.magic == MAGIC_V1
                          else NO_TIMESTAMP)
        pos = start + KEY_LENGTH_AT[self.magic]
        self.key, pos = _sized_bytes(buf, pos, end, "key", start)
        self.value, pos = _sized_bytes(buf, pos, end, "value", start)
        if pos != end:
            raise DataError(f"message declares {size} bytes but its fields use "
                            f"{pos - start - LOG_OVERHEAD}", position=start)

    @property
    def compression(self) -> int:
        return self.attributes & CODEC_MASK

    @property
    def timestamp_type(self) -> TimestampType:
        if self.magic == MAGIC_V0:
            return TimestampType.NO_TIMESTAMP_TYPE
        return (TimestampType.LOG_APPEND_TIME if self.attributes & ATTR_LOG_APPEND_TIME
                else TimestampType.CREATE_TIME)

    def info(self) -> LegacyMessageInfo:
        return LegacyMessageInfo(self.magic, self.attributes, self.crc, self.crc_valid, self.timestamp)


def _sized_bytes(buf, pos: int, end: int, what: str, start: int):
    if pos + INT32.size > end:
        raise DataError(f"message too short for its {what} length", position=start)
    n = INT32.unpack_from(buf, pos)[0]
    pos += INT32.size
    if n < 0:
        return None, pos
    if pos + n > end:
        raise DataError(f"message {what} of {n} bytes overruns the message", position=start)
    return bytes(buf[pos:pos + n]), pos + n


class LegacyFormat(MessageFormat):
    name = "legacy"
    magics = LEGACY_MAGICS
    native_frames = True  # kfmt.format.segment may frame these entries with the compiled scanner

    def read_header(self, entry: memoryview, position: int) -> BatchHeader:
        magic = entry[MAGIC_AT]
        if len(entry) < LOG_OVERHEAD + RECORD_OVERHEAD[magic]:
            raise DataError(f"message of {len(entry) - LOG_OVERHEAD} bytes is smaller than the "
                            f"minimum {RECORD_OVERHEAD[magic]} for magic {magic}", position=position)
        offset, _size, crc, magic, attrs = PREFIX.unpack_from(entry)
        codec = attrs & CODEC_MASK
        if magic == MAGIC_V0:
            ts_type, ts = TimestampType.NO_TIMESTAMP_TYPE, NO_TIMESTAMP
        else:
            ts_type = (TimestampType.LOG_APPEND_TIME if attrs & ATTR_LOG_APPEND_TIME
                       else TimestampType.CREATE_TIME)
            ts = V1_TIMESTAMP.unpack_from(entry, TIMESTAMP_AT)[0]
        return BatchHeader(
            magic=magic, base_offset=None if codec else offset, last_offset=offset,
            compression=codec, timestamp_type=ts_type, max_timestamp=ts,
            records_count=None if codec else 1, attributes=attrs,
            position=position, size=len(entry), crc=crc)

    def crc_valid(self, entry: memoryview, header: BatchHeader) -> bool:
        # the CRC covers magic .. end of value (docs/format.md §3.1), as LegacyMessage checks it when decoding
        return crc32(entry[CRC_FROM:]) == header.crc

    def decode(self, entry: memoryview, header: BatchHeader, options: ReadOptions = STRICT) -> Batch:
        batch = legacy_sets.decode_entry(entry, header, options)  # the compiled kernels, when sure
        if batch is not None:
            return batch
        message = LegacyMessage(entry, 0, len(entry))
        if not message.crc_valid and options.check_crc:
            raise DataError(f"message is corrupt (stored crc = {message.crc}, computed crc = "
                            f"{crc32(entry[CRC_FROM:])})", offset=message.offset)
        if not message.compression:
            records = make_records([message.offset], [message.timestamp], [message.key],
                                   [message.value])
            return Batch(header=header, records=records, legacy=[message.info()],
                         crc_valid=message.crc_valid)
        data = self._decompressed(message, options)
        lat = message.timestamp_type == TimestampType.LOG_APPEND_TIME
        inner = self._inner_messages(data, message, options)
        offsets = self._absolute_offsets(message, inner)
        # §3.5: v0 inner messages have no timestamp; under LogAppendTime every inner message
        # reports the wrapper's timestamp whatever its own bytes say.
        timestamps = [NO_TIMESTAMP if m.magic == MAGIC_V0 else message.timestamp if lat else m.timestamp
                      for m in inner]
        records = make_records(offsets, timestamps, [m.key for m in inner], [m.value for m in inner])
        decoded = header.replace(base_offset=offsets[0], records_count=len(inner))
        return Batch(header=decoded, records=records, legacy=[m.info() for m in inner],
                     crc_valid=message.crc_valid)

    @staticmethod
    def _decompressed(wrapper: LegacyMessage, options: ReadOptions):
        codec = registry.get().compression_for(wrapper.compression, wrapper.magic)
        if wrapper.value is None:
            raise DataError(f"compressed message set with a null value (magic {wrapper.magic})",
                            offset=wrapper.offset)
        return codec.decompress(wrapper.value, magic=wrapper.magic, max_size=options.max_decompressed)

    @staticmethod
    def _inner_messages(data, wrapper: LegacyMessage, options: ReadOptions) -> list[LegacyMessage]:
        inner = []
        pos, end = 0, len(data)
        while end - pos >= LOG_OVERHEAD:
            _offset, size = OFFSET_AND_SIZE.unpack_from(data, pos)
            if size < RECORD_OVERHEAD[MAGIC_V0]:
                raise DataError(f"inner message {len(inner)} has an impossible size {size} (at byte "
                                f"{pos} of the decompressed message set)", offset=wrapper.offset)
            if pos + LOG_OVERHEAD + size > end:
                break  # Kafka silently drops a truncated final inner message
            try:
                message = LegacyMessage(data, pos, pos + LOG_OVERHEAD + size)
            except DataError as err:
                raise DataError(f"inner message {len(inner)}: {err.message} (at byte {pos} of the "
                                f"decompressed message set)", offset=wrapper.offset) from None
            if message.compression:
                raise DataError("inner messages must not be compressed", offset=wrapper.offset)
            if not message.crc_valid and options.check_crc:
                raise DataError(f"inner message {len(inner)} is corrupt (stored crc = {message.crc})",
                                offset=wrapper.offset)
            inner.append(message)
            pos += LOG_OVERHEAD + size
        if not inner:
            raise DataError("compressed message set with no inner messages", offset=wrapper.offset)
        return inner

    @staticmethod
    def _absolute_offsets(wrapper: LegacyMessage, inner: list[LegacyMessage]) -> list[int]:
        if wrapper.magic == MAGIC_V0:
            return [m.offset for m in inner]  # v0 inner offsets are absolute
        if wrapper.offset == 0:
            base = 0  # certain librdkafka versions wrote wrapper offset 0 (AbstractLegacyRecordBatch)
        else:
            last_inner = inner[-1].offset
            if wrapper.offset < last_inner:
                raise DataError(f"wrapper offset {wrapper.offset} is less than the last inner offset "
                                f"{last_inner}", offset=wrapper.offset)
            base = wrapper.offset - last_inner
        return [int64(base + m.offset) for m in inner]

    def encode(self, header: BatchHeader, records: pa.RecordBatch, *, level: int | None = None) -> bytes:
        magic = header.magic
        # Under LogAppendTime the header's max_timestamp is the append time, which every message
        # reports (docs/format.md §3.5), as it is for v2 batches (docs/format.md §4.3).
        lat = magic == MAGIC_V1 and header.timestamp_type == TimestampType.LOG_APPEND_TIME
        import pyarrow as pa  # records were made by it: already imported

        if type(records) is pa.RecordBatch and (records.num_rows == 1 or header.compression and records.num_rows):
            entry = self._encode_native(header, records, lat, level)
            if entry is not None:
                return entry
        offsets, timestamps, keys, values = (records.column(i).to_pylist() for i in range(4))
        if any(records.column(4).to_pylist()):
            raise ValueError(f"message format v{magic} cannot hold headers")
        if not header.compression:
            if len(offsets) != 1:
                raise ValueError("an uncompressed legacy entry holds exactly one message")
            timestamp = header.max_timestamp if lat else timestamps[0]
            return encode_message(offsets[0], magic, timestamp, keys[0], values[0], 0, lat)
        if not offsets:
            raise ValueError("a compressed legacy wrapper needs at least one message")
        # Inner messages: v0 absolute offsets, v1 relative to the first (gaps kept); under
        # LogAppendTime they carry the append time and the flag, as Kafka's builder writes them.
        base = offsets[0] if magic == MAGIC_V1 else 0
        inner = b"".join(
            encode_message(o - base, magic, header.max_timestamp if lat else t, k, v, 0, lat)
            for o, t, k, v in zip(offsets, timestamps, keys, values))
        codec = registry.get().compression_for(header.compression, magic)
        wrapper_ts = header.max_timestamp if lat else max(timestamps)
        return encode_message(offsets[-1], magic, wrapper_ts, None,
                              codec.compress(inner, magic=magic, level=level), header.compression, lat)

    @staticmethod
    def _encode_native(header: BatchHeader, records: pa.RecordBatch, lat: bool, level: int | None):
        """encode() by the compiled kernel (the messages; a wrapper's own message here); None where
        the code above decides (it raises for headers and impossible offsets)."""
        magic = header.magic
        base = records.column(0)[0].as_py() if header.compression and magic == MAGIC_V1 else 0
        messages = legacy_sets.encode_messages(records, magic, base, header.max_timestamp if lat else None)
        if messages is None:
            return None
        if not header.compression:
            return messages
        codec = registry.get().compression_for(header.compression, magic)
        wrapper_ts = header.max_timestamp if lat else _largest(records.column(1))
        return encode_message(records.column(0)[-1].as_py(), magic, wrapper_ts, None,
                              codec.compress(messages, magic=magic, level=level), header.compression,
                              lat)


def encode_message(offset: int, magic: int, timestamp: int, key, value, codec: int, lat: bool) -> bytes:
    attrs = codec | (ATTR_LOG_APPEND_TIME if lat else 0)
    body = bytearray(MAGIC_AND_ATTRIBUTES.pack(magic, attrs))
    if magic == MAGIC_V1:
        body += V1_TIMESTAMP.pack(timestamp)
    for field in (key, value):
        if field is None:
            body += INT32.pack(-1)
        else:
            body += INT32.pack(len(field))
            body += field
    # messageSize counts the crc and the body
    return UP_TO_CRC.pack(offset, len(body) + UINT32.size, crc32(body)) + body


@hookimpl
def kfmt_register_formats(register):
    register(LegacyFormat())


def _largest(column) -> int:
    """The largest value of an int64 column (pyarrow.compute is not imported for this one use: every
    command loads this plugin)."""
    import pyarrow.compute as pc

    return pc.max(column).as_py()
