"""Runs of compressed v0/v1 wrappers converted to v2 by Kafka 4.0's rules, a block of wrappers at a time.

Kafka 4.0 makes one v2 batch of each compressed wrapper (docs/format.md §16.3, kfmt.format.convert):
all its records, the wrapper's codec (or, for kfmt recompress, the target one), producer fields and
leader epoch -1, v0 CreateTime -1, a LogAppendTime wrapper a LogAppendTime batch. Done one wrapper at
a time that is a decode, a conversion, an encode and a strict decode of the output: hundreds of
microseconds of Python around the codec, which made upgrading gzip wrappers of incompressible
values five times slower than inflating and deflating them (issue 25). Here:

* the wrappers are inflated by their codec and their records decoded into one column block per few
  MB (kfmt.format.inflated_runs.inflated_blocks: checked as the legacy format's decode checks them);
* every batch's header comes from the block's columns at once (numpy: first and last offsets, base
  and greatest timestamps per wrapper), and each batch is encoded by the record kernel, checked from
  its uncompressed bytes (the records walked and hashed again, `digest_v2_records`: the "after"
  digest checks the encoder's work), then compressed (one codec call per batch: codecs are plugins;
  a list comprehension, the only Python per batch) and the whole block framed, headers and CRC-32Cs,
  in one kernel call (frame_v2_batches, kfmt/csrc/entries.c; `frame_v2_reference` defines it).

`convert_wrapper_reference` (the v2 format plugin's encode of kfmt.format.convert's batch) defines
each batch's bytes; `upgraded_wrappers` gives the same bytes (tests/format/test_wrapper_runs.py).
Without the kernels (KFMT_PURE_PYTHON=1) callers take the per-entry path instead (`available`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np

from kfmt.format import inflated_runs, segment
from kfmt.format.convert import convert_batch
from kfmt.format.digest import ContentDigest
from kfmt.format.frames import FRAME_DTYPE, header_of
from kfmt.format.kernels import native
from kfmt.format.layout import ATTR_LOG_APPEND_TIME, MAGIC_V1, MAGIC_V2, V2_BATCH, V2_CRC_FROM
from kfmt.format.message_formats import STRICT, ReadOptions
from kfmt.format.model import Batch, TimestampType, int64_values
from kfmt.format.wire import crc32c
from kfmt.plugin import registry

# the v2 batch header (docs/format.md §4.1): the part before the CRC, and from the attributes on
_BEFORE_CRC = V2_BATCH.struct_of("baseOffset", "crc")
_AFTER_CRC = V2_BATCH.struct_of("attributes", "recordsCount")
# batchLength counts partitionLeaderEpoch, magic and crc besides what the CRC covers
_LENGTH_AFTER = V2_CRC_FROM - V2_BATCH.at("partitionLeaderEpoch")
NO_PRODUCER = NO_EPOCH = -1


@dataclass
class ConvertedWrappers:
    """The v2 batches made of consecutive wrappers: their bytes and frame rows (positioned from 0), the
    digest of the records read (`before`) and of the records walked again
    from the batches' uncompressed bytes (`after`), and the first record's offset."""

    source_rows: np.ndarray  # the wrappers' frames
    entries: bytes
    rows: np.ndarray
    before: ContentDigest
    after: ContentDigest
    first_offset: int


def available() -> bool:
    """Whether the run path exists here (the kernels are built and not turned off)."""
    return native is not None


def upgraded_wrappers(data, rows: np.ndarray, file: str, levels: dict, codec: int | None = None,
                      base: int = 0, options: ReadOptions = STRICT) -> Iterator[ConvertedWrappers | Batch]:
    """The v2 batches Kafka 4.0 makes of compressed v0/v1 wrappers (rows of frames of `data`, the file
    from position `base` on; all wrappers), in order, as ConvertedWrappers of a block each; a wrapper
    the block path does not take (one without records, one the kernels leave to the decode) comes as
    its decoded Batch for the caller's per-entry path. `codec`: the codec of the batches made (None:
    each wrapper's own); `levels`: codec id -> level (absent: the codec's default)."""
    formats = registry.get()
    for block in inflated_runs.inflated_blocks(data, rows, file, options, base):
        # Kafka 4.0 has no batch for an empty wrapper, and a few records the kernel leaves to the
        # Python encoder: such blocks go to the caller's per-entry path
        converted = None if (block.counts <= 0).any() else _convert_block(block, formats, levels, codec)
        if converted is not None:
            yield converted
            continue
        for row in block.rows.tolist():
            yield segment.decode(data, header_of(row), file, options, base)


def _convert_block(block, formats, levels: dict, codec: int | None) -> ConvertedWrappers | None:
    """The v2 batches of a block of wrappers (None where the record kernel declines some record)."""
    records, counts, src = block.records, block.counts, block.rows
    starts = np.concatenate(([0], np.cumsum(counts)[:-1])).astype(np.int64)
    offsets = int64_values(records.column(0))
    timestamps = int64_values(records.column(1))
    first, last = offsets[starts], offsets[starts + counts - 1]
    base_ts = timestamps[starts]
    # a LogAppendTime wrapper's batch takes the wrapper's time, which every record reports
    lat = (src["magic"] == MAGIC_V1) & (src["attributes"] & ATTR_LOG_APPEND_TIME != 0)
    max_ts = np.where(lat, src["max_timestamp"], np.maximum.reduceat(timestamps, starts))
    encoded = native.encode_v2_bodies(records, np.stack([counts, first, base_ts], axis=1).astype(np.int64))
    if encoded is NotImplemented:
        return None
    bodies, sizes = memoryview(encoded[0]), np.frombuffer(encoded[1], np.int64)
    ends = np.cumsum(sizes).tolist()
    bodies = [bodies[a:b] for a, b in zip([0, *ends[:-1]], ends)]
    after = _walked(bodies, counts, first, base_ts, lat, max_ts)
    codecs = src["compression"].astype(np.int64) if codec is None else np.full(len(src), codec, np.int64)
    attributes = codecs | np.where(lat, ATTR_LOG_APPEND_TIME, 0)
    entries, sizes, crcs = _framed(bodies, formats, levels, counts, first, last, base_ts, max_ts, codecs,
                                   attributes)
    before = ContentDigest()
    before.update(records)
    made = _frames(sizes, first, last, max_ts, base_ts, counts, crcs, attributes, codecs, lat)
    return ConvertedWrappers(src, entries, made, before, after, int(first[0]))


def _walked(bodies: list, counts, first, base_ts, lat, max_ts) -> ContentDigest:
    """The content digest of the records of the uncompressed bodies made, walked again from their bytes
    in one kernel call (inflated_runs.walk_inflated, as a read of the batches walks them)."""
    spans = np.zeros((len(bodies), len(inflated_runs.SPAN_FIELDS)), np.int64)
    spans[:, 1] = [len(b) for b in bodies]  # value_len: a records section
    spans[:, 3], spans[:, 4], spans[:, 5], spans[:, 6] = 2, counts, first, base_ts
    spans[:, 7], spans[:, 8] = lat, max_ts
    walked, facts, high, low = native.walk_inflated(spans, bodies, True)
    facts = np.frombuffer(facts, inflated_runs.WALK_DTYPE)
    # a body the walk refuses is left out of the digest: the run's check then fails, naming the digests
    return ContentDigest(int(facts["records"][:walked].sum()), high << 64 | low)


def _framed(bodies: list, formats, levels: dict, counts, first, last, base_ts, max_ts, codecs,
            attributes) -> tuple[bytes, np.ndarray, np.ndarray]:
    """(the batches, their sizes, their CRCs): each body compressed by its codec plugin (one call per
    batch, the only Python per batch), then every batch framed with its header and CRC-32C in one
    kernel call (frame_v2_batches)."""
    sections = _compressed(bodies, formats, levels, codecs)
    table = np.ascontiguousarray(np.stack([first, last, base_ts, max_ts, attributes, counts], axis=1), np.int64)
    entries, sizes, crcs = native.frame_v2_batches(sections, table)
    return entries, np.frombuffer(sizes, np.int64), np.frombuffer(crcs, np.uint32)


def _compressed(bodies: list, formats, levels: dict, codecs: np.ndarray) -> list:
    """Each body as its batch holds it: compressed by its codec (0: as it is) at its level."""
    used = np.flatnonzero(np.bincount(codecs)).tolist()  # not np.unique: it imports numpy.ma
    compress = {c: formats.compression_for(c, MAGIC_V2).compress for c in used if c}
    if len(used) == 1 and used[0]:  # the usual block: one codec
        one, level = compress[used[0]], levels.get(used[0])
        return [one(body, magic=MAGIC_V2, level=level) for body in bodies]
    return [compress[c](body, magic=MAGIC_V2, level=levels.get(c)) if c else body
            for body, c in zip(bodies, codecs.tolist())]


def frame_v2_reference(sections: list, table: np.ndarray) -> tuple[bytes, bytes, bytes]:
    """frame_v2_batches' definition: batch i holds sections[i] with table row i (base offset, last
    offset, base timestamp, max timestamp, attributes, records count), no producer and partition
    leader epoch -1 (docs/format.md §4.1, §16.3)."""
    parts, sizes, crcs = [], [], []
    for section, (first, last, t0, tmax, attributes, count) in zip(sections, table.tolist()):
        after_crc = _AFTER_CRC.pack(attributes, last - first, t0, tmax, NO_PRODUCER, NO_PRODUCER,
                                    NO_PRODUCER, count) + bytes(section)
        crc = crc32c(after_crc)
        parts += (_BEFORE_CRC.pack(first, len(after_crc) + _LENGTH_AFTER, NO_EPOCH, MAGIC_V2, crc), after_crc)
        sizes.append(V2_CRC_FROM + len(after_crc))
        crcs.append(crc)
    return b"".join(parts), np.array(sizes, np.int64).tobytes(), np.array(crcs, np.uint32).tobytes()


def _frames(sizes, first, last, max_ts, base_ts, counts, crcs, attributes, codecs, lat) -> np.ndarray:
    """The frame rows (kfmt.format.frames) of the batches made, as a scan of them would give."""
    rows = np.zeros(len(sizes), FRAME_DTYPE)
    rows["position"] = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    rows["base_offset"], rows["last_offset"] = first, last
    rows["max_timestamp"], rows["base_timestamp"] = max_ts, base_ts
    rows["producer_id"] = rows["partition_leader_epoch"] = rows["base_sequence"] = -1
    rows["producer_epoch"] = -1
    rows["size"] = sizes
    rows["records_count"], rows["crc"], rows["attributes"] = counts, crcs, attributes
    rows["magic"], rows["compression"] = 2, codecs
    rows["timestamp_type"] = np.where(lat, TimestampType.LOG_APPEND_TIME, TimestampType.CREATE_TIME)
    return rows


def convert_wrapper_reference(batch: Batch, levels: dict, codec: int | None = None) -> bytes:
    """What one decoded wrapper becomes: the v2 format plugin's encode of kfmt.format.convert's batch
    (the per-entry path of kfmt upgrade and recompress)."""
    header, records = convert_batch(batch)
    if codec is not None:
        header = header.replace(compression=codec)
    return registry.get().format_for(2).encode(header, records, level=levels.get(header.compression))
