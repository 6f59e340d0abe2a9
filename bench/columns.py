"""Decode into columns and encode from them: kfmt against kafka-python and aiokafka's C extension.

Each contender does what a user of it would script, on the same bytes:
* decode: every record's offset, timestamp, key, value and headers gathered into columns, CRCs
  checked (as Kafka's consumers do by default, check.crcs=true; aiokafka's consumer calls
  validate_crc() likewise). kfmt: `kfmt.format.legacy_runs.record_blocks` over the log (Arrow columns, one
  block per batch or per run of uncompressed legacy messages). Peers: MemoryRecords over the log,
  `validate_crc()` per batch, then their record objects appended to five lists. "aiokafka-c
  iterate" is aiokafka's bare decode speed (fields read, nothing kept, no CRC check), the strictest
  yardstick: the targets are checked against the faster of the two.
* encode: kfmt from Arrow columns (the format plugins' encode per batch; a run of uncompressed
  legacy messages with `legacy_runs.encode_messages`); peers from Python lists, through their batch
  builders (append per record, build per batch).
* codec: for compressed formats, the codec library alone decompressing (compressing) the same
  payloads: the bound the issue sets ("within 1.3x of the codec's own decompression time").
"""
from __future__ import annotations

import zlib

import lz4.frame
import pyarrow as pa
import zstandard
from data import BATCH_RECORDS, CODEC_IDS, CodecInput

from kfmt.format import legacy_runs
from kfmt.format.model import BatchHeader, TimestampType, make_records
from kfmt.plugin import registry

try:
    from aiokafka.record._crecords.default_records import DefaultRecordBatchBuilder as AioDefaultBuilder
    from aiokafka.record._crecords.legacy_records import LegacyRecordBatchBuilder as AioLegacyBuilder
    from aiokafka.record._crecords.memory_records import MemoryRecords as AioMemoryRecords
except ImportError:  # aiokafka without its C extension: not the peer the issue names
    AioMemoryRecords = None
from kafka.record.default_records import DefaultRecordBatchBuilder as KpDefaultBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder as KpLegacyBuilder
from kafka.record.memory_records import MemoryRecords as KpMemoryRecords

PEERS = ["kafka-python", "aiokafka-c", "aiokafka-c iterate"]


# --- decode ---

def kfmt_decode(inp: CodecInput) -> int:
    n = 0
    for block in legacy_runs.record_blocks(memoryview(inp.log), "bench.log"):
        n += block.num_rows
    return n


def peer_decode(memory_records_class, inp: CodecInput) -> int:
    offsets, timestamps, keys, values, headers = [], [], [], [], []
    records = memory_records_class(inp.log)
    while records.has_next():
        batch = records.next_batch()
        if not batch.validate_crc():
            raise ValueError("bad CRC")
        for r in batch:
            offsets.append(r.offset)
            timestamps.append(r.timestamp)
            keys.append(r.key)
            values.append(r.value)
            headers.append(r.headers)
    return len(offsets)


def peer_iterate(memory_records_class, inp: CodecInput) -> int:
    """The peer's raw decode speed: every record's fields read, nothing kept, no CRC check."""
    n = 0
    records = memory_records_class(inp.log)
    while records.has_next():
        for r in records.next_batch():
            r.offset, r.timestamp, r.key, r.value, r.headers
            n += 1
    return n


def decoders(inp: CodecInput) -> dict:
    out = {"kfmt": lambda: kfmt_decode(inp), "kafka-python": lambda: peer_decode(KpMemoryRecords, inp)}
    if AioMemoryRecords is not None:
        out["aiokafka-c"] = lambda: peer_decode(AioMemoryRecords, inp)
        out["aiokafka-c iterate"] = lambda: peer_iterate(AioMemoryRecords, inp)
    payloads = compressed_payloads(inp)
    if payloads is not None:
        decompress = DECOMPRESS[inp.codec]

        def codec_only() -> int:
            for payload in payloads:
                decompress(payload)
            return inp.records
        out["codec"] = codec_only
    return out


def compressed_payloads(inp: CodecInput) -> list[bytes] | None:
    """The compressed payload of every batch (v2: after the 61-byte header; v0/v1: the wrapper's
    value), for the codec-only measurement."""
    if inp.codec == "none":
        return None
    out = []
    for batch in inp.batches:
        if inp.magic == 2:
            out.append(batch[61:])
        else:
            key_at = 26 if inp.magic == 1 else 18
            klen = int.from_bytes(batch[key_at:key_at + 4], "big", signed=True)
            value_at = key_at + 4 + max(klen, 0)
            out.append(batch[value_at + 4:])
    return out


