"""Runs of compressed data batches (v2) and wrappers (v0/v1): inflated by their codecs, their records
walked or decoded many entries per compiled call.

Each compressed entry must go through its codec plugin (one Python call: the codecs are plugins), but
nothing else needs Python per entry. What an entry is before it is inflated is one rule,
`inflated_v2` / `inflated_wrapper` (checked as the format's decode checks it: CRC, codec, declared
sizes), which the run kernel `compressed_spans` (kfmt/csrc/compressed.c) applies to a whole run of
frame rows at once; kfmt.format.span_inflate.SpanInflater then inflates the rows it gives, a list
comprehension of codec calls per few MB. Then:

* `walk(data, rows, start, stop, ...)`: what the deep checks of reindex, resegment, restore,
  archive, retain, info and verify need of a run of entries: inflated so, a few MB of payloads
  then walked in one compiled call (`walk_inflated`) as digest_v2_records / v2_records_facts and
  digest_legacy_set / legacy_set_facts walk each one: per entry its records, first and last offsets
  and timestamp range, and the run's content digest, without columns. It stops at the first entry
  those would leave to the decode (which then reports it). `walk_reference` defines the result,
  entry by entry through the per-entry kernels.
* `inflated_blocks(data, rows, ...)`: the records of a run as column blocks (export, the upgrade of
  wrappers): inflated so, the payloads handed to one compiled call per few MB (decode_v2_payloads,
  decode_legacy_payloads), which decodes them as decode_records and decode_legacy_set decode each,
  and says how many records each entry gave. An entry the kernels are not sure of goes through
  `segment.decode` on its own, which raises the reader's error for a damaged one.
  `inflated_blocks_reference` defines the result (each entry decoded, a block of its own); the
  kernels give the same records, counts and base offsets in fewer blocks
  (tests/format/test_fast_paths.py), and without them (KFMT_PURE_PYTHON=1) the reference runs.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, TYPE_CHECKING

import numpy as np

from kfmt.errors import DataError, UsageError
from kfmt.format import segment
from kfmt.format.digest import ContentDigest
from kfmt.format.frames import FRAME_DTYPE, header_of
from kfmt.format.kernels import native
from kfmt.format.layout import (
    ATTR_CONTROL,
    ATTR_LOG_APPEND_TIME,
    CODEC_MASK,
    MAGIC_V1,
    MAGIC_V2,
    V2_BATCH,
    V2_BATCH_OVERHEAD,
    V2_CRC_FROM,
)
from kfmt.format.model import int64_values
from kfmt.format.message_formats import STRICT, ReadOptions
from kfmt.format.span_inflate import (
    BASE_OFFSET,
    BASE_TS,
    COUNT,
    HAS_LAT,
    LAT,
    MAGIC,
    SPAN_FIELDS,
    SpanInflater,
    native_format,
)
from kfmt.plugin import registry

if TYPE_CHECKING:
    import pyarrow as pa  # imported where used: not on the paths that hold no record columns


@dataclass
class InflatedBlock:
    rows: np.ndarray  # the frames of its entries (consecutive rows of the run)
    records: pa.RecordBatch  # RECORD_SCHEMA: entry i's records are the next counts[i] rows
    counts: np.ndarray  # int64, records per entry
    base_offsets: np.ndarray  # int64, each entry's base offset as decode gives it (a v0/v1 wrapper's:
    # its first inner message's, known only inflated; a v2 batch's: its header's)


def compressed_entries(rows: np.ndarray) -> np.ndarray:
    """Which rows are compressed data entries (what inflated_blocks takes): v2 batches other than
    control ones, and v0/v1 wrappers."""
    return (rows["compression"] != 0) & ((rows["magic"] < MAGIC_V2) | (rows["attributes"] & ATTR_CONTROL == 0))


def inflated_blocks(data, rows: np.ndarray, file: str, options: ReadOptions = STRICT,
                    base: int = 0) -> Iterator[InflatedBlock]:
    """The records of compressed data entries (rows of `data`, the file from position `base` on; all
    compressed_entries), as segment.decode of each gives them, in consecutive blocks of entries: one
    per kernel call (about MAX_CALL_BYTES of inflated records: memory holds one block, however well
    the entries compress) and one for each entry decoded on its own. A run of entries is checked by
    one compressed_spans call and inflated by span_inflate.SpanInflater (the codec's call is the only
    Python per entry); an entry either refuses goes through segment.decode, which reports it."""
    rows = _entry_rows(rows)
    if native is None:
        yield from inflated_blocks_reference(data, rows, file, options, base)
        return
    formats, inflater = registry.get(), SpanInflater(data, options)
    n, i = len(rows), 0
    while i < n:
        _stopped, spans = native.compressed_spans(data, rows, i, n, base)
        spans = np.frombuffer(spans, np.int64).reshape(-1, len(SPAN_FIELDS))
        i += yield from _span_blocks(rows[i:i + len(spans)], spans, formats, inflater, options)
        if i < n:  # an entry the spans, its codec or the kernels leave to decode, which reports
            yield _decoded(data, rows[i:i + 1], file, options, base)
            i += 1


def _span_blocks(rows: np.ndarray, spans: np.ndarray, formats, inflater: "SpanInflater",
                 options: ReadOptions):
    """Yield the blocks of the entries of `spans` (rows: their frames) from the first, in runs of
    one kind (v2 batches, wrappers) of kfmt's own formats; return how many entries they hold."""
    v2 = spans[:, MAGIC] >= MAGIC_V2
    edges = (np.flatnonzero(v2[1:] != v2[:-1]) + 1).tolist()
    for a, b in zip([0, *edges], [*edges, len(spans)]):
        k = a
        while k < b:
            payloads, refused = inflater.payloads(spans, k, b, formats)
            done = 0
            if payloads:
                done, records, counts = _decode_spans(bool(v2[a]), payloads, spans[k:k + len(payloads)],
                                                      options)
                if done:
                    yield _block(rows[k:k + done], records, counts)
            k += done
            if refused or done < len(payloads):
                return k
    return len(spans)


