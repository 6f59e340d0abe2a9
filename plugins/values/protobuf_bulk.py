"""Protobuf values decoded in bulk: a chunk's payloads go as one Arrow binary column through ptars
(Rust: prost-reflect parses each message straight into Arrow builders), and its columns are brought to
the reference's mapping (protobuf_values.py, Spark's from_protobuf) with Arrow compute, never one
Python call per record:

* a proto3 field without presence holding its default (0, "", b"", false, the enum's first value,
  an empty repeated field or map) is null, as ListFields() leaves it out of the reference's dict;
  -0.0 is not the default (its bits differ; the wire carries it);
* uint32 -> int64, uint64 -> decimal128(20, 0);
* fields in field-number order.

ptars already maps enums to their names (an unknown number to its digits), Timestamp / Duration to
microseconds, the wrappers to nullable values. A message holding a type the reference keeps as JSON
text (Struct, Value, ListValue, Any, Empty) or a group is left to the reference (bulk_supported).

A chunk ptars refuses is split in halves until the refused payloads are alone; those, and payloads
whose message-index array is not the common one-byte form, go to the reference, which gives their
values or its exact reason. The rest of the chunk stays in bulk.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kfmt.default_plugins.values.protobuf_values import _JSON_TEXT, _WRAPPERS, _is_map, _repeated

_SPECIAL = ("google.protobuf.Timestamp", "google.protobuf.Duration", *_WRAPPERS)


def ptars_available() -> bool:
    try:
        import ptars  # noqa: F401
    except ImportError:
        return False
    return True


def bulk_supported(desc, seen: tuple = ()) -> bool:
    """Whether every type under `desc` has the same mapping in ptars after conform()."""
    from google.protobuf.descriptor import FieldDescriptor as F

    if desc.full_name in _JSON_TEXT:
        return False
    if desc.full_name in _SPECIAL or desc.full_name in seen:
        return True
    for field in desc.fields:
        if field.type == F.TYPE_GROUP:
            return False
        if field.message_type is not None and not bulk_supported(field.message_type, seen + (desc.full_name,)):
            return False
    return True


class BulkProtobuf:
    """One compiled schema's messages decoded by ptars (handlers made once per message)."""

    def __init__(self, proto):
        import ptars

        self.proto = proto
        config = ptars.PtarsConfig(timestamp_unit="us", duration_unit="us", enum_repr="string",
                                   list_value_nullable=True, map_value_nullable=True)
        self.pool = ptars.HandlerPool([proto.file], config)
        self.target = proto.message or proto.messages[0]
        self.supported = bulk_supported(self.target)

    def decode_rows(self, col, rows: np.ndarray, skip: int) -> tuple[pa.Array, list[tuple[int, str]]]:
        """The reference's (column, [(index, reason)]) for the payloads of `rows` after `skip` bytes."""
        # the message-index array of the table's message in its one-byte forms: 0 (the first
        # top-level message) or 2, 2i (count 1, index i < 64), zig-zag varints (protobuf_values)
        position = self.proto.messages.index(self.target) if self.target in self.proto.messages else -1
        long = col.lengths[rows] > skip
        first = np.where(long, col.bytes[np.minimum(col.starts[rows] + skip, max(len(col.bytes) - 1, 0))], 255)
        if position == 0:
            bulk, at = long & (first == 0), 1
        else:
            second = np.where(col.lengths[rows] > skip + 1,
                              col.bytes[np.minimum(col.starts[rows] + skip + 1, max(len(col.bytes) - 1, 0))], 255)
            bulk, at = long & (first == 2) & (second == 2 * position) & (position > 0), 2
        good = np.flatnonzero(bulk)
        values, refused = self._parse(col.payload_array(rows[good], skip + at).cast(pa.binary()))
        slow = np.sort(np.concatenate([np.flatnonzero(~bulk), good[refused]]))
        if len(slow) == 0:
            return values, []
        return self._with_reference(col, rows, skip, good, refused, values, slow)

    def _with_reference(self, col, rows, skip, good, refused, values, slow):
        ref_values, ref_failed = self.proto.decode(col.payloads(rows[slow], skip))
        kept = np.setdiff1d(np.arange(len(good)), refused)
        index = np.empty(len(rows), np.int64)
        index[good[kept]] = np.arange(len(kept))
        index[slow] = len(kept) + np.arange(len(slow))
        whole = pa.concat_arrays([values.filter(pa.array(np.isin(np.arange(len(good)), kept))),
                                  ref_values.cast(values.type)])
        return whole.take(pa.array(index)), [(int(slow[i]), reason) for i, reason in ref_failed]

    def _parse(self, payloads: pa.Array) -> tuple[pa.Array, np.ndarray]:
        """(a struct column of the payloads ptars parses, null where it refuses one; the refused)."""
        handler = self.pool.get_for_message(self.target)
        pieces, refused, stack = [], [], [(0, len(payloads))]
        while stack:
            start, stop = stack.pop()
            try:
                batch = handler.array_to_record_batch(payloads.slice(start, stop - start))
                pieces.append((start, conform_message(pa.StructArray.from_arrays(
                    batch.columns, fields=list(batch.schema)), self.target)))
            except ValueError:
                if stop - start == 1:
                    refused.append(start)
                    pieces.append((start, pa.nulls(1, self.proto.arrow)))
                else:
                    middle = (start + stop) // 2
                    stack += [(middle, stop), (start, middle)]
        pieces.sort(key=lambda p: p[0])
        arrays = [p[1] for p in pieces] or [pa.array([], self.proto.arrow)]
        return pa.concat_arrays(arrays), np.array(refused, np.int64)


