"""The part files of a file export task whose topic's values are decoded one member per schema id
(`--value-format-option tables=per-schema-id`, plugins/values/per_schema_id.py): each member written
as a table of its own, `topic=T/value_schema_id=<id>/partition=P/`, its `value` the member's type; the
rows whose value is in no member (tombstones, values that did not decode: their dead letters say why)
under `value_schema_id=none/`, `value` null. Every record is in exactly one table, so the rows of the
tables add up to a raw export's."""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from kfmt.rows.part_files import PartFiles

NONE = "none"


def splits_values(typing) -> bool:
    decoder = typing.decoders.get("value") if typing is not None else None
    return bool(getattr(decoder, "per_schema_id", False))


def table_directory(rel: str, schema_id: str) -> str:
    """`topic=T/partition=P[/date=D]` with the schema id's directory after the topic's."""
    first, sep, rest = rel.partition("/")
    return f"{first}/value_schema_id={schema_id}{sep}{rest}"


class SchemaIdTables:
    """PartFiles per schema id, made as rows of each come (the same naming and sizing as one)."""

    def __init__(self, fmt, files, schema: pa.Schema, segment_base: int, range_index: int,
                 target_file_bytes: int, first_offset: int | None, observe, settings: dict | None = None):
        self.args = (fmt, files)
        self.settings = settings  # the exporter's (kfmt.rows.exporters: its options' values)
        self.place = (segment_base, range_index, target_file_bytes, first_offset, observe)
        self.schema = schema
        self.value_index = schema.get_field_index("value")
        self.members = schema.field("value").type
        self.outs: dict[str, tuple[PartFiles, pa.Schema]] = {}

    def write(self, directory: str, rows: pa.RecordBatch) -> None:
        value = rows.column(self.value_index)
        placed = np.zeros(rows.num_rows, dtype=bool)
        for i, member in enumerate(self.members):
            column = value.field(i) if value.offset == 0 else value.field(i).slice(value.offset, len(value))
            present = np.asarray(column.is_valid().to_numpy(zero_copy_only=False), dtype=bool) & \
                np.asarray(value.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
            if present.any():
                placed |= present
                mask = pa.array(present)
                self._write(member.name.rsplit("_", 1)[1], directory, rows.filter(mask), column.filter(mask))
        if not placed.all():
            mask = pa.array(~placed)
            rest = rows.filter(mask)
            self._write(NONE, directory, rest, pa.nulls(rest.num_rows, pa.null()))

    def _write(self, schema_id: str, directory: str, rows: pa.RecordBatch, value: pa.Array) -> None:
        if schema_id not in self.outs:
            schema = self.schema.set(self.value_index, pa.field("value", value.type))
            base, index, target, first_offset, observe = self.place
            self.outs[schema_id] = (PartFiles(*self.args, schema, base, index, target, first_offset=first_offset,
                                              observe=observe, settings=self.settings), schema)
        out, schema = self.outs[schema_id]
        columns = [value if i == self.value_index else rows.column(i) for i in range(rows.num_columns)]
        out.write(table_directory(directory, schema_id), pa.RecordBatch.from_arrays(columns, schema=schema))

    def schema_of(self, rel: str) -> pa.Schema:
        """The schema of a file this writer wrote (by its directory)."""
        for schema_id, (_, schema) in self.outs.items():
            if f"/value_schema_id={schema_id}/" in rel:
                return schema
        return self.schema

    def close(self) -> list:
        return [record for out, _ in self.outs.values() for record in out.close()]

    def abort(self) -> None:
        for out, _ in self.outs.values():
            out.abort()
