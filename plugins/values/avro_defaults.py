"""Reader defaults (the Avro specification's "Schema Resolution": a field the reader's record has and
the writer's lacks takes the reader's default) for a table that holds every version of a subject.

The reader is the newest version: for each field of the table type, the default the newest version
declaring the field gives it (a field no version gives a default stays null, as before: Avro would
refuse such a read, a table holds the row). The default is kept as Avro binary, the JSON default
encoded by the field's schema, so that the pure-Python reference (avro_decode's reader, then
evolution.conform) and the compiled program (an op that decodes these bytes instead of the datum's)
read it the same way as any datum.

JSON defaults by type (the specification's table): null, a boolean, an integer (int, long), a number
(float, double), a string (string; an enum's symbol; bytes and fixed as code points 0-255, one byte
each), an object (a record, by field name, a missing field taking its own default; a map), an
array, and for a union the value of its first branch (Avro 1.12 accepts any branch the value fits:
the first that fits is taken, an integer's own int or long branch before a float or double one).

Paths name places in the table type: struct field names, "[]" for list items, "{}" for map values;
a [null, T] union is T itself, another union's branches are its members' names.
"""
from __future__ import annotations

import struct

import pyarrow as pa

from kfmt.default_plugins.values.avro_types import NO_DEFAULT, AvroSchemaError, Node


class Default:
    """One field's default: the schema id and node that declare it, its Avro binary encoding, and
    (`array`) the value as a one-element array of the table's type at its path."""

    def __init__(self, schema_id: int, node: Node, encoded: bytes):
        self.schema_id, self.node, self.encoded = schema_id, node, encoded
        self.array = None

    def read(self, arrow: pa.DataType) -> pa.Array:
        """The default read by the reference decoder, as `arrow` (the table's type at its path)."""
        from kfmt.default_plugins.values.avro_decode import decode_datums
        from kfmt.default_plugins.values.evolution import conform

        column, failed = decode_datums(self.node, [self.encoded])
        if failed:
            raise AvroSchemaError(f"schema id {self.schema_id}: a default that does not fit: {failed[0][1]}")
        return conform(column, arrow)


def table_defaults(versions: list[tuple[int, Node]], table: pa.DataType) -> dict[tuple, Default]:
    """path -> Default for the fields of a subject's versions (oldest first; the newest declaring a
    field wins), each read as the table type `table` holds it there."""
    found: dict[tuple, Default] = {}
    for schema_id, node in versions:
        _collect(schema_id, node, (), found, ())
    for path, default in found.items():
        try:
            default.array = default.read(arrow_at(table, path))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError) as err:
            raise AvroSchemaError(f"schema id {default.schema_id}: field {'.'.join(path)}: its default "
                                  f"does not fit the table's type ({err})") from None
    return found


def arrow_at(arrow: pa.DataType, path: tuple) -> pa.DataType:
    """The type at `path` of a table type."""
    for step in path:
        if step == "[]":
            arrow = arrow.value_type
        elif step == "{}":
            arrow = arrow.item_type
        else:
            arrow = arrow.field(step).type
    return arrow


def _collect(schema_id: int, node: Node, path: tuple, found: dict, seen: tuple):
    if any(node is s for s in seen) or len(seen) > 32:
        return  # a recursive type: its defaults below the first level are not used
    seen = seen + (node,)
    if node.kind == "record":
        for name, child, default in zip(node.names, node.children, node.defaults):
            where = path + (name,)
            if default is not NO_DEFAULT:
                try:
                    found[where] = Default(schema_id, child, encode(child, default))
                except AvroSchemaError as err:
                    raise AvroSchemaError(f"schema id {schema_id}: field {'.'.join(where)}: {err}") from None
            _collect(schema_id, child, where, found, seen)
    elif node.kind in ("array", "map"):
        _collect(schema_id, node.children[0], path + ("[]" if node.kind == "array" else "{}",), found, seen)
    elif node.kind == "union":
        others = [c for c in node.children if c.kind != "null"]
        for k, child in enumerate(others):
            _collect(schema_id, child, path if len(others) == 1 else path + (f"member{k}",), found, seen)


def encode(node: Node, value) -> bytes:
    """The JSON default `value` as the Avro binary datum of `node`."""
    out = bytearray()
    _encode(node, value, out)
    return bytes(out)


def _encode(node: Node, value, out: bytearray):
    kind = node.kind
    if kind == "union":
        return _encode_union(node, value, out)
    if kind == "record":
        if not isinstance(value, dict):
            raise _mismatch(node, value)
        for name, child, default in zip(node.names, node.children, node.defaults):
            field_value = value.get(name, default)
            if field_value is NO_DEFAULT:
                raise AvroSchemaError(f"the default {value!r} lacks field {name}, which has no default")
            _encode(child, field_value, out)
        return
    if kind in ("array", "map"):
        if not isinstance(value, list if kind == "array" else dict):
            raise _mismatch(node, value)
        if value:
            _varint(len(value), out)
            for item in value:
                if kind == "map":
                    _encode(Node("string"), item, out)
                    item = value[item]
                _encode(node.children[0], item, out)
        _varint(0, out)
        return
    _encode_primitive(node, value, out)


def _encode_union(node: Node, value, out: bytearray):
    # a JSON integer goes to an int or long branch before a float or double one, as Java's
    # GenericData.resolveUnion and fastavro pick a branch by the value's own type; else the first that fits
    exact = ("int", "long") if isinstance(value, int) and not isinstance(value, bool) else ()
    order = sorted(enumerate(node.children), key=lambda b: b[1].kind not in exact)
    for i, branch in order:
        attempt = bytearray()
        try:
            _encode(branch, value, attempt)
        except AvroSchemaError:
            continue
        _varint(i, out)
        out += attempt
        return
    raise _mismatch(node, value)


def _encode_primitive(node: Node, value, out: bytearray):
    kind = node.kind
    if kind == "null" and value is None:
        return
    if kind == "boolean" and isinstance(value, bool):
        out.append(1 if value else 0)
    elif kind in ("int", "long") and isinstance(value, int) and not isinstance(value, bool):
        bits = 32 if kind == "int" else 64
        if not -(1 << bits - 1) <= value < 1 << bits - 1:
            raise _mismatch(node, value)
        _varint(value, out)
    elif kind in ("float", "double") and isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            out += struct.pack("<f" if kind == "float" else "<d", value)
        except OverflowError:
            raise _mismatch(node, value) from None
    elif kind == "string" and isinstance(value, str):
        data = value.encode("utf-8")
        _varint(len(data), out)
        out += data
    elif kind == "enum" and value in node.names:
        _varint(node.names.index(value), out)
    elif kind in ("bytes", "fixed") and isinstance(value, str) and all(ord(ch) < 256 for ch in value):
        data = value.encode("latin-1")
        if kind == "fixed" and len(data) != node.size:
            raise _mismatch(node, value)
        if kind == "bytes":
            _varint(len(data), out)
        out += data
    else:
        raise _mismatch(node, value)


def _varint(value: int, out: bytearray):
    """Avro's zig-zag varint."""
    n = (value << 1) ^ (value >> 63)
    n &= (1 << 64) - 1
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _mismatch(node: Node, value) -> AvroSchemaError:
    what = node.name or node.kind
    return AvroSchemaError(f"the default {value!r} is not a {what}"
                           + (" (a union's default is a value of its first branch)" if node.kind == "union" else ""))
