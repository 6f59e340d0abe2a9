"""Avro binary datums (the Avro specification's binary encoding, no container) decoded into an Arrow
column of the type plugins/values/avro_types.py gives their schema.

Each datum must take exactly its bytes: a datum that ends early, or leaves bytes after its end, fails
alone with the byte position where it went wrong, and the others are decoded (a truncated record is
not read into the next one's bytes: each is decoded within its own bounds).

The decoder is made once per schema (`reader(node)`: one closure per type of the schema, so walking a
datum calls no dispatch on the type) and values go to Arrow in one `pa.array` call per column.
"""
from __future__ import annotations

import decimal
import struct

import pyarrow as pa

from kfmt.default_plugins.values.avro_types import Node

_FLOAT = struct.Struct("<f").unpack_from
_DOUBLE = struct.Struct("<d").unpack_from
_DECIMAL_CONTEXT = decimal.Context(prec=80)


class DatumError(ValueError):
    def __init__(self, message: str, position: int):
        super().__init__(message)
        self.position = position


def _long(b, p):
    """A zig-zag varint (Avro's int and long)."""
    shift = result = 0
    while True:
        if p >= len(b):
            raise DatumError("the datum ends inside a number", p)
        byte = b[p]
        p += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
        if shift > 63:
            raise DatumError("a number longer than 10 bytes", p)
    return (result >> 1) ^ -(result & 1), p


def _take(b, p, n):
    if n < 0:
        raise DatumError(f"a negative length {n}", p)
    if p + n > len(b):
        raise DatumError(f"the datum ends inside a {n}-byte value", p)
    return bytes(b[p:p + n]), p + n


def reader(node: Node):
    """A function (bytes, position) -> (value, next position) for datums of `node`, giving values
    pa.array takes for node.arrow."""
    kind = node.kind
    if node.logical is not None:
        return _logical_reader(node)
    if kind == "null":
        return lambda b, p: (None, p)
    if kind == "boolean":
        def boolean(b, p):
            if p >= len(b):
                raise DatumError("the datum ends inside a boolean", p)
            return b[p] != 0, p + 1
        return boolean
    if kind in ("int", "long"):
        return _long
    if kind in ("float", "double"):
        size, unpack = (4, _FLOAT) if kind == "float" else (8, _DOUBLE)

        def real(b, p):
            if p + size > len(b):
                raise DatumError(f"the datum ends inside a {kind}", p)
            return unpack(b, p)[0], p + size
        return real
    if kind == "bytes":
        def raw(b, p):
            n, p = _long(b, p)
            return _take(b, p, n)
        return raw
    if kind == "string":
        def text(b, p):
            n, p = _long(b, p)
            data, end = _take(b, p, n)
            try:
                return data.decode("utf-8"), end
            except UnicodeDecodeError:
                raise DatumError("a string that is not UTF-8", p) from None
        return text
    if kind == "fixed":
        return lambda b, p, n=node.size: _take(b, p, n)
    if kind == "enum":
        return _enum_reader(node)
    if kind == "record":
        return _record_reader(node)
    if kind == "array":
        return _blocks_reader(reader(node.children[0]), None, empty_items(node.children[0]))
    if kind == "map":
        return _blocks_reader(reader(node.children[0]), reader(Node("string")))
    if kind == "union":
        return _union_reader(node)
    raise ValueError(f"no reader for Avro type {kind}")


def _enum_reader(node: Node):
    symbols = node.names

    def enum(b, p):
        i, p = _long(b, p)
        if not 0 <= i < len(symbols):
            raise DatumError(f"enum index {i} of {len(symbols)} symbols", p)
        return symbols[i], p
    return enum


def _record_reader(node: Node):
    fields = [(name, reader(child)) for name, child in zip(node.names, node.children)]

    def record(b, p):
        out = {}
        for name, read in fields:
            out[name], p = read(b, p)
        return out, p
    return record


MAX_EMPTY_ITEMS = 1 << 20  # items of no bytes (nulls, fixed of size 0) a block may hold