def _decode_spans(v2: bool, payloads: list, spans: np.ndarray, options: ReadOptions):
    """(payloads decoded, their records, records per payload) from one kernel call; the facts each
    payload is decoded with come from its span row, as inflated_v2 / inflated_wrapper give them."""
    lat = np.where(spans[:, HAS_LAT] != 0, spans[:, LAT], 0)
    if v2:  # count, base offset, base timestamp, LogAppendTime 0/1 and its time
        table = np.column_stack((spans[:, COUNT], spans[:, BASE_OFFSET], spans[:, BASE_TS],
                                 spans[:, HAS_LAT], lat))
        done, records = native.decode_v2_payloads(payloads, np.ascontiguousarray(table, np.int64))
        return done, records, table[:done, 0].copy()
    # wrapper offset, wrapper magic, LogAppendTime 0/1 and its time
    table = np.column_stack((spans[:, BASE_OFFSET], spans[:, MAGIC], spans[:, HAS_LAT], lat))
    done, records, made = native.decode_legacy_payloads(payloads, np.ascontiguousarray(table, np.int64),
                                                        options.check_crc)
    return done, records, np.frombuffer(made, np.int64)


def inflated_blocks_reference(data, rows: np.ndarray, file: str, options: ReadOptions = STRICT,
                              base: int = 0) -> Iterator[InflatedBlock]:
    rows = _entry_rows(rows)
    for i in range(len(rows)):
        yield _decoded(data, rows[i:i + 1], file, options, base)


def _decoded(data, rows: np.ndarray, file: str, options: ReadOptions, base: int) -> InflatedBlock:
    """The block of one entry, decoded on its own (segment.decode: the reader's errors)."""
    batch = segment.decode(data, header_of(rows[0].item()), file, options, base)
    return _block(rows, batch.records, np.array([len(batch)], np.int64))


def _block(rows: np.ndarray, records: pa.RecordBatch, counts: np.ndarray) -> InflatedBlock:
    # a wrapper's base offset is its first record's (it always has one); a v2 batch's its header's
    starts = np.concatenate(([0], np.cumsum(counts)[:-1])).astype(np.int64)
    firsts = int64_values(records.column(0))[np.minimum(starts, max(records.num_rows - 1, 0))] \
        if records.num_rows else np.zeros(len(rows), np.int64)
    base_offsets = np.where(rows["magic"] >= MAGIC_V2, rows["base_offset"], firsts).astype(np.int64)
    return InflatedBlock(rows, records, np.asarray(counts, np.int64), base_offsets)


