"""Avro datums decoded in bulk by the compiled kernel (kfmt/csrc/avro.c): the schema compiled once
into a program, a flat array of ops over the Arrow type tree, that the kernel runs over every datum of
a chunk, filling the Arrow buffers of each array of the column; the arrays are then assembled with
pyarrow's from_buffers, once per chunk.

The reference is plugins/values/avro_decode.py: both give the same column and the same reasons. A
schema the program does not cover (a recursive type, a union with two null branches, a decimal of more
than 38 digits) compiles to None, and a chunk holding a value the reference leaves to pyarrow's own
checks (an int beyond int32, a decimal beyond its precision, a time of day outside [0, 24 h)) comes
back NotImplemented: the reference decodes those.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from kfmt.default_plugins.values.avro_types import Node

# the op codes of kfmt/csrc/avro.c
(NULL, BOOL, INT32, INT64, MILLIS, FLOAT, DOUBLE, BYTES, STRING, FIXED, ENUM, DECIMAL, DECIMAL_FIXED,
 RECORD, ARRAY, MAP, UNION_BARE, UNION_STRUCT, TIME_MILLIS, TIME_MICROS) = range(20)
_PRIMITIVE_OPS = {"null": NULL, "boolean": BOOL, "int": INT32, "long": INT64, "float": FLOAT,
                  "double": DOUBLE, "bytes": BYTES, "string": STRING}
_LOGICAL_OPS = {"timestamp-millis": MILLIS, "local-timestamp-millis": MILLIS, "time-millis": TIME_MILLIS,
                "time-micros": TIME_MICROS}


class NotCompiled(Exception):
    """The schema holds something the program leaves to the reference."""


@dataclass
class Program:
    ops: bytes  # int32 (op, slot, children, a, b) per op, in preorder
    symbols: bytes  # int32 count, int32 offsets, the enum symbols' UTF-8 text
    slots: list  # the Arrow type of each slot
    tree: list  # per op: (slot, [child op indexes]), for the assembly
    codes: list  # per op: its code


def compile_program(node: Node) -> Program | None:
    """The program of a schema, or None when the reference must decode it."""
    builder = _Builder()
    try:
        builder.op(node, ())
    except NotCompiled:
        return None
    text = b"".join(builder.symbols)
    offsets = np.zeros(len(builder.symbols) + 1, np.int32)
    np.cumsum([len(s) for s in builder.symbols], out=offsets[1:])
    symbols = np.array([len(builder.symbols)], np.int32).tobytes() + offsets.tobytes() + text
    return Program(np.array(builder.ops, np.int32).tobytes(), symbols, builder.slots, builder.tree,
                   [o[0] for o in builder.ops])


class _Builder:
    def __init__(self):
        self.ops, self.slots, self.tree, self.symbols = [], [], [], []

    def slot(self, arrow: pa.DataType) -> int:
        self.slots.append(arrow)
        return len(self.slots) - 1

    def emit(self, code: int, slot: int, children: int = 0, a: int = 0, b: int = 0) -> int:
        self.ops.append((code, slot, children, a, b))
        self.tree.append((slot, []))
        return len(self.ops) - 1

    def op(self, node: Node, path: tuple) -> int:
        """Emit the ops of `node` (its children after it); the index of its op."""
        if any(node is seen for seen in path) or len(path) > 32:
            raise NotCompiled("a recursive or very deep schema")
        path = path + (node,)
        kind, logical = node.kind, node.logical
        if kind in ("record", "array", "map", "union"):
            return getattr(self, f"_{kind}")(node, path)
        if kind == "enum":
            i = self.emit(ENUM, self.slot(node.arrow), 0, len(self.symbols), len(node.names))
            self.symbols.extend(s.encode() for s in node.names)
            return i
        if logical == "decimal":
            if not pa.types.is_decimal128(node.arrow):
                raise NotCompiled("a decimal of more than 38 digits")
            code = DECIMAL if kind == "bytes" else DECIMAL_FIXED
            return self.emit(code, self.slot(node.arrow), 0, node.arrow.precision, node.size)
        if kind == "fixed":
            return self.emit(FIXED, self.slot(node.arrow), 0, node.size)
        return self.emit(_LOGICAL_OPS.get(logical, _PRIMITIVE_OPS[kind]), self.slot(node.arrow))

    def _record(self, node: Node, path: tuple) -> int:
        i = self.emit(RECORD, self.slot(node.arrow), len(node.children))
        self.tree[i][1].extend(self.op(c, path) for c in node.children)
        return i

    def _array(self, node: Node, path: tuple) -> int:
        i = self.emit(ARRAY, self.slot(node.arrow), 1)
        item = self.op(node.children[0], path)
        self.tree[i][1].append(item)
        self._set_a(i, self.tree[item][0])  # the list's offsets count its item array's elements
        return i

    def _map(self, node: Node, path: tuple) -> int:
        i = self.emit(MAP, self.slot(node.arrow), 1)
        keys = self.slot(pa.string())
        self._set_a(i, keys)
        self.tree[i][1].extend([self.op(node.children[0], path), keys])
        return i

    def _union(self, node: Node, path: tuple) -> int:
        nulls = [c for c in node.children if c.kind == "null"]
        others = [c for c in node.children if c.kind != "null"]
        if len(nulls) > 1:
            raise NotCompiled("a union with two null branches")
        if len(others) > 1:
            i = self.emit(UNION_STRUCT, self.slot(node.arrow), len(node.children))
            self.tree[i][1].extend(self.op(c, path) for c in node.children)
            return i
        i = self.emit(UNION_BARE, -1, len(node.children))
        children = [self.op(c, path) for c in node.children]
        value = [k for k, c in enumerate(node.children) if c.kind != "null"]  # T of [null, T], if any
        slot = self.tree[children[value[0]]][0] if value else self.slot(pa.null())
        self.ops[i] = (UNION_BARE, slot, *self.ops[i][2:])
        self.tree[i] = (slot, children)
        return i

    def _set_a(self, i: int, a: int):
        code, slot, children, _, b = self.ops[i]
        self.ops[i] = (code, slot, children, a, b)


def decode_chunk(program: Program, native, data: np.ndarray, starts: np.ndarray, lengths: np.ndarray):
    """(column, [(index, reason)]) of the datums data[starts[i]:starts[i] + lengths[i]], or
    NotImplemented for a chunk the reference must decode."""
    out = native.decode_avro(program.ops, program.symbols, len(program.slots), data,
                             np.ascontiguousarray(starts, np.int64), np.ascontiguousarray(lengths, np.int64))
    if out is NotImplemented:
        return out
    buffers, failed = out
    return _array(program, buffers, 0), failed


def _array(program: Program, buffers: list, op: int) -> pa.Array:
    slot, children = program.tree[op]
    if program.codes[op] == UNION_BARE:  # [null, T]: T's array (its nulls included)
        op = next((c for c in children if program.codes[c] != NULL), None)
        if op is None:
            return pa.nulls(buffers[slot][0])
        slot, children = program.tree[op]
    arrow = program.slots[slot]
    count, valid, offsets, values = buffers[slot]
    if pa.types.is_null(arrow):
        return pa.nulls(count)
    validity = _bits(valid, count)
    if pa.types.is_struct(arrow):  # a record's fields, or a union's non-null branches
        kids = [_array(program, buffers, c) for c in children if program.codes[c] != NULL
                or program.codes[op] == RECORD]
        return pa.StructArray.from_buffers(arrow, count, [validity], children=kids)
    if pa.types.is_list(arrow):
        item = _array(program, buffers, children[0])
        return pa.ListArray.from_buffers(arrow, count, [validity, pa.py_buffer(offsets)], children=[item])
    if pa.types.is_map(arrow):
        item = _array(program, buffers, children[0])
        keys = _leaf(pa.string(), buffers[children[1]])
        entries = pa.StructArray.from_arrays([keys, item], fields=[arrow.key_field, arrow.item_field])
        return pa.MapArray.from_buffers(arrow, count, [validity, pa.py_buffer(offsets)], children=[entries])
    if pa.types.is_boolean(arrow):
        return pa.Array.from_buffers(arrow, count, [validity, _bits(values, count)])
    return _leaf(arrow, buffers[slot], validity)


def _leaf(arrow: pa.DataType, buffer: tuple, validity=None) -> pa.Array:
    count, valid, offsets, values = buffer
    if validity is None and valid:
        validity = _bits(valid, count)
    if pa.types.is_string(arrow) or pa.types.is_binary(arrow):
        return pa.Array.from_buffers(arrow, count, [validity, pa.py_buffer(offsets), pa.py_buffer(values)])
    return pa.Array.from_buffers(arrow, count, [validity, pa.py_buffer(values)])


def _bits(flags: bytes, count: int):
    return pa.py_buffer(np.packbits(np.frombuffer(flags, np.uint8, count), bitorder="little"))