def empty_items(node: Node, seen: tuple = ()) -> bool:
    """Whether a datum of `node` can take no bytes (null, a fixed of size 0, a record of such)."""
    if node.kind == "record":
        return not any(node is s for s in seen) and all(empty_items(c, seen + (node,)) for c in node.children)
    return node.kind == "null" or (node.kind == "fixed" and node.size == 0)


def _blocks_reader(read_item, read_key, empty: bool = False):
    """Arrays and maps: blocks of items, each block's count first (negative: its byte size follows).
    A count is checked against the bytes left (every item takes one at least), or, for items of no
    bytes, against MAX_EMPTY_ITEMS: a damaged count never makes a huge column."""
    def blocks(b, p):
        out = []
        while True:
            count, p = _long(b, p)
            if count == 0:
                return out, p
            if count < 0:
                count = -count
                _, p = _long(b, p)
            if empty and count > MAX_EMPTY_ITEMS:
                raise DatumError(f"a block of {count} items of no bytes (at most {MAX_EMPTY_ITEMS})", p)
            if not empty and count > len(b) - p + 1:  # every item takes a byte at least
                raise DatumError(f"a block of {count} items in {len(b) - p} bytes", p)
            for _ in range(count):
                if read_key is None:
                    item, p = read_item(b, p)
                    out.append(item)
                else:
                    key, p = read_key(b, p)
                    value, p = read_item(b, p)
                    out.append((key, value))
    return blocks


def _union_reader(node: Node):
    readers = [reader(c) for c in node.children]
    non_null = [i for i, c in enumerate(node.children) if c.kind != "null"]
    member = {i: f"member{k}" for k, i in enumerate(non_null)}
    bare = len(non_null) <= 1  # [null, T]: the value itself

    def union(b, p):
        i, p = _long(b, p)
        if not 0 <= i < len(readers):
            raise DatumError(f"union branch {i} of {len(readers)}", p)
        value, p = readers[i](b, p)
        if bare or i == node.null_branch:
            return value, p
        return {member[i]: value}, p
    return union


def _logical_reader(node: Node):
    base = reader(Node(node.kind, size=node.size))
    logical = node.logical
    if logical == "decimal":
        scale = node.scale

        def dec(b, p):
            data, p = base(b, p)
            unscaled = int.from_bytes(data, "big", signed=True)
            return decimal.Decimal(unscaled).scaleb(-scale, _DECIMAL_CONTEXT), p
        return dec
    if logical in ("timestamp-millis", "local-timestamp-millis"):
        def millis(b, p):
            v, p = base(b, p)
            return v * 1000, p
        return millis
    if logical == "uuid":
        return base
    return base  # date (days), time-millis (ms), time-micros, timestamp-micros: the number as stored


def decode_datums(node: Node, datums: list) -> tuple[pa.Array, list[tuple[int, str]]]:
    """(the column of `datums` decoded, [(index, reason)] of those that failed: null in the column)."""
    read = reader(node)
    values, failed = [], []
    for i, datum in enumerate(datums):
        try:
            value, end = read(datum, 0)
            if end != len(datum):
                raise DatumError(f"{len(datum) - end} bytes left after the datum", end)
        except DatumError as err:
            failed.append((i, f"{err} (byte {err.position} of {len(datum)})"))
            value = None
        except RecursionError:
            failed.append((i, "nested too deeply"))
            value = None
        values.append(value)
    try:
        return pa.array(values, node.arrow), failed
    except (pa.ArrowInvalid, OverflowError, ValueError) as err:  # e.g. a decimal wider than its precision
        return _array_one_by_one(values, node.arrow, failed, err)


def _array_one_by_one(values: list, arrow: pa.DataType, failed: list, err) -> tuple[pa.Array, list]:
    """Only when a whole column did not convert: find the values that do not fit their type."""
    for i, value in enumerate(values):
        if value is None:
            continue
        try:
            pa.array([value], arrow)
        except (pa.ArrowInvalid, OverflowError, ValueError) as one:
            failed.append((i, f"the value does not fit {arrow}: {one}"))
            values[i] = None
    failed.sort()
    return pa.array(values, arrow), failed


