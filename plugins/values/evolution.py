"""One table type for every version of a schema, and each version's columns brought to it.

`merge` gives the type that holds the values of two versions, by Avro's schema resolution rules
(a reader's record takes the writer's fields by name, and a field the writer lacks is null; int ->
long, float -> double, int/long -> float/double, string <-> bytes) restricted to what Iceberg's schema
evolution allows a table (added optional fields; int -> long, float -> double, a decimal's precision
widened at the same scale): a change that no one table type holds (a field whose type changes
otherwise, a decimal whose scale changes) raises Incompatible.

`conform` casts a column of one version's type to the table type: struct fields matched by name
(a missing one takes the reader's default where one is known, plugins/values/avro_defaults.py, else
null), promotions cast, nested lists and maps alike. Pure Arrow: no Python per row.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_PROMOTIONS = {(pa.int32(), pa.int64()): pa.int64(), (pa.float32(), pa.float64()): pa.float64()}


class Incompatible(ValueError):
    pass


def merge(a: pa.DataType, b: pa.DataType, where: str = "") -> pa.DataType:
    if a == b:
        return a
    if pa.types.is_null(a):
        return b
    if pa.types.is_null(b):
        return a
    for pair in ((a, b), (b, a)):
        if pair in _PROMOTIONS:
            return _PROMOTIONS[pair]
    if pa.types.is_struct(a) and pa.types.is_struct(b):
        return _merge_structs(a, b, where)
    if pa.types.is_list(a) and pa.types.is_list(b):
        return pa.list_(merge(a.value_type, b.value_type, f"{where}[]"))
    if pa.types.is_map(a) and pa.types.is_map(b):
        return pa.map_(a.key_type, merge(a.item_type, b.item_type, f"{where}{{}}"))
    if pa.types.is_decimal(a) and pa.types.is_decimal(b) and a.scale == b.scale:
        precision = max(a.precision, b.precision)
        return pa.decimal128(precision, a.scale) if precision <= 38 else pa.decimal256(precision, a.scale)
    raise Incompatible(f"{where or 'the value'}: {a} and {b}")


def _merge_structs(a: pa.StructType, b: pa.StructType, where: str) -> pa.StructType:
    fields = {a.field(i).name: a.field(i).type for i in range(a.num_fields)}
    for i in range(b.num_fields):
        f = b.field(i)
        path = f"{where}.{f.name}" if where else f.name
        fields[f.name] = merge(fields[f.name], f.type, path) if f.name in fields else f.type
    return pa.struct([pa.field(name, t) for name, t in fields.items()])


def conform(column: pa.Array, target: pa.DataType, defaults: dict | None = None, path: tuple = ()) -> pa.Array:
    """`column` as `target` (a type merge() made from the column's type and others); `defaults`:
    path -> a one-element array of the table's type there, for fields the column lacks."""
    if column.type == target:
        return column
    if pa.types.is_null(column.type):
        return pa.nulls(len(column), target)
    defaults = defaults or {}
    if pa.types.is_struct(target):
        children = []
        for i in range(target.num_fields):
            f = target.field(i)
            index = column.type.get_field_index(f.name)
            if index < 0:
                children.append(_missing(len(column), f.type, defaults.get(path + (f.name,))))
                continue
            children.append(conform(_flat(column.field(index), column), f.type, defaults, path + (f.name,)))
        return pa.StructArray.from_arrays(children, fields=list(target), mask=column.is_null())
    if pa.types.is_list(target):
        offsets, (values,) = _entries(column, column.values)
        return pa.ListArray.from_arrays(offsets, conform(values, target.value_type, defaults, path + ("[]",)),
                                        type=target, mask=column.is_null())
    if pa.types.is_map(target):
        offsets, (keys, items) = _entries(column, column.keys, column.items)
        items = conform(items, target.item_type, defaults, path + ("{}",))
        return pa.MapArray.from_arrays(offsets, conform(keys, target.key_type), items, type=target,
                                       mask=column.is_null())
    return pc.cast(column, target)


def _missing(n: int, arrow: pa.DataType, default: pa.Array | None) -> pa.Array:
    """A field the column's version lacks: its default repeated (Avro's resolution), else null."""
    if default is None:
        return pa.nulls(n, arrow)
    return default.take(pa.array(np.zeros(n, np.int64)))


def _flat(child: pa.Array, parent: pa.StructArray) -> pa.Array:
    """A struct's child with the struct's own offset applied (StructArray.field does not)."""
    if len(child) != len(parent):
        child = child.slice(parent.offset, len(parent))
    return child


def _entries(column, *children) -> tuple[pa.Array, list[pa.Array]]:
    """The offsets of a list or map column from 0, and its children cut to its own entries (a sliced
    column's children hold the entries of the rows around it too)."""
    offsets = column.offsets
    first, last = offsets[0].as_py(), offsets[-1].as_py()
    if first:
        offsets = pc.subtract(offsets, first)
    return offsets, [c.slice(first, last - first) for c in children]
