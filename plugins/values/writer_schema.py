"""One schema of a registry (Avro, Protobuf or JSON Schema) ready to decode the payloads written with it:
its Arrow type, and the compiled path that decodes a chunk in bulk where there is one (the Avro kernel,
Protobuf through ptars), else the pure-Python reference. plugins/values/registry_formats.py groups a
column's rows by schema id and hands each group to its WriterSchema."""
from __future__ import annotations

import json
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pyarrow as pa  # imported on first use: every command loads the registry plugins, few decode values

AVRO, PROTOBUF, JSON = "AVRO", "PROTOBUF", "JSON"


class WriterSchema:
    """One registered schema ready to decode payloads: its Arrow type and a decode function."""

    def __init__(self, schemas, schema, message: str | None = None):
        self.id = schema.id
        self.kind = schema.schema_type
        refs = schemas.references_of(schema)
        if self.kind == AVRO:
            from kfmt.default_plugins.values.avro_program import compile_program
            from kfmt.default_plugins.values.avro_types import parse

            self.node = parse(schema.text, [s.text for _, s in refs])
            self.arrow = self.node.arrow
            self.program = compile_program(self.node)
        elif self.kind == JSON:
            from kfmt.default_plugins.values.json_values import arrow_type

            self.arrow = arrow_type(json.loads(schema.text))
        elif self.kind == PROTOBUF:
            from kfmt.default_plugins.values.protobuf_values import ProtoSchema

            self.proto = ProtoSchema(schema, refs, message)
            self.arrow = self.proto.arrow
            self.bulk = None  # protobuf_bulk.BulkProtobuf, made on first use
        else:
            raise ValueError(f"unknown schema type {self.kind}")

    def decode_rows(self, col, rows: np.ndarray, skip) -> tuple[pa.Array, list[tuple[int, str]]]:
        """The payloads of `rows` of a framing.Column (after `skip` bytes) decoded: Avro in bulk by
        the compiled kernel where it is built and covers the chunk, else by the reference."""
        from kfmt.format.kernels import native

        if self.kind == AVRO and native is not None and self.program is not None:
            from kfmt.default_plugins.values.avro_program import decode_chunk

            decoded = decode_chunk([self.program], native, col.bytes, col.starts[rows] + skip,
                                   col.lengths[rows] - skip)
            if decoded is not NotImplemented:
                return decoded
        if self.kind == PROTOBUF and native is not None:
            bulk = self._protobuf_bulk()
            if bulk is not None:
                return bulk.decode_rows(col, rows, skip)
        return self.decode(col.payloads(rows, skip))

    def _protobuf_bulk(self):
        """Protobuf's bulk decoder (protobuf_bulk.py) where ptars is installed and covers the message;
        KFMT_PURE_PYTHON=1 (native None) keeps the reference."""
        from kfmt.default_plugins.values import protobuf_bulk

        if getattr(self, "bulk", None) is None and protobuf_bulk.ptars_available():
            self.bulk = protobuf_bulk.BulkProtobuf(self.proto)
        return self.bulk if self.bulk is not None and self.bulk.supported else None

    def decode(self, payloads: list[bytes]) -> tuple[pa.Array, list[tuple[int, str]]]:
        if self.kind == AVRO:
            from kfmt.default_plugins.values.avro_decode import decode_datums

            return decode_datums(self.node, payloads)
        if self.kind == JSON:
            from kfmt.default_plugins.values.json_values import decode_json

            return decode_json(payloads, self.arrow)
        return self.proto.decode(payloads)
