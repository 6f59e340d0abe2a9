"""Uncompressed v2 data batches given a codec, many at a time, without decoding their records.

A v2 batch's records section is compressed as one block (docs/format.md §4.1): compressing a batch
changes its attributes' codec bits, its records section, its batchLength and its CRC-32C, and nothing
else. So the uncompressed batches the run kernels make (kfmt.format.legacy_runs: Kafka 4.0's
conversion of legacy messages) become the batches the v2 format plugin's encode would write with that
codec by compressing each records section as it lies, with one codec call per batch and no record
made into a column (kfmt recompress of old one-message entries: hundreds of thousands per GB).
"""
from __future__ import annotations

import struct

import numpy as np

from kfmt.format.wire import crc32c
from kfmt.plugin import registry

_ATTRIBUTES_AT = 21  # the CRC covers the batch from its attributes on
_RECORDS_AT = 61  # the records section follows the fixed header
_LENGTH_COVERS_FROM = 12  # batchLength counts the bytes after itself
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")


def compressed(entries, rows: np.ndarray, codec: int, level: int | None = None) -> tuple[bytes, np.ndarray]:
    """(the batches, their rows of frames) for uncompressed v2 data batches (`rows`, kfmt.format.frames,
    consecutive, and their concatenated bytes `entries`) with their records compressed by `codec`
    at `level` (None: the codec's default), as the v2 format plugin's encode writes them. Positions
    start where the input's do."""
    compress = registry.get().compression_for(codec, 2).compress
    view = memoryview(entries)
    first = int(rows["position"][0])
    out = bytearray()
    sizes = np.empty(len(rows), np.int64)
    crcs = np.empty(len(rows), np.uint32)
    for i, (position, size) in enumerate(zip(rows["position"].tolist(), rows["size"].tolist())):
        entry = view[position - first:position - first + size]
        (attributes,) = _INT16.unpack_from(entry, _ATTRIBUTES_AT)
        after_crc = bytearray(_INT16.pack(attributes | codec))
        after_crc += entry[_ATTRIBUTES_AT + 2:_RECORDS_AT]
        after_crc += compress(entry[_RECORDS_AT:], magic=2, level=level)
        crc = crc32c(after_crc)
        out += entry[:8]  # baseOffset
        out += _INT32.pack(len(after_crc) + _ATTRIBUTES_AT - _LENGTH_COVERS_FROM)
        out += entry[_LENGTH_COVERS_FROM:17]  # partitionLeaderEpoch, magic
        out += _UINT32.pack(crc)
        out += after_crc
        sizes[i] = len(after_crc) + _ATTRIBUTES_AT
        crcs[i] = crc
    new = rows.copy()
    new["size"] = sizes
    new["position"] = first + np.concatenate(([0], np.cumsum(sizes)[:-1]))
    new["crc"] = crcs
    new["attributes"] |= codec
    new["compression"] = codec
    return bytes(out), new
