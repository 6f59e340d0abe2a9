"""The Arrow buffers of a table type, as the compiled Avro decoder (kfmt/csrc/avro.c) fills them:
one slot per Arrow array of the type (a struct, list or map and each of its children, a map's keys,
each leaf), numbered in preorder. Every program compiled for the table (one per writer schema,
plugins/values/avro_program.py) writes into the same slots, so the rows of all schema ids of a chunk
come out as one column of the table type, in row order: no take, no cast.

A slot comes back from the kernel as (count, a validity byte per element or None when no element is
null, int32 offsets, value bytes), the buffers memory the kernel filled and hands over without a copy
(objects with the buffer protocol that free it with their last reference); `assemble` builds the
column from them with pyarrow's from_buffers, which keeps them alive as long as the arrays live.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa


@dataclass
class Place:
    """One array of the table type: its slot, type, and the places of its children."""

    slot: int
    arrow: pa.DataType
    fields: dict = field(default_factory=dict)  # a struct's children by name
    item: "Place | None" = None  # a list's items, a map's values
    keys: int = -1  # a map's key slot


class Layout:
    """The slots of a table type, and the tables its programs share (enum symbols, encoded defaults)."""

    def __init__(self, arrow: pa.DataType):
        self.arrow = arrow
        self.slots: list[pa.DataType] = []
        self.root = self._place(arrow)
        self.scratch = self._slot(pa.null())  # where a union's null branch counts; never assembled
        self.symbols: list[bytes] = []
        self.defaults: list[bytes] = []

    def _slot(self, arrow: pa.DataType) -> int:
        self.slots.append(arrow)
        return len(self.slots) - 1

    def _place(self, arrow: pa.DataType) -> Place:
        place = Place(self._slot(arrow), arrow)
        if pa.types.is_struct(arrow):
            place.fields = {f.name: self._place(f.type) for f in arrow}
        elif pa.types.is_map(arrow):
            place.keys = self._slot(pa.string())
            place.item = self._place(arrow.item_type)
        elif pa.types.is_list(arrow):
            place.item = self._place(arrow.value_type)
        return place

    def tables(self) -> tuple[bytes, bytes]:
        """The shared tables as the kernel takes them: (symbols, defaults), each an int32 count, int32
        offsets and the bytes."""
        return _packed(self.symbols), _packed(self.defaults)


def _packed(items: list[bytes]) -> bytes:
    offsets = np.zeros(len(items) + 1, np.int32)
    np.cumsum([len(s) for s in items], out=offsets[1:])
    return np.array([len(items)], np.int32).tobytes() + offsets.tobytes() + b"".join(items)


def assemble(place: Place, buffers: list) -> pa.Array:
    """The column of `place` from the kernel's slots."""
    arrow = place.arrow
    count, valid, offsets, values = buffers[place.slot]
    if pa.types.is_null(arrow):
        return pa.nulls(count)
    validity = _bits(valid, count)
    if pa.types.is_struct(arrow):
        kids = [assemble(child, buffers) for child in place.fields.values()]
        return pa.StructArray.from_buffers(arrow, count, [validity], children=kids)
    if pa.types.is_map(arrow):
        item = assemble(place.item, buffers)
        keys = _leaf(pa.string(), buffers[place.keys])
        entries = pa.StructArray.from_arrays([keys, item], fields=[arrow.key_field, arrow.item_field])
        return pa.MapArray.from_buffers(arrow, count, [validity, pa.py_buffer(offsets)], children=[entries])
    if pa.types.is_list(arrow):
        item = assemble(place.item, buffers)
        return pa.ListArray.from_buffers(arrow, count, [validity, pa.py_buffer(offsets)], children=[item])
    if pa.types.is_boolean(arrow):
        return pa.Array.from_buffers(arrow, count, [validity, _bits(values, count)])
    return _leaf(arrow, buffers[place.slot], validity)


def _leaf(arrow: pa.DataType, buffer: tuple, validity=None) -> pa.Array:
    count, valid, offsets, values = buffer
    if validity is None:
        validity = _bits(valid, count)
    if pa.types.is_string(arrow) or pa.types.is_binary(arrow):
        return pa.Array.from_buffers(arrow, count, [validity, pa.py_buffer(offsets), pa.py_buffer(values)])
    return pa.Array.from_buffers(arrow, count, [validity, pa.py_buffer(values)])


def _bits(flags, count: int):
    if flags is None:  # no element is null: Arrow needs no validity bitmap
        return None
    return pa.py_buffer(np.packbits(np.frombuffer(flags, np.uint8, count), bitorder="little"))
