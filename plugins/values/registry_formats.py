"""The schema-registry value formats: `avro`, `protobuf` and `json-schema` (Confluent's wire format:
magic byte 0, a 4-byte schema id, the payload), `registry` (any of the three, as each record's schema
id says) and `avro-single` (Avro single-object encoding: C3 01 and the schema's fingerprint).

Binding (on the driver) finds the subject of the topic and side (Confluent's default
TopicNameStrategy: `<topic>-value`, or the `subject` option) in the schema source and merges the
types of all its versions into one table type (plugins/values/evolution.py): a topic written with
three schema versions is one table. Decoding groups a column's rows by schema id, decodes each group
with its writer schema and casts it to the table type; a record whose id is unknown, whose bytes do
not match its schema, whose schema is of another kind, or that is not framed, fails alone with why.
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING

import numpy as np

from kfmt.errors import UsageError
from kfmt.format.value_formats import Decoded
from kfmt.plugin.hookspecs import hookimpl
from kfmt.plugin.options import Option
from kfmt.default_plugins.values.writer_schema import AVRO, JSON, PROTOBUF, WriterSchema
from kfmt.default_plugins.values.per_schema_id import (
    PER_SCHEMA_ID,
    TABLES_OPTION,
    member_name,
    members_type,
)

if TYPE_CHECKING:
    import pyarrow as pa  # imported on first use: every command loads this plugin, few decode values

SUBJECT_OPTION = Option("subject", "the registry subject whose versions make the table type "
                                   "(default: TOPIC-key / TOPIC-value)")
MESSAGE_OPTION = Option("message", "Protobuf: the message of the table, when the schema defines "
                                   "several (default: the one the topic's first records name)")


class RegistryDecoder:
    """Decodes Confluent-framed values (or single-object Avro, `fingerprints` given) by schema id."""

    def __init__(self, schemas, arrow_type: pa.DataType, kinds: tuple, fingerprints: dict | None = None,
                 message: str | None = None, defaults: dict | None = None):
        self.schemas, self.arrow_type, self.kinds = schemas, arrow_type, kinds
        self.defaults = defaults or {}  # path -> avro_defaults.Default: the reader's defaults
        self.fingerprints = fingerprints  # fingerprint -> schema id (avro-single)
        self.message = message  # the Protobuf message of the table (full name)
        self._writers: dict = {}
        self._programs = None  # avro_table.TablePrograms, made on first use

    def __getstate__(self):
        return {**self.__dict__, "_writers": {}, "_programs": None}

    def writer(self, schema_id: int) -> WriterSchema | str:
        """The writer schema of an id, or why there is none."""
        if schema_id not in self._writers:
            self._writers[schema_id] = _writer_or_reason(self.schemas, schema_id, self.kinds, self.message)
        return self._writers[schema_id]

    @property
    def per_schema_id(self) -> bool:
        """One member per schema id (plugins/values/per_schema_id.py), not one merged type."""
        return getattr(self, "members", False)

    def decode(self, data: pa.Array) -> Decoded:
        import pyarrow as pa

        from kfmt.default_plugins.values import framing
        from kfmt.default_plugins.values.evolution import Incompatible, conform

        if self.per_schema_id:
            return self._decode_members(data)

        col = framing.Column(data)
        ids, skip, reasons = self._framing(col)
        one_pass = self._decode_in_one_pass(col, ids, skip, reasons)
        if one_pass is not None:
            return one_pass
        pieces, failed = [], dict(reasons)
        for schema_id in np.unique(ids[ids >= 0]).tolist():
            rows = np.flatnonzero(ids == schema_id)
            writer = self.writer(schema_id)
            if isinstance(writer, str):
                failed.update((int(r), writer) for r in rows)
                continue
            column, bad = writer.decode_rows(col, rows, skip)
            try:
                column = conform(column, self.arrow_type, {p: d.array for p, d in self.defaults.items()})
            except (Incompatible, pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
                failed.update((int(r), f"schema id {schema_id} does not fit the table's type: {err}")
                              for r in rows)
                continue
            failed.update((int(rows[i]), f"schema id {schema_id}: {reason}") for i, reason in bad)
            pieces.append((rows, column))
        return _assemble(len(data), self.arrow_type, pieces, failed, ids)

    def _decode_in_one_pass(self, col, ids: np.ndarray, skip: int, reasons: dict) -> Decoded | None:
        """Avro: every schema id's rows in one kernel pass into the table type (avro_table.py), or None."""
        from kfmt.format.kernels import native

        if native is None or AVRO not in self.kinds:
            return None
        from kfmt.default_plugins.values.avro_table import TablePrograms, decode_chunk_in_one_pass

        if self._programs is None:
            self._programs = TablePrograms(self.arrow_type, self.defaults)
        return decode_chunk_in_one_pass(self._programs, self.writer, col, ids, skip, reasons, native)

    def _decode_members(self, data: pa.Array) -> Decoded:
        """decode() for one member per schema id (plugins/values/per_schema_id.py): each schema id's
        rows decoded with their writer schema into its own member, no casting between versions."""
        import pyarrow as pa

        from kfmt.default_plugins.values import framing

        col = framing.Column(data)
        ids, skip, reasons = self._framing(col)
        failed, pieces = dict(reasons), {}
        names = {f.name for f in self.arrow_type}
        for schema_id in np.unique(ids[ids >= 0]).tolist():
            rows = np.flatnonzero(ids == schema_id)
            writer = self.writer(schema_id)
            if isinstance(writer, str) or member_name(schema_id) not in names:
                reason = writer if isinstance(writer, str) else \
                    f"schema id {schema_id} is not a version of the subject (tables=per-schema-id)"
                failed.update((int(r), reason) for r in rows)
                continue
            column, bad = writer.decode_rows(col, rows, skip)
            failed.update((int(rows[i]), f"schema id {schema_id}: {reason}") for i, reason in bad)
            pieces[member_name(schema_id)] = (rows, column)
        n = len(data)
        present = np.zeros(n, dtype=bool)
        for rows, _ in pieces.values():
            present[rows] = True
        if failed:
            present[np.fromiter(failed, np.int64, len(failed))] = False
        members = [_assemble(n, f.type, [pieces[f.name]] if f.name in pieces else [], failed, ids).column
                   for f in self.arrow_type]
        column = pa.StructArray.from_arrays(members, fields=list(self.arrow_type), mask=pa.array(~present))
        order = sorted(failed)
        return Decoded(column, np.asarray(order, np.int64), [failed[r] for r in order], ids)

    def _framing(self, col) -> tuple[np.ndarray, int, dict]:
        from kfmt.default_plugins.values import framing

        if self.fingerprints is None:
            ids, problem = framing.confluent_ids(col)
            reasons = {int(r): framing.framing_reason(col, int(r), int(problem[r]))
                       for r in np.flatnonzero(problem)}
            return ids, framing.CONFLUENT_HEADER, reasons
        prints, bad = framing.single_object_fingerprints(col)
        ids = np.full(col.n, -1, np.int64)
        reasons = {int(r): "not Avro single-object encoding (no C3 01 marker and 8-byte fingerprint)"
                   for r in np.flatnonzero(bad)}
        for value in np.unique(prints[~bad & ~col.null]).tolist():
            rows = np.flatnonzero((prints == value) & ~bad & ~col.null)
            schema_id = self.fingerprints.get(int(value))
            if schema_id is None:
                reasons.update((int(r), f"no schema with fingerprint {int(value):016x}") for r in rows)
            else:
                ids[rows] = schema_id
        return ids, framing.SINGLE_OBJECT_HEADER, reasons