def _zstd_decompress(payload: bytes) -> bytes:
    # Kafka's zstd frames carry no content size: the streaming decompressor (environment notes)
    return zstandard.ZstdDecompressor().decompressobj().decompress(payload)


DECOMPRESS = {"gzip": lambda p: zlib.decompress(p, 47), "lz4": lz4.frame.decompress,
              "zstd": _zstd_decompress}


# --- encode ---

def kfmt_encode_inputs(inp: CodecInput) -> list:
    """(header, records) per batch: the encoder's inputs, built before timing."""
    out = []
    codec_id = CODEC_IDS[inp.codec]
    for offsets, timestamps, keys, values in inp.columns:
        records = make_records(offsets, timestamps, keys, values)
        header = BatchHeader(magic=inp.magic, base_offset=offsets[0], last_offset=offsets[-1],
                             compression=codec_id,
                             timestamp_type=TimestampType.CREATE_TIME if inp.magic else
                             TimestampType.NO_TIMESTAMP_TYPE,
                             max_timestamp=max(timestamps), base_timestamp=timestamps[0])
        out.append((header, records))
    return out


def kfmt_encode(inp: CodecInput, prepared: list) -> int:
    size = 0
    if inp.magic < 2 and inp.codec == "none":
        for _, records in prepared:  # a run of messages, each its own entry
            size += len(legacy_runs.encode_messages(records, inp.magic))
        return size
    encode = registry.get().format_for(inp.magic).encode
    for header, records in prepared:
        size += len(encode(header, records))
    return size


def peer_encode(default_builder, legacy_builder, inp: CodecInput) -> int:
    size = 0
    codec_id = CODEC_IDS[inp.codec]
    for offsets, timestamps, keys, values in inp.columns:
        if inp.magic == 2:
            builder = default_builder(2, codec_id, 0, -1, -1, -1, 1 << 30)
            for o, t, k, v in zip(offsets, timestamps, keys, values):
                builder.append(o, t, k, v, [])
        else:
            builder = legacy_builder(inp.magic, codec_id, 1 << 30)
            for o, t, k, v in zip(offsets, timestamps, keys, values):
                builder.append(o, t, k, v)
        size += len(builder.build())
    return size


def encoders(inp: CodecInput) -> dict:
    prepared = kfmt_encode_inputs(inp)
    out = {"kfmt": lambda: kfmt_encode(inp, prepared),
           "kafka-python": lambda: peer_encode(KpDefaultBuilder, KpLegacyBuilder, inp)}
    if AioMemoryRecords is not None:
        out["aiokafka-c"] = lambda: peer_encode(AioDefaultBuilder, AioLegacyBuilder, inp)
    if inp.codec != "none":
        plain = [b"".join(k + v for k, v in zip(keys, values)) for _, _, keys, values in inp.columns]
        compress = COMPRESS[inp.codec]

        def codec_only() -> int:  # the keys and values alone: a little less than the records' bytes
            for p in plain:
                compress(p)
            return inp.records
        out["codec"] = codec_only
    return out


COMPRESS = {"gzip": lambda p: zlib.compress(p, 6), "lz4": lz4.frame.compress,
            "zstd": lambda p: zstandard.ZstdCompressor(level=3).compress(p)}


def check_same_records(inp: CodecInput) -> None:
    """Before timing anything: kfmt and the peers decode the same records from the same bytes."""
    blocks = list(legacy_runs.record_blocks(memoryview(inp.log), "bench.log"))
    table = pa.Table.from_batches(blocks)
    expected_offsets = [o for c in inp.columns for o in c[0]]
    if table.column("offset").to_pylist() != expected_offsets:
        raise AssertionError(f"{inp.name}: kfmt decodes other offsets than were written")
    values = table.column("value").to_pylist()
    peer_values = []
    records = KpMemoryRecords(inp.log)
    while records.has_next():
        peer_values.extend(r.value for r in records.next_batch())
    if values != peer_values:
        raise AssertionError(f"{inp.name}: kfmt and kafka-python decode different values")
    assert len(blocks) <= len(inp.batches) * (BATCH_RECORDS if inp.magic < 2 else 1)
