"""Avro datums decoded in bulk by the compiled kernel (kfmt/csrc/avro.c): a writer schema compiled
once into a program, a flat array of ops in preorder, that the kernel runs over every datum of a
chunk, filling the Arrow buffers of the table type's arrays (plugins/values/avro_layout.py). One
program per writer schema of a subject, all writing into the same table type: the kernel decodes the
rows of every schema id of a chunk in one pass, in row order, each straight into the table's type
(Avro's schema resolution in the program: fields matched by name, int -> long and float -> double
widened as they are stored, a field the writer lacks filled with the reader's default, decoded from
its encoded bytes by the reader's ops, or null).

The reference is plugins/values/avro_decode.py (each schema id's rows decoded with the writer schema)
then evolution.conform (to the table type, defaults included): both give the same column and the same
reasons. A schema the program does not cover (a recursive type, a decimal of more than 38 digits, a
union of nulls where the table holds a value) compiles to None, and a chunk holding a value the
reference leaves to pyarrow's own checks (an int beyond int32, a decimal beyond its precision, a time
of day outside [0, 24 h)) comes back NotImplemented: the reference decodes those.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from kfmt.default_plugins.values.avro_decode import MAX_EMPTY_ITEMS, empty_items
from kfmt.default_plugins.values.avro_layout import Layout, Place, assemble
from kfmt.default_plugins.values.avro_types import Node

# the op codes of kfmt/csrc/avro.c
(NULL, BOOL, INT32, INT64, MILLIS, FLOAT, DOUBLE, BYTES, STRING, FIXED, ENUM, DECIMAL, DECIMAL_FIXED,
 RECORD, ARRAY, MAP, UNION_BARE, UNION_STRUCT, TIME_MILLIS, TIME_MICROS, ABSENT, DEFAULT) = range(22)
_PRIMITIVE_OPS = {"null": NULL, "boolean": BOOL, "int": INT32, "long": INT64, "float": FLOAT,
                  "double": DOUBLE, "bytes": BYTES, "string": STRING}
_LOGICAL_OPS = {"timestamp-millis": MILLIS, "local-timestamp-millis": MILLIS, "time-millis": TIME_MILLIS,
                "time-micros": TIME_MICROS}
# the promotions stored as they are read (evolution.merge's): the op's b = 1 widens to 8 bytes
_WIDENED = {(INT32, pa.int64()), (FLOAT, pa.float64())}


class NotCompiled(Exception):
    """The schema holds something the program leaves to the reference."""


@dataclass
class Program:
    ops: np.ndarray  # int32 (op, slot, children, a, b) per op, in preorder
    layout: Layout  # the table type's slots it writes into


def compile_program(node: Node, layout: Layout | None = None, defaults: dict | None = None) -> Program | None:
    """The program of writer schema `node` into `layout` (default: the writer's own type), with the
    reader's `defaults` (path -> avro_defaults.Default) for the table fields the writer lacks; None
    when the reference must decode it."""
    layout = layout or Layout(node.arrow)
    builder = _Builder(layout, defaults or {})
    try:
        builder.op(node, layout.root, (), ())
    except NotCompiled:
        return None
    return Program(np.array(builder.ops, np.int32).reshape(-1, 5), layout)


def filler_program(layout: Layout) -> Program | None:
    """The program of a row no writer schema decodes: a null row of the table type, no byte read."""
    builder = _Builder(layout, {})
    try:
        builder.emit(ABSENT, layout.root.slot, 1)
        builder.filler(layout.root)
    except NotCompiled:
        return None
    return Program(np.array(builder.ops, np.int32).reshape(-1, 5), layout)


class _Builder:
    def __init__(self, layout: Layout, defaults: dict):
        self.layout, self.defaults, self.ops = layout, defaults, []

    def emit(self, code: int, slot: int, children: int = 0, a: int = 0, b: int = 0) -> int:
        self.ops.append([code, slot, children, a, b])
        return len(self.ops) - 1

    def op(self, node: Node, place: Place, path: tuple, seen: tuple) -> None:
        """Emit the ops of writer type `node` stored at `place` (its children after it)."""
        if any(node is s for s in seen) or len(seen) > 32:
            raise NotCompiled("a recursive or very deep schema")
        seen = seen + (node,)
        kind, target = node.kind, place.arrow
        if pa.types.is_null(node.arrow) and not pa.types.is_null(target):
            if kind != "null":
                raise NotCompiled("a union of nulls where the table holds a value")
            self.emit(ABSENT, place.slot, 1)
            return self.filler(place)
        if kind in ("record", "array", "map", "union"):
            return getattr(self, f"_{kind}")(node, place, path, seen)
        if kind == "enum":
            _expect(target, pa.string())
            self.emit(ENUM, place.slot, 0, len(self.layout.symbols), len(node.names))
            self.layout.symbols.extend(s.encode() for s in node.names)
        elif node.logical == "decimal":
            if not (pa.types.is_decimal128(node.arrow) and pa.types.is_decimal128(target)
                    and target.scale == node.arrow.scale and target.precision >= node.arrow.precision):
                raise NotCompiled("a decimal of more than 38 digits")
            self.emit(DECIMAL if kind == "bytes" else DECIMAL_FIXED, place.slot, 0, node.arrow.precision, node.size)
        elif kind == "fixed":
            _expect(target, pa.binary())
            self.emit(FIXED, place.slot, 0, node.size)
        else:
            code = _LOGICAL_OPS.get(node.logical, _PRIMITIVE_OPS[kind])
            widened = (code, target) in _WIDENED
            if not widened:
                _expect(target, node.arrow)
            self.emit(code, place.slot, 0, 0, int(widened))

    def _record(self, node: Node, place: Place, path: tuple, seen: tuple):
        _expect_kind(place, pa.types.is_struct)
        if len(set(node.names)) != len(node.names) or not set(node.names) <= set(place.fields):
            raise NotCompiled(f"record {node.name}'s fields are not the table's")
        self.emit(RECORD, place.slot, len(place.fields))
        for name, child in zip(node.names, node.children):
            self.op(child, place.fields[name], path + (name,), seen)
        for name, sub in place.fields.items():  # the table's fields this writer lacks
            if name not in node.names:
                self._absent(sub, path + (name,), seen)

    def _absent(self, place: Place, path: tuple, seen: tuple):
        """A table field the writer lacks: the reader's default, decoded from its bytes, or null."""
        default = self.defaults.get(path)
        if default is None:
            self.emit(ABSENT, place.slot, 1)
            return self.filler(place)
        self.emit(DEFAULT, place.slot, 1, len(self.layout.defaults))
        self.layout.defaults.append(default.encoded)
        outer, self.defaults = self.defaults, {}  # inside a default, what it lacks is null (as conform)
        try:
            self.op(default.node, place, path, seen)
        finally:
            self.defaults = outer

    def _array(self, node: Node, place: Place, path: tuple, seen: tuple):
        _expect_kind(place, pa.types.is_list)
        # b: the most items of no bytes a block may hold (0: items take bytes, the bytes left bound them)
        self.emit(ARRAY, place.slot, 1, place.item.slot, MAX_EMPTY_ITEMS if empty_items(node.children[0]) else 0)
        self.op(node.children[0], place.item, path + ("[]",), seen)

    def _map(self, node: Node, place: Place, path: tuple, seen: tuple):
        _expect_kind(place, pa.types.is_map)
        self.emit(MAP, place.slot, 1, place.keys)
        self.op(node.children[0], place.item, path + ("{}",), seen)

    def _union(self, node: Node, place: Place, path: tuple, seen: tuple):
        others = [c for c in node.children if c.kind != "null"]
        if len(others) <= 1:  # [null, T]: T's own place; its null a null of T
            self.emit(UNION_BARE, place.slot, len(node.children))
            for child in node.children:
                if child.kind == "null":
                    self.emit(NULL, self.layout.scratch)
                else:
                    self.op(child, place, path, seen)
            return
        _expect_kind(place, pa.types.is_struct)
        members = [name for name in place.fields if name.startswith("member")]
        if members != list(place.fields) or len(members) < len(others):
            raise NotCompiled("a union the table does not hold as members")
        self.emit(UNION_STRUCT, place.slot, len(members) + len(node.children) - len(others), 0, len(node.children))
        k = 0
        for child in node.children:
            if child.kind == "null":
                self.emit(NULL, self.layout.scratch)
                continue
            self.op(child, place.fields[f"member{k}"], path + (f"member{k}",), seen)
            k += 1
        for name in members[k:]:  # members other versions' unions have
            self.emit(ABSENT, place.fields[name].slot, 1)
            self.filler(place.fields[name])

    def filler(self, place: Place):
        """Ops that only ever append nulls to `place` (a field or member no writer value fills)."""
        arrow = place.arrow
        if pa.types.is_struct(arrow):
            self.emit(RECORD, place.slot, len(place.fields))
            for sub in place.fields.values():
                self.filler(sub)
        elif pa.types.is_list(arrow) or pa.types.is_map(arrow):
            is_map = pa.types.is_map(arrow)
            self.emit(MAP if is_map else ARRAY, place.slot, 1, place.keys if is_map else place.item.slot)
            self.filler(place.item)
        else:
            self.emit(_filler_code(arrow), place.slot)


def _filler_code(arrow: pa.DataType) -> int:
    """The op whose null is an Arrow null of `arrow` (as wide as its values)."""
    if pa.types.is_null(arrow):
        return NULL
    if pa.types.is_boolean(arrow):
        return BOOL
    if arrow in (pa.int32(), pa.date32(), pa.time32("ms")):
        return INT32
    if arrow in (pa.int64(), pa.time64("us")) or pa.types.is_timestamp(arrow):
        return INT64
    if arrow == pa.float32():
        return FLOAT
    if arrow == pa.float64():
        return DOUBLE
    if arrow in (pa.binary(), pa.string()):
        return BYTES
    if pa.types.is_decimal128(arrow):
        return DECIMAL
    raise NotCompiled(f"no null of {arrow}")


def _expect(target: pa.DataType, arrow: pa.DataType):
    if target != arrow:
        raise NotCompiled(f"{arrow} stored as {target}")


def _expect_kind(place: Place, check):
    if not check(place.arrow):
        raise NotCompiled(f"stored as {place.arrow}")


def decode_chunk(programs: list[Program], native, data: np.ndarray, starts: np.ndarray, lengths: np.ndarray,
                 which: np.ndarray | None = None):
    """(column, [(index, reason)]) of the datums data[starts[i]:starts[i] + lengths[i]], row i decoded
    by programs[which[i]] (all of one layout; default: the first), or NotImplemented for a chunk the
    reference must decode."""
    layout = programs[0].layout
    roots = np.cumsum([0] + [len(p.ops) for p in programs[:-1]]).astype(np.int32)
    ops = np.concatenate([p.ops for p in programs]).astype(np.int32)
    which = np.zeros(len(starts), np.int32) if which is None else np.ascontiguousarray(which, np.int32)
    symbols, defaults = layout.tables()
    out = native.decode_avro(ops.tobytes(), roots.tobytes(), symbols, defaults, len(layout.slots), data,
                             np.ascontiguousarray(starts, np.int64), np.ascontiguousarray(lengths, np.int64),
                             which.tobytes())
    if out is NotImplemented:
        return out
    buffers, failed = out
    return assemble(layout.root, buffers), failed
