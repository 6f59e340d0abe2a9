"""Avro schemas as Arrow types, the way Spark's `from_avro` maps them (SchemaConverters.toSqlType):

| Avro | Arrow |
| --- | --- |
| null, boolean, int, long, float, double | null, bool, int32, int64, float32, float64 |
| bytes, fixed | binary |
| string, enum | string (an enum value is its symbol) |
| record | struct, the fields in the schema's order |
| array, map | list, map<string, T> |
| [null, T] (either order) | T, nullable |
| any other union | struct of its non-null branches `member0`, `member1`, ... (one set per row) |
| decimal (bytes or fixed) | decimal128(precision, scale) (decimal256 above 38 digits) |
| date | date32 |
| time-millis, time-micros | time32(ms), time64(us) |
| timestamp-millis, timestamp-micros | timestamp(us, UTC) (Spark's and Iceberg's timestamptz) |
| local-timestamp-millis, local-timestamp-micros | timestamp(us) (timestamp_ntz) |
| uuid | string |

Every field is nullable in Arrow: one table holds all versions of a schema, and a record written with
an older one has no value for a field added later.

`parse` resolves named types (a record, enum or fixed used again by name, in its namespace) and the
named types of referenced schemas (the registry's references: Avro types defined in another
subject), and gives a tree of Node that the decoder walks (plugins/values/avro_decode.py).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

import pyarrow as pa

PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")
_PRIMITIVE_TYPES = {"null": pa.null(), "boolean": pa.bool_(), "int": pa.int32(), "long": pa.int64(),
                    "float": pa.float32(), "double": pa.float64(), "bytes": pa.binary(),
                    "string": pa.string()}
TIMESTAMP = pa.timestamp("us", tz="UTC")
LOCAL_TIMESTAMP = pa.timestamp("us")


class AvroSchemaError(ValueError):
    pass


@dataclass
class Node:
    """One type of a parsed schema: `kind` is the Avro type (a primitive, record, enum, array, map,
    fixed, union) and `logical` its logical type, if any and understood."""

    kind: str
    arrow: pa.DataType = None
    logical: str | None = None
    children: list = field(default_factory=list)  # record fields, array items, map values, union branches
    names: list = field(default_factory=list)  # record field names, enum symbols
    size: int = 0  # fixed
    scale: int = 0  # decimal
    null_branch: int = -1  # union: the index of its null branch
    name: str | None = None  # a named type's full name
    defaults: list = field(default_factory=list)  # record: each field's JSON default, or NO_DEFAULT


NO_DEFAULT = object()  # a record field declared without "default"


def parse(text: str, references: list[str] = ()) -> Node:
    """The Node tree of schema `text`; `references`: the texts of the schemas it references (their
    named types are known to it), each after those it references itself."""
    named: dict[str, Node] = {}
    for ref in references:
        _Parser(named).node(_loads(ref), None)
    return _Parser(named).node(_loads(text), None)


def _loads(text: str):
    try:
        return json.loads(text)
    except ValueError as err:
        raise AvroSchemaError(f"not an Avro schema (not JSON: {err})") from None


class _Parser:
    def __init__(self, named: dict):
        self.named = named

    def node(self, schema, namespace: str | None) -> Node:
        if isinstance(schema, str):
            return self._name(schema, namespace)
        if isinstance(schema, list):
            return self._union(schema, namespace)
        if not isinstance(schema, dict) or "type" not in schema:
            raise AvroSchemaError(f"not an Avro schema: {schema!r}")
        kind = schema["type"]
        if isinstance(kind, (dict, list)) or (kind not in ("record", "error", "enum", "fixed", "array", "map")
                                              and kind not in PRIMITIVES):
            return self.node(kind, namespace) if not isinstance(kind, str) else self._name(kind, namespace)
        logical = schema.get("logicalType")
        if kind in ("record", "error"):
            return self._record(schema, namespace)
        if kind == "enum":
            node = Node("enum", pa.string(), names=list(schema["symbols"]))
            return self._define(node, schema, namespace)
        if kind == "fixed":
            node = Node("fixed", pa.binary(), size=int(schema["size"]))
            node = _logical(node, logical, schema)
            return self._define(node, schema, namespace)
        if kind == "array":
            items = self.node(schema["items"], namespace)
            return Node("array", pa.list_(items.arrow), children=[items])
        if kind == "map":
            values = self.node(schema["values"], namespace)
            return Node("map", pa.map_(pa.string(), values.arrow), children=[values])
        return _logical(Node(kind, _PRIMITIVE_TYPES[kind]), logical, schema)

    def _name(self, name: str, namespace: str | None) -> Node:
        if name in PRIMITIVES:
            return Node(name, _PRIMITIVE_TYPES[name])
        full = name if "." in name or not namespace else f"{namespace}.{name}"
        found = self.named.get(full) or self.named.get(name)
        if found is None:
            raise AvroSchemaError(f"unknown Avro type {name!r}")
        return found

    def _define(self, node: Node, schema: dict, namespace: str | None) -> Node:
        name = schema["name"]
        space = schema.get("namespace", namespace)
        node.name = name if "." in name or not space else f"{space}.{name}"
        self.named[node.name] = node
        return node

    def _record(self, schema: dict, namespace: str | None) -> Node:
        node = self._define(Node("record"), schema, namespace)  # before its fields: they may recurse
        space = node.name.rpartition(".")[0] or None
        for f in schema.get("fields", []):
            node.names.append(f["name"])
            node.children.append(self.node(f["type"], space))
            node.defaults.append(f.get("default", NO_DEFAULT))
        if not node.children:
            raise AvroSchemaError(f"record {node.name} has no fields (Spark and Parquet need one)")
        node.arrow = pa.struct([pa.field(n, c.arrow) for n, c in zip(node.names, node.children)])
        return node

    def _union(self, branches: list, namespace: str | None) -> Node:
        children = [self.node(b, namespace) for b in branches]
        _check_branches(branches, children)
        nulls = [i for i, c in enumerate(children) if c.kind == "null"]
        node = Node("union", children=children, null_branch=nulls[0] if nulls else -1)
        others = [c for c in children if c.kind != "null"]
        if len(others) == 1:
            node.arrow = others[0].arrow
        elif not others:
            node.arrow = pa.null()
        else:
            node.arrow = pa.struct([pa.field(f"member{i}", c.arrow) for i, c in enumerate(others)])
        return node


def _check_branches(branches: list, children: list):
    """The Avro specification's rules for a union: no union directly inside it, and at most one
    branch of each unnamed type (primitives, with or without a logical type, arrays, maps) and of
    each name (records, enums, fixed). Java's Schema.UnionSchema refuses the same ("Duplicate in
    union"); fastavro accepts such a union, but a datum of it says nothing a table can hold apart."""
    seen = set()
    for branch, child in zip(branches, children):
        if isinstance(branch, list):
            raise AvroSchemaError("a union directly inside a union (the Avro specification forbids it)")
        key = child.name or child.kind
        if key in seen:
            raise AvroSchemaError(f"a union with two {key} branches (the Avro specification allows "
                                  f"one branch per unnamed type or name)")
        seen.add(key)


def _logical(node: Node, logical: str | None, schema: dict) -> Node:
    """The node with its logical type, where it is one this mapping knows on this Avro type (an
    unknown or misplaced logical type is ignored, as the Avro specification says)."""
    if logical == "decimal" and node.kind in ("bytes", "fixed"):
        precision, scale = int(schema.get("precision", 0)), int(schema.get("scale", 0))
        if precision <= 0 or not 0 <= scale <= precision:
            return node
        node.logical, node.scale = "decimal", scale
        node.arrow = pa.decimal128(precision, scale) if precision <= 38 else pa.decimal256(precision, scale)
        return node
    mapped = {("int", "date"): pa.date32(), ("int", "time-millis"): pa.time32("ms"),
              ("long", "time-micros"): pa.time64("us"), ("long", "timestamp-millis"): TIMESTAMP,
              ("long", "timestamp-micros"): TIMESTAMP, ("long", "local-timestamp-millis"): LOCAL_TIMESTAMP,
              ("long", "local-timestamp-micros"): LOCAL_TIMESTAMP, ("string", "uuid"): pa.string()}
    arrow = mapped.get((node.kind, logical))
    if arrow is not None:
        node.logical, node.arrow = logical, arrow
    return node