def _entry_rows(rows: np.ndarray) -> np.ndarray:
    if rows.dtype != FRAME_DTYPE:
        rows = rows.astype(FRAME_DTYPE)
    if not compressed_entries(rows).all():
        raise UsageError("a run holds compressed data entries only (see compressed_entries)")
    return np.ascontiguousarray(rows)


# ---------------------------------------------------------------- what an entry is, inflated

def inflated_wrapper(data, row, base: int, options: ReadOptions, formats=None) -> tuple | None:
    """(inner message set, wrapper offset, magic, LogAppendTime or None) of a compressed v0/v1
    wrapper, checked (CRC, codec) as LegacyFormat's decode checks it, for the kernels that walk an
    inner set (digest_legacy_set, legacy_set_facts); None wherever that decode should decide.
    `formats`: the plugin registry, where the caller has it at hand (one lookup per run)."""
    formats = formats or registry.get()
    magic = int(row["magic"])
    if not native_format(formats, magic):
        return None  # another plugin's format: its own decode decides
    at = int(row["position"]) - base
    entry = data[at:at + int(row["size"])]
    facts = native.legacy_wrapper(entry)
    if facts is NotImplemented:
        return None
    offset, magic, attributes, _crc, crc_valid, timestamp, value_at, value_len = facts
    if not attributes & CODEC_MASK or value_len < 0 or not crc_valid or offset != int(row["last_offset"]):
        return None
    try:
        codec = formats.compression_for(attributes & CODEC_MASK, magic)
        payload = codec.decompress(entry[value_at:value_at + value_len], magic=magic,
                                   max_size=options.max_decompressed)
    except DataError:
        return None
    lat = magic == MAGIC_V1 and attributes & ATTR_LOG_APPEND_TIME  # every inner record has the wrapper's time
    return payload, offset, magic, timestamp if lat else None



_V2_HEADER = V2_BATCH.struct


def inflated_v2(data, row, base: int, options: ReadOptions, formats=None) -> tuple | None:
    """(records section, count, base offset, base timestamp, LogAppendTime or None) of a compressed
    v2 data batch, checked (CRC, codec) as the v2 format's decode checks it, for the kernels that walk
    its records (digest_v2_records, v2_records_facts); the section is b"" for an empty batch; None
    wherever that decode should decide. The header is read from the entry's own bytes. `formats`: as
    for inflated_wrapper."""
    formats = formats or registry.get()
    if not native_format(formats, MAGIC_V2):
        return None
    at, size = int(row["position"]) - base, int(row["size"])
    entry = data[at:at + size]
    if size < V2_BATCH_OVERHEAD or len(entry) != size:
        return None
    (base_offset, _length, _epoch, magic, crc, attributes, _last_delta, base_ts, max_ts, _pid, _pepoch,
     _seq, count) = _V2_HEADER.unpack_from(entry)
    if magic != MAGIC_V2 or attributes & ATTR_CONTROL or not attributes & CODEC_MASK or count < 0:
        return None
    if count == 0:
        return b"", 0, base_offset, base_ts, None  # decode looks no further (docs/format.md §4.7)
    if native.crc32c(entry[V2_CRC_FROM:]) != crc & 0xFFFFFFFF:
        return None
    try:
        codec = formats.compression_for(attributes & CODEC_MASK, MAGIC_V2)
        payload = codec.decompress(entry[V2_BATCH_OVERHEAD:], magic=MAGIC_V2, max_size=options.max_decompressed)
    except DataError:
        return None
    lat = max_ts if attributes & ATTR_LOG_APPEND_TIME else None  # every record has the batch's time
    return payload, count, base_offset, base_ts, lat


# ---------------------------------------------------------------- runs walked without columns

# walk_inflated's rows, one per entry: flags 1 a timestamp seen (min_ts, max_ts, NO_TIMESTAMP left
# out), 2 offsets not increasing, bits 8..15 a wrapper's inner magics (bit m: magic m)
WALK_DTYPE = np.dtype([("records", "<i8"), ("first", "<i8"), ("last", "<i8"), ("min_ts", "<i8"),
                       ("max_ts", "<i8"), ("flags", "<i8")])
HAS_TS, DISORDERED = 1, 2


@dataclass
class Walked:
    """Entries rows[start:stop] of a walk: their facts (WALK_DTYPE, one row each; first, last,
    min_ts and max_ts mean nothing where records or the HAS_TS flag is 0) and the content digest of
    their records."""

    start: int
    stop: int
    facts: np.ndarray
    digest: ContentDigest

    @property
    def first(self) -> int | None:
        """The first record's offset (None: the entries hold none)."""
        held = np.flatnonzero(self.facts["records"])
        return int(self.facts["first"][held[0]]) if len(held) else None