def conform_message(array: pa.StructArray, desc) -> pa.StructArray:
    """ptars' struct for message `desc` made the reference's (field order, defaults, types)."""
    if desc.full_name in _SPECIAL:
        return array
    fields = sorted(desc.fields, key=lambda f: f.number)
    children = [_conform_field(array.field(f.name), f) for f in fields]
    return pa.StructArray.from_arrays(children, names=[f.name for f in fields], mask=array.is_null())


def _conform_field(child: pa.Array, field) -> pa.Array:
    if _is_map(field):
        entry = field.message_type
        keys = _conform_scalar(child.keys, entry.fields_by_name["key"])
        items = _conform_scalar(child.items, entry.fields_by_name["value"])
        empty = _empty(child)
        return pa.MapArray.from_arrays(child.offsets, keys, items, mask=empty)
    if _repeated(field):
        items = _conform_scalar(child.values, field)
        empty = _empty(child)
        return pa.ListArray.from_arrays(child.offsets, items, mask=empty)
    value = _conform_scalar(child, field)
    if field.message_type is not None or field.has_presence:
        return value
    return _null_at_default(value, field)


def _empty(child: pa.Array) -> pa.Array:
    """Where a list or map is null or has no entries (the reference's None: not in ListFields)."""
    sizes = np.diff(np.asarray(child.offsets.to_numpy()))
    return pc.or_kleene(child.is_null(), pa.array(sizes == 0))


def _conform_scalar(child: pa.Array, field) -> pa.Array:
    """Values of a field (or of a list's items, a map's keys or values) as the reference types them;
    ptars gives a wrapper as its nullable value already."""
    message = field.message_type
    if message is not None and message.full_name in _WRAPPERS:
        return _conform_type(child, message.fields_by_name["value"])
    if message is not None:
        return conform_message(child, message)
    return _conform_type(child, field)


def _conform_type(child: pa.Array, field) -> pa.Array:
    from google.protobuf.descriptor import FieldDescriptor as F

    if field.type in (F.TYPE_UINT32, F.TYPE_FIXED32):
        return child.cast(pa.int64())
    if field.type in (F.TYPE_UINT64, F.TYPE_FIXED64):
        return child.cast(pa.decimal128(20, 0))
    return child


def _null_at_default(value: pa.Array, field) -> pa.Array:
    """Null where a field without presence holds its default (the wire cannot tell it from unset)."""
    t = value.type
    if field.enum_type is not None:  # proto3: the value numbered 0, by its name
        zero = field.enum_type.values_by_number.get(0)
        name = zero.name if zero is not None else "0"
        return pc.if_else(pc.equal(value, name), pa.nulls(len(value), t), value)
    if pa.types.is_floating(t):
        bits = np.asarray(value.fill_null(1).to_numpy(zero_copy_only=False))
        default = bits.view(np.int32 if t == pa.float32() else np.int64) == 0
        return pc.if_else(pa.array(default), pa.nulls(len(value), t), value)
    if pa.types.is_string(t) or pa.types.is_binary(t):
        default = pc.equal(pc.binary_length(value), 0)
    elif pa.types.is_boolean(t):
        default = pc.invert(value)
    else:
        default = pc.equal(value, pa.scalar(0, t))
    return pc.if_else(default, pa.nulls(len(value), t), value)
