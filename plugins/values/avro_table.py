"""The Avro rows of every schema id of a chunk decoded in one pass of the compiled kernel, each by its
writer schema's program straight into the table type (plugins/values/avro_program.py): the column
comes out in row order, with no take to put the schema ids' rows back in place and no cast to the
merged type. A row no writer decodes (not framed, an unknown id, a null value) is a null row of the
table; a datum that fails is rolled back alone, with its reason and byte position.

`decode_chunk_in_one_pass` gives None when it cannot: the kernels are not built, a schema id is not
Avro or its program does not cover the table (plugins/values/avro_program.py's NotCompiled), or the
chunk holds a value the reference decodes (NotImplemented). The caller then decodes by schema id
with the reference's definition (registry_formats.RegistryDecoder).
"""
from __future__ import annotations

import numpy as np

from kfmt.default_plugins.values.avro_layout import Layout
from kfmt.default_plugins.values.avro_program import compile_program, decode_chunk, filler_program
from kfmt.format.value_formats import Decoded


class TablePrograms:
    """The programs of a table type's writer schemas, made on first use in each process."""

    def __init__(self, arrow, defaults: dict):
        self.layout = Layout(arrow)
        self.defaults = defaults  # path -> avro_defaults.Default
        self.filler = filler_program(self.layout)
        self.by_id: dict = {}

    def program(self, schema_id: int, writer):
        if schema_id not in self.by_id:
            self.by_id[schema_id] = compile_program(writer.node, self.layout, self.defaults)
        return self.by_id[schema_id]


def decode_chunk_in_one_pass(programs: TablePrograms, writer_of, col, ids: np.ndarray, skip: int,
                             failed: dict, native) -> Decoded | None:
    """The Decoded column of framing.Column `col` (schema id per row `ids`, payloads after `skip`
    bytes; `failed`: row -> reason of the rows not framed), or None (see the module's text).
    writer_of(id) -> WriterSchema or the reason there is none."""
    if native is None or programs.filler is None:
        return None
    which = np.zeros(col.n, np.int32)  # program 0: the filler, a null row
    chosen = [programs.filler]
    failed = dict(failed)
    for schema_id in np.unique(ids[ids >= 0]).tolist():
        rows = ids == schema_id
        writer = writer_of(schema_id)
        if isinstance(writer, str):
            failed.update((int(r), writer) for r in np.flatnonzero(rows))
            continue
        program = programs.program(schema_id, writer) if writer.kind == "AVRO" else None
        if program is None:
            return None
        which[rows] = len(chosen)
        chosen.append(program)
    lengths = np.where(which > 0, col.lengths - skip, 0)
    decoded = decode_chunk(chosen, native, col.bytes, col.starts + skip, lengths, which)
    if decoded is NotImplemented:
        return None
    column, bad = decoded
    failed.update((int(r), f"schema id {int(ids[r])}: {reason}") for r, reason in bad)
    order = sorted(failed)
    return Decoded(column, np.asarray(order, np.int64), [failed[r] for r in order], ids)