def _writer_or_reason(schemas, schema_id: int, kinds: tuple, message: str | None = None
                      ) -> WriterSchema | str:
    schema = schemas.get(schema_id)
    if schema is None:
        return f"schema id {schema_id} is not in {schemas.where}"
    if schema.schema_type not in kinds:
        return f"schema id {schema_id} is a {schema.schema_type} schema, not {' or '.join(kinds)}"
    try:
        return WriterSchema(schemas, schema, message)
    except (ValueError, KeyError, TypeError, UsageError) as err:
        return f"schema id {schema_id} cannot be used: {err}"


def _assemble(n: int, arrow: pa.DataType, pieces: list, failed: dict, ids: np.ndarray) -> Decoded:
    """The decoded pieces (rows, column) put back in row order; every other row null."""
    import pyarrow as pa

    if not failed and len(pieces) == 1 and len(pieces[0][0]) == n:  # one schema id, every row: in order
        return Decoded(pieces[0][1], np.zeros(0, np.int64), [], ids)
    index = np.full(n, sum(len(c) for _, c in pieces), np.int64)  # the null slot after the pieces
    at = 0
    for rows, column in pieces:
        index[rows] = np.arange(at, at + len(rows))
        at += len(rows)
    if failed:
        index[np.fromiter(failed, np.int64, len(failed))] = at
    whole = pa.concat_arrays([c for _, c in pieces] + [pa.nulls(1, arrow)]).take(pa.array(index))
    order = sorted(failed)
    return Decoded(whole, np.asarray(order, np.int64), [failed[r] for r in order], ids)


