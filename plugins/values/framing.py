"""The framings of schema-registry values, read for a whole column at once (numpy over Arrow's
buffers, no Python per record):

* Confluent's wire format: magic byte 0, the schema id as a 4-byte big-endian int, the payload
  (Protobuf puts its message-index array before the payload: plugins/values/protobuf_format.py);
* Avro single-object encoding (Avro specification, "Single-object encoding"): the marker C3 01, the
  8-byte little-endian CRC-64-AVRO fingerprint of the writer schema's Parsing Canonical Form, the
  datum.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

CONFLUENT_MAGIC = 0
CONFLUENT_HEADER = 5
SINGLE_OBJECT_MARKER = b"\xc3\x01"
SINGLE_OBJECT_HEADER = 10


class Column:
    """A binary column as numpy: the value bytes, each row's start and length, which are null."""

    def __init__(self, data: pa.Array):
        data = data.cast(pa.binary()) if data.type != pa.binary() else data
        self.array = data
        self.n = len(data)
        _, offsets, values = data.buffers()
        starts = np.frombuffer(offsets, np.int32, self.n + 1, data.offset * 4) if offsets else \
            np.zeros(self.n + 1, np.int32)
        self.starts = starts[:-1].astype(np.int64)
        self.lengths = np.diff(starts).astype(np.int64)
        self.bytes = np.frombuffer(values, np.uint8) if values is not None else np.zeros(0, np.uint8)
        self.null = np.asarray(data.is_null().to_numpy(zero_copy_only=False), dtype=bool)

    def byte_at(self, rows: np.ndarray, at: int) -> np.ndarray:
        return self.bytes[self.starts[rows] + at]

    def payloads(self, rows: np.ndarray, skip: np.ndarray | int) -> list[bytes]:
        """The bytes of `rows` after their first `skip` bytes (Python bytes, for per-datum readers)."""
        starts = self.starts[rows] + skip
        ends = self.starts[rows] + self.lengths[rows]
        buf = self.bytes.tobytes() if len(rows) else b""
        return [buf[s:e] for s, e in zip(starts.tolist(), ends.tolist())]

    def payload_array(self, rows: np.ndarray, skip: np.ndarray | int) -> pa.Array:
        """The same payloads as one Arrow binary column (no Python object per row)."""
        starts = self.starts[rows] + skip
        lengths = self.lengths[rows] - skip
        offsets = np.zeros(len(rows) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        if len(rows) == 0:
            return pa.array([], pa.binary())
        index = np.repeat(starts - offsets[:-1], lengths) + np.arange(offsets[-1])
        values = self.bytes[index]
        return pa.Array.from_buffers(pa.large_binary(), len(rows),
                                     [None, pa.py_buffer(offsets), pa.py_buffer(values)])


def confluent_ids(col: Column) -> tuple[np.ndarray, np.ndarray]:
    """(schema id per row, -1 where none; why each framed-less row is not framed: 0 framed or null,
    1 shorter than the framing, 2 another magic byte)."""
    ids = np.full(col.n, -1, np.int64)
    problem = np.zeros(col.n, np.int8)
    present = ~col.null
    short = present & (col.lengths < CONFLUENT_HEADER)
    problem[short] = 1
    rows = np.flatnonzero(present & ~short)
    if len(rows):
        magic = col.byte_at(rows, 0)
        bad = magic != CONFLUENT_MAGIC
        problem[rows[bad]] = 2
        rows = rows[~bad]
        b = [col.byte_at(rows, k).astype(np.int64) for k in range(1, 5)]
        value = (b[0] << 24) | (b[1] << 16) | (b[2] << 8) | b[3]
        ids[rows] = np.where(value >= 1 << 31, value - (1 << 32), value)
    return ids, problem


def framing_reason(col: Column, row: int, problem: int) -> str:
    if problem == 1:
        return (f"{col.lengths[row]} bytes, shorter than the 5-byte schema registry framing (magic "
                f"byte 0 and a 4-byte schema id)")
    return (f"not schema registry framing: magic byte 0x{col.bytes[col.starts[row]]:02x}, not 0x00")


def single_object_fingerprints(col: Column) -> tuple[np.ndarray, np.ndarray]:
    """(the fingerprint per row as uint64, 0 where none; True where the row lacks the C3 01 marker
    or is too short)."""
    prints = np.zeros(col.n, np.uint64)
    present = ~col.null
    bad = present & (col.lengths < SINGLE_OBJECT_HEADER)
    rows = np.flatnonzero(present & ~bad)
    if len(rows):
        marked = (col.byte_at(rows, 0) == 0xC3) & (col.byte_at(rows, 1) == 0x01)
        bad[rows[~marked]] = True
        rows = rows[marked]
        value = np.zeros(len(rows), np.uint64)
        for k in range(8):
            value |= col.byte_at(rows, 2 + k).astype(np.uint64) << np.uint64(8 * k)
        prints[rows] = value
    return prints, bad
