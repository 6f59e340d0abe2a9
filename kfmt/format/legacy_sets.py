"""Legacy (v0/v1) entries decoded and encoded by the compiled kernels (kfmt/csrc/legacy.c): an
uncompressed message, or a compressed wrapper's inner message set, straight into record columns with
their per-message facts as numpy rows (`LegacyInfos`); records into messages.

The legacy format plugin (plugins/formats/legacy.py: LegacyFormat, whose Python code is the
reference and raises every error) asks here first. Each function returns None wherever that code
must decide: no kernels (KFMT_PURE_PYTHON=1, or not built), or anything the kernel is not sure of.
tests/format/test_speedups.py holds the two together.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from kfmt.format.kernels import native
from kfmt.format.layout import ATTR_LOG_APPEND_TIME, CODEC_MASK, LEGACY_ATTRIBUTES_AT, MAGIC_V1
from kfmt.format.message_formats import ReadOptions
from kfmt.format.model import Batch, BatchHeader, LegacyMessageInfo
from kfmt.plugin import registry

if TYPE_CHECKING:
    import pyarrow as pa


def _info_dtype() -> np.dtype:
    fields = [("stored_timestamp", np.int64), ("crc", np.uint32), ("magic", np.int8),
              ("attributes", np.int8), ("crc_valid", np.uint8)]
    if native is None:
        return np.dtype(fields, align=True)
    itemsize, layout = native.message_info_layout()  # the C struct the kernel writes
    return np.dtype({"names": [n for n, _ in fields], "formats": [t for _, t in fields],
                     "offsets": [offset for _, offset in layout], "itemsize": itemsize}, align=True)


LEGACY_INFO_DTYPE = _info_dtype()


class LegacyInfos(Sequence):
    """`Batch.legacy` of a natively decoded batch: the per-message facts as numpy rows, each
    LegacyMessageInfo made when asked for (a list of them would be one Python object per record)."""

    __slots__ = ("rows",)

    def __init__(self, rows: bytes | np.ndarray):
        self.rows = rows if isinstance(rows, np.ndarray) else np.frombuffer(rows, LEGACY_INFO_DTYPE)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        return _info(self.rows[i].item())

    def __iter__(self):
        return map(_info, self.rows.tolist())

    def __eq__(self, other) -> bool:
        if isinstance(other, Sequence):
            return list(self) == list(other)
        return NotImplemented

    def __repr__(self) -> str:
        return f"LegacyInfos({list(self)!r})"


def _info(row: tuple) -> LegacyMessageInfo:
    stored_timestamp, crc, magic, attributes, crc_valid = row
    return LegacyMessageInfo(magic, attributes, crc, bool(crc_valid), stored_timestamp)


def decode_entry(entry, header: BatchHeader, options: ReadOptions) -> Batch | None:
    """The Batch of one legacy entry (an uncompressed message, or a compressed wrapper with its inner
    set inflated), or None where the format plugin's code decides."""
    if native is None:
        return None
    if len(entry) > LEGACY_ATTRIBUTES_AT and not entry[LEGACY_ATTRIBUTES_AT] & CODEC_MASK:
        decoded = native.decode_legacy_set(entry, None, 0, None, options.check_crc)
        if decoded is not NotImplemented:
            records, infos = decoded
            legacy = LegacyInfos(infos)
            return Batch(header=header, records=records, legacy=legacy,
                         crc_valid=bool(legacy.rows["crc_valid"][0]))
    return _decode_wrapper(entry, header, options)


def _decode_wrapper(entry, header: BatchHeader, options: ReadOptions) -> Batch | None:
    """A compressed wrapper: its facts read in place (its value is not copied), its inner set
    straight into columns."""
    facts = native.legacy_wrapper(entry)
    if facts is NotImplemented:
        return None
    offset, magic, attributes, _crc, crc_valid, timestamp, value_at, value_len = facts
    codec_id = attributes & CODEC_MASK
    if not codec_id or value_len < 0 or (not crc_valid and options.check_crc):
        return None
    codec = registry.get().compression_for(codec_id, magic)
    data = codec.decompress(entry[value_at:value_at + value_len], magic=magic,
                            max_size=options.max_decompressed)
    lat = magic == MAGIC_V1 and attributes & ATTR_LOG_APPEND_TIME
    decoded = native.decode_legacy_set(data, offset, magic, timestamp if lat else None, options.check_crc)
    if decoded is NotImplemented:
        return None
    records, infos = decoded
    return Batch(header=_decoded(header, records.column(0)[0].as_py(), records.num_rows),
                 records=records, legacy=LegacyInfos(infos), crc_valid=crc_valid)


_HEADER_FIELDS = tuple(f.name for f in dataclasses.fields(BatchHeader))


def _decoded(header: BatchHeader, base_offset: int, count: int) -> BatchHeader:
    """header.replace(base_offset=..., records_count=...), without dataclasses.replace's cost."""
    decoded = BatchHeader(*(getattr(header, name) for name in _HEADER_FIELDS))
    decoded.base_offset, decoded.records_count = base_offset, count
    return decoded


def encode_messages(records: pa.RecordBatch, magic: int, base: int, log_append_time: int | None) -> bytes | None:
    """Uncompressed messages of `magic` for `records` (offsets relative to `base`: a v1 wrapper's
    inner messages), or None where the format plugin's code decides (it raises for headers and
    impossible offsets)."""
    if native is None:
        return None
    messages = native.encode_legacy_messages(records, magic, base, log_append_time)
    return None if messages is NotImplemented else messages