def can_walk(options: ReadOptions = STRICT) -> bool:
    """Whether `walk` takes reads with these options: a strict read (options.check_crc) where the
    compiled kernels are built. Its callers decode entry by entry otherwise (their definition)."""
    return native is not None and options.check_crc


def walk(data, rows: np.ndarray, start: int, stop: int, base: int = 0, options: ReadOptions = STRICT,
         digest: bool = True) -> Walked:
    """The compressed data entries of rows[start:stop] (frames of `data`, the file from position
    `base` on) from `start` on, up to the first row that is not one or that the decode should decide
    on: inflated and walked (see the module doc). Strict reads only (options.check_crc), with the
    kernels; `digest` False leaves the digest empty (info and verify need only the facts)."""
    if not can_walk(options):
        raise UsageError("inflated_runs.walk: a strict read with the compiled kernels")
    if rows.dtype != FRAME_DTYPE or not rows.flags.c_contiguous:
        rows = np.ascontiguousarray(rows.astype(FRAME_DTYPE, copy=False))
    formats, inflater = registry.get(), SpanInflater(data, options)
    total, pieces, i = ContentDigest(), [], start
    while i < stop:
        at, spans = native.compressed_spans(data, rows, i, stop, base)
        spans = np.frombuffer(spans, np.int64).reshape(-1, len(SPAN_FIELDS))
        done = _walk_spans(spans, formats, inflater, digest, total, pieces) if len(spans) else 0
        i += done
        if done < len(spans) or at < stop:
            break
    facts = np.concatenate(pieces) if pieces else np.zeros(0, WALK_DTYPE)
    return Walked(start, i, facts, total)


def _walk_spans(spans: np.ndarray, formats, inflater: "SpanInflater", want_digest: bool,
                total: ContentDigest, pieces: list) -> int:
    """How many of the entries of `spans` were inflated and walked (their facts appended to `pieces`,
    their digest added to `total`), from the first: a few MB of payloads per kernel call."""
    k = 0
    while k < len(spans):
        payloads, refused = inflater.payloads(spans, k, len(spans), formats)
        walked, facts, high, low = native.walk_inflated(spans[k:k + len(payloads)], payloads, want_digest)
        if walked:
            facts = np.frombuffer(facts, WALK_DTYPE)
            pieces.append(facts)
            if want_digest:
                total.merge(ContentDigest(int(facts["records"].sum()), high << 64 | low))
        k += walked
        if refused or walked < len(payloads):
            break
    return k


def walk_reference(data, rows: np.ndarray, start: int, stop: int, base: int = 0,
                   options: ReadOptions = STRICT, digest: bool = True) -> Walked:
    """walk's definition, entry by entry: inflated_v2 / inflated_wrapper, then the per-entry kernels
    (digest_v2_records and v2_records_facts, digest_legacy_set and legacy_set_facts)."""
    formats = registry.get()
    total, facts, i = ContentDigest(), [], start
    for i in range(start, stop):
        row = rows[i]
        if not row["compression"] or (row["magic"] >= MAGIC_V2 and row["attributes"] & ATTR_CONTROL):
            break
        if row["magic"] < MAGIC_V2:
            inflated = inflated_wrapper(data, row, base, options, formats)
            if inflated is None:
                break
            done = native.digest_legacy_set(*inflated, True)
            found = native.legacy_set_facts(*inflated, True)
        else:
            inflated = inflated_v2(data, row, base, options, formats)
            if inflated is None:
                break
            if inflated[1] == 0:
                facts.append((0, 0, 0, 0, 0, 0))
                continue
            done = native.digest_v2_records(*inflated)
            found = native.v2_records_facts(*inflated)
        if done is NotImplemented or found is NotImplemented:
            break
        records, high, low, _first = done
        if digest:
            total.merge(ContentDigest(records, high << 64 | low))
        n, first, last, lo, hi, increasing, magics = found
        facts.append((n, first or 0, last or 0, lo or 0, hi or 0,
                      (lo is not None) * HAS_TS | (not increasing) * DISORDERED | magics << 8))
    else:
        i = stop
    return Walked(start, i, np.array(facts, WALK_DTYPE), total)