def table_type(binding, kinds: tuple) -> tuple[pa.DataType, object, str | None]:
    """The table type of the binding's subject: every version's type merged, oldest first. Returns
    (type, schemas, the Protobuf message of the table or None, the reader's defaults by path)."""
    from kfmt.default_plugins.values.evolution import Incompatible, merge

    schemas = _schemas_of(binding)
    ids = schemas.versions(binding.subject)
    if not ids:
        raise UsageError(f"{binding.topic}: no subject {binding.subject!r} in {schemas.where} (name the "
                         f"subject with --{binding.side}-format-option subject=NAME)")
    message = binding.options.get("message") or _sampled_message(binding, schemas, ids, kinds)
    merged, first = None, None
    writers = []
    for schema_id in ids:
        writer = _writer_or_reason(schemas, schema_id, kinds, message)
        if isinstance(writer, str):
            raise UsageError(f"{binding.topic}: subject {binding.subject!r}: {writer}")
        writers.append(writer)
    tables = binding.options.get("tables", "one")
    if tables not in ("one", PER_SCHEMA_ID):
        raise UsageError(f"{binding.topic}: tables={tables!r}: one or {PER_SCHEMA_ID}")
    if tables == PER_SCHEMA_ID:
        return members_type(writers), schemas, message, {}
    for writer in writers:
        schema_id = writer.id
        try:
            merged = writer.arrow if merged is None else merge(merged, writer.arrow)
        except Incompatible as err:
            raise UsageError(f"{binding.topic}: schema ids {first} and {schema_id} of subject "
                             f"{binding.subject!r} cannot share one table ({err}; "
                             f"--{binding.side}-format-option tables={PER_SCHEMA_ID} makes one per "
                             f"schema id)") from None
        first = schema_id if first is None else first
    return merged, schemas, message, _reader_defaults(binding, writers, merged)


def _reader_defaults(binding, writers: list, merged: pa.DataType) -> dict:
    """path -> avro_defaults.Default of the table's fields, the newest version's defaults."""
    from kfmt.default_plugins.values.avro_defaults import table_defaults
    from kfmt.default_plugins.values.avro_types import AvroSchemaError

    try:
        return table_defaults([(w.id, w.node) for w in writers if w.kind == AVRO], merged)
    except AvroSchemaError as err:
        raise UsageError(f"{binding.topic}: subject {binding.subject!r}: {err}") from None


