"""Runs of compressed data batches (v2) and wrappers (v0/v1): inflated one by one, decoded as one column
block.

Each compressed entry must go through its codec plugin (one Python call: the codecs are plugins), but
nothing else needs Python per entry: `inflated_blocks(data, rows, ...)` inflates each entry of a run
(checked first as the format's decode checks it: CRC, codec, declared sizes; kfmt.format.batch_runs
.inflated_v2 and .inflated_wrapper) and hands the payloads to one compiled call per few MB
(kfmt/csrc: decode_v2_payloads, decode_legacy_payloads), which decodes them into one column block
as decode_records and decode_legacy_set decode each, and says how many records each entry gave. An
entry the kernels are not sure of goes through `segment.decode` on its own, which raises the reader's
error for a damaged one.

`inflated_blocks_reference` defines the result (each entry decoded, a block of its own); the kernels
give the same records, counts and base offsets in fewer blocks (tests/format/test_fast_paths.py), and without them (KFMT_PURE_PYTHON=1) the
reference runs.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np
import pyarrow as pa

from kfmt.errors import UsageError
from kfmt.format import segment
from kfmt.format.batch_runs import inflated_v2, inflated_wrapper
from kfmt.format.frames import ATTR_CONTROL, FRAME_DTYPE, header_of
from kfmt.format.kernels import native
from kfmt.format.message_formats import STRICT, ReadOptions
from kfmt.plugin import registry

# Inflated bytes per kernel call: the payloads of a call are held at once, and decoded into columns of
# their size (at this size, below glibc's mmap threshold, that memory is reused rather than fresh pages)
MAX_CALL_BYTES = 1 << 23


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
    return (rows["compression"] != 0) & ((rows["magic"] < 2) | (rows["attributes"] & ATTR_CONTROL == 0))


def inflated_blocks(data, rows: np.ndarray, file: str, options: ReadOptions = STRICT,
                    base: int = 0) -> Iterator[InflatedBlock]:
    """The records of compressed data entries (rows of `data`, the file from position `base` on; all
    compressed_entries), as segment.decode of each gives them, in consecutive blocks of entries: one
    per kernel call (about MAX_CALL_BYTES of inflated records: memory holds one block, however well
    the entries compress) and one for each entry decoded on its own."""
    rows = _entry_rows(rows)
    if native is None:
        yield from inflated_blocks_reference(data, rows, file, options, base)
        return
    v2 = (rows["magic"] >= 2).tolist()
    formats = registry.get()
    n, i = len(rows), 0
    while i < n:
        kind = v2[i]
        inflate = inflated_v2 if kind else inflated_wrapper
        payloads, facts, size, j = [], [], 0, i
        while j < n and v2[j] == kind and size < MAX_CALL_BYTES:
            inflated = inflate(data, rows[j], base, options, formats)
            if inflated is None:
                break
            payload, *fact = inflated
            payloads.append(payload)
            facts.append(fact)
            size += len(payload)
            j += 1
        done = 0
        if payloads:
            done, records, counts = _decode_payloads(kind, payloads, facts, options)
            if done:
                yield _block(rows[i:i + done], records, counts)
            i += done
        if done < len(payloads) or not payloads:  # an entry the kernels leave to decode, which reports
            yield _decoded(data, rows[i:i + 1], file, options, base)
            i += 1


def _decode_payloads(v2: bool, payloads: list, facts: list, options: ReadOptions):
    """(payloads decoded, their records, records per payload) from one kernel call."""
    if v2:  # facts: (count, base offset, base timestamp, LogAppendTime or None)
        table = np.array([(c, o, t, lat is not None, lat or 0) for c, o, t, lat in facts], np.int64)
        done, records = native.decode_v2_payloads(payloads, table.reshape(-1))
        return done, records, table[:done, 0]
    # facts: (wrapper offset, wrapper magic, LogAppendTime or None)
    table = np.array([(o, m, lat is not None, lat or 0) for o, m, lat in facts], np.int64)
    done, records, made = native.decode_legacy_payloads(payloads, table.reshape(-1), options.check_crc)
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
    firsts = records.column(0).to_numpy()[np.minimum(starts, max(records.num_rows - 1, 0))] \
        if records.num_rows else np.zeros(len(rows), np.int64)
    base_offsets = np.where(rows["magic"] >= 2, rows["base_offset"], firsts).astype(np.int64)
    return InflatedBlock(rows, records, np.asarray(counts, np.int64), base_offsets)


def _entry_rows(rows: np.ndarray) -> np.ndarray:
    if rows.dtype != FRAME_DTYPE:
        rows = rows.astype(FRAME_DTYPE)
    if not compressed_entries(rows).all():
        raise UsageError("a run holds compressed data entries only (see compressed_entries)")
    return np.ascontiguousarray(rows)
