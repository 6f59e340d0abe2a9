"""The type of plain JSON values inferred from the data (`--value-format json` without a schema): the
struct that holds every value of a sample, merged as Spark's JSON schema inference merges them.

The sample is the first values of the topic (kfmt.rows.typed: 1000, on the driver, once per run), so
every task of a job writes the same table type. Values are then parsed in bulk with that type as the
explicit schema of pyarrow's JSON reader (plugins/values/json_values.py), strictly: a value with a
field the sample never showed, or a field of another type, does not fit and goes to the dead letters
with the reason, rather than losing its field.

| the sample's values | the column |
| --- | --- |
| objects | struct of every field seen, in the order first seen |
| `true`/`false`, integers, other numbers, strings | bool, int64, float64, string |
| arrays | list of the merged element type |
| integers and other numbers in one field | float64 |
| a field only ever null | string |
| a field whose values disagree otherwise (a string here, an object there) | its JSON text |

A value that is not an object where most are (a JSON string or array among objects) does not fit either.
A topic whose sampled values are mostly not objects (JSON strings, arrays) keeps the checked JSON text,
as `json` with `schema=text` does.
"""
from __future__ import annotations

import json

import pyarrow as pa

from kfmt.default_plugins.values.json_values import JSON_TEXT

_UNKNOWN = pa.null()  # nothing but nulls seen so far


def infer_struct(sample: pa.Array) -> pa.StructType | None:
    """The struct of the sample's JSON objects, or None when at most half of its JSON values are
    objects (or they have no fields)."""
    merged, objects, others = _UNKNOWN, 0, 0
    for payload in sample.to_pylist():  # on the driver, over the sample only
        if payload is None:
            continue
        try:
            value = json.loads(payload)
        except ValueError:
            continue  # a value that is not JSON: a dead letter when decoded
        if isinstance(value, dict):
            objects += 1
            merged = _merge(merged, _type_of(value))
        else:
            others += 1  # a string or array among objects: a dead letter when decoded
    if objects <= others or not pa.types.is_struct(merged) or merged.num_fields == 0:
        return None
    return _settled(merged)


def _type_of(value) -> pa.DataType:
    if value is None:
        return _UNKNOWN
    if isinstance(value, bool):
        return pa.bool_()
    if isinstance(value, int):
        return pa.int64() if -2**63 <= value < 2**63 else pa.float64()
    if isinstance(value, float):
        return pa.float64()
    if isinstance(value, str):
        return pa.string()
    if isinstance(value, list):
        element = _UNKNOWN
        for item in value:
            element = _merge(element, _type_of(item))
        return pa.list_(element)
    return pa.struct([pa.field(k, _type_of(v)) for k, v in value.items()])


def _merge(a: pa.DataType, b: pa.DataType) -> pa.DataType:
    if a == _UNKNOWN:
        return b
    if b == _UNKNOWN or a == b:
        return a
    if {a, b} == {pa.int64(), pa.float64()}:
        return pa.float64()
    if pa.types.is_struct(a) and pa.types.is_struct(b):
        fields = {f.name: f.type for f in a}
        for f in b:
            fields[f.name] = _merge(fields.get(f.name, _UNKNOWN), f.type)
        return pa.struct([pa.field(n, t) for n, t in fields.items()])
    if pa.types.is_list(a) and pa.types.is_list(b):
        return pa.list_(_merge(a.value_type, b.value_type))
    return JSON_TEXT


def _settled(t: pa.DataType) -> pa.DataType:
    """The inferred type with what the sample left open decided: only nulls seen, a string."""
    if t == _UNKNOWN:
        return pa.string()
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _settled(f.type)) for f in t])
    if pa.types.is_list(t):
        return pa.list_(_settled(t.value_type))
    return t