def _sampled_message(binding, schemas, ids: list, kinds: tuple) -> str | None:
    """The Protobuf message a topic's records are written with, when its schema defines several: the
    one the first framed records of the topic name (their message indexes)."""
    from kfmt.default_plugins.values import framing

    if PROTOBUF not in kinds or binding.sampler is None:
        return None
    sample = binding.sampler()
    col = framing.Column(sample)
    found, _ = framing.confluent_ids(col)
    for row in range(col.n):
        if found[row] not in ids:
            continue
        writer = _writer_or_reason(schemas, int(found[row]), kinds)
        if isinstance(writer, str) or writer.kind != PROTOBUF or len(writer.proto.messages) == 1:
            return None
        from kfmt.default_plugins.values.protobuf_values import _message_indexes

        try:
            indexes, _ = _message_indexes(col.payloads(np.array([row]), framing.CONFLUENT_HEADER)[0])
            return writer.proto.with_indexes(indexes).full_name
        except (ValueError, IndexError):
            continue
    return None


def _schemas_of(binding):
    if binding.schemas is None:
        raise UsageError(f"{binding.topic}: the {binding.side} format needs schemas: give --schemas "
                         f"(a registry URL, a schema directory, or a _schemas partition) or read a log "
                         f"directory that holds the registry's _schemas topic")
    return binding.schemas


class _Framed:
    kinds: tuple = ()
    options = (SUBJECT_OPTION, MESSAGE_OPTION, TABLES_OPTION)

    def bind(self, binding):
        arrow, schemas, message, defaults = table_type(binding, self.kinds)
        decoder = RegistryDecoder(schemas, arrow, self.kinds, message=message, defaults=defaults)
        decoder.members = binding.options.get("tables") == PER_SCHEMA_ID
        return decoder


class Avro(_Framed):
    name = "avro"
    kinds = (AVRO,)
    description = "Avro in the schema registry's framing (magic 0, schema id)"


class Protobuf(_Framed):
    name = "protobuf"
    kinds = (PROTOBUF,)
    description = "Protobuf in the schema registry's framing (magic 0, schema id, message indexes)"


class JsonSchema(_Framed):
    name = "json-schema"
    kinds = (JSON,)
    description = "JSON Schema values in the schema registry's framing (magic 0, schema id)"


class Registry(_Framed):
    name = "registry"
    kinds = (AVRO, PROTOBUF, JSON)
    description = "the schema registry's framing, each record decoded by the kind of its schema id"


class AvroSingle:
    name = "avro-single"
    options = (SUBJECT_OPTION,)
    description = "Avro single-object encoding (C3 01 and the schema's CRC-64-AVRO fingerprint)"

    def bind(self, binding):
        arrow, schemas, _, defaults = table_type(binding, (AVRO,))
        return RegistryDecoder(schemas, arrow, (AVRO,), avro_fingerprints(schemas, binding.subject),
                               defaults=defaults)


def avro_fingerprints(schemas, subject: str) -> dict:
    """fingerprint -> schema id of the subject's versions (the schemas a single-object datum of this
    topic can name), by fastavro's Parsing Canonical Form and CRC-64-AVRO."""
    try:
        from fastavro.schema import fingerprint, parse_schema, to_parsing_canonical_form
    except ImportError:
        raise UsageError("avro-single needs fastavro: pip install 'kfmt[schemas]'") from None
    out = {}
    for schema_id in schemas.versions(subject):
        schema = schemas.get(schema_id)
        named: dict = {}
        for _, ref in schemas.references_of(schema):
            parse_schema(json.loads(ref.text), named_schemas=named)
        canonical = to_parsing_canonical_form(parse_schema(json.loads(schema.text), named_schemas=named))
        # fastavro gives the fingerprint's bytes as the encoding writes them: little-endian
        value = int.from_bytes(bytes.fromhex(fingerprint(canonical, "CRC-64-AVRO")), "little")
        out[value] = schema_id
    return out


@hookimpl
def kfmt_register_value_formats(register):
    for fmt in (Avro(), Protobuf(), JsonSchema(), Registry(), AvroSingle()):
        register(fmt)
