"""Uncompressed v2 data batches given a codec, many at a time, without decoding their records.

A v2 batch's records section is compressed as one block (docs/format.md §4.1): compressing a batch
changes its attributes' codec bits, its records section, its batchLength and its CRC-32C, and nothing
else. So the uncompressed batches the run kernels make (kfmt.format.legacy_runs: Kafka 4.0's
conversion of legacy messages) become the batches the v2 format plugin's encode would write with that
codec by compressing each records section as it lies, with one codec call per batch and no record
made into a column (kfmt recompress of old one-message entries: hundreds of thousands per GB).
"""
from __future__ import annotations

import numpy as np

from kfmt.format.layout import MAGIC_V2, V2_BATCH
from kfmt.format.wire import INT16, INT32, UINT32, crc32c
from kfmt.plugin import registry

_ATTRIBUTES_AT = V2_BATCH.at("attributes")  # the CRC covers the batch from its attributes on
_AFTER_ATTRIBUTES = V2_BATCH.at("lastOffsetDelta")
_RECORDS_AT = V2_BATCH.at("records")  # the records section follows the fixed header
_LENGTH_AT = V2_BATCH.at("batchLength")
_LENGTH_COVERS_FROM = V2_BATCH.at("partitionLeaderEpoch")  # batchLength counts the bytes after itself
_CRC_AT = V2_BATCH.at("crc")


def compressed(entries, rows: np.ndarray, codec: int, level: int | None = None) -> tuple[bytes, np.ndarray]:
    """(the batches, their rows of frames) for uncompressed v2 data batches (`rows`, kfmt.format.frames,
    consecutive, and their concatenated bytes `entries`) with their records compressed by `codec`
    at `level` (None: the codec's default), as the v2 format plugin's encode writes them. Positions
    start where the input's do."""
    compress = registry.get().compression_for(codec, MAGIC_V2).compress
    view = memoryview(entries)
    first = int(rows["position"][0])
    out = bytearray()
    sizes = np.empty(len(rows), np.int64)
    crcs = np.empty(len(rows), np.uint32)
    for i, (position, size) in enumerate(zip(rows["position"].tolist(), rows["size"].tolist())):
        entry = view[position - first:position - first + size]
        (attributes,) = INT16.unpack_from(entry, _ATTRIBUTES_AT)
        after_crc = bytearray(INT16.pack(attributes | codec))
        after_crc += entry[_AFTER_ATTRIBUTES:_RECORDS_AT]
        after_crc += compress(entry[_RECORDS_AT:], magic=MAGIC_V2, level=level)
        crc = crc32c(after_crc)
        out += entry[:_LENGTH_AT]  # baseOffset
        out += INT32.pack(len(after_crc) + _ATTRIBUTES_AT - _LENGTH_COVERS_FROM)
        out += entry[_LENGTH_COVERS_FROM:_CRC_AT]  # partitionLeaderEpoch, magic
        out += UINT32.pack(crc)
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
