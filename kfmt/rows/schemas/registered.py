"""Registered schemas as a registry keeps them: by id, and by subject and version.

Confluent's Schema Registry (and Karapace, which speaks its API and stores the same records) gives
every distinct schema text of a type an id; subjects hold numbered versions, each an id; a schema
may reference others by (name, subject, version) -- Avro named types defined elsewhere, Protobuf
imports. A soft-deleted version still resolves by id (the registry's GET /schemas/ids/N answers for
it); a permanently deleted one does not, unless another subject version holds the same id.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from kfmt.errors import UsageError

AVRO, PROTOBUF, JSON = "AVRO", "PROTOBUF", "JSON"
SCHEMA_TYPES = (AVRO, PROTOBUF, JSON)


@dataclass(frozen=True)
class SchemaReference:
    name: str  # the Avro full name or the Protobuf import path the schema uses
    subject: str
    version: int


@dataclass(frozen=True)
class RegisteredSchema:
    id: int
    schema_type: str  # AVRO, PROTOBUF or JSON (the registry leaves schemaType out for Avro)
    text: str
    references: tuple[SchemaReference, ...] = ()


@dataclass
class Schemas:
    """What a schema source holds; picklable, so tasks get it whole."""

    where: str  # for messages: the source it came from
    by_id: dict[int, RegisteredSchema] = field(default_factory=dict)
    # subject -> {version: (id, soft-deleted)}
    subjects: dict[str, dict[int, tuple[int, bool]]] = field(default_factory=dict)
    # asked for what is not held (a REST source, kfmt.rows.schemas.rest): .schema(id) ->
    # RegisteredSchema | None, .subject(name) -> {version: (id, soft-deleted)}
    lookup: object = None

    def get(self, schema_id: int) -> RegisteredSchema | None:
        found = self.by_id.get(schema_id)
        if found is None and self.lookup is not None:
            found = self.lookup.schema(schema_id)
            if found is not None:
                self.by_id[schema_id] = found
        return found

    def versions(self, subject: str) -> list[int]:
        """The ids of a subject's versions, oldest first (soft-deleted ones too: data written with
        them is still in the topics)."""
        if subject not in self.subjects and self.lookup is not None:
            self.subjects[subject] = self.lookup.subject(subject)
        return [schema_id for _, (schema_id, _) in sorted(self.subjects.get(subject, {}).items())]

    def version(self, subject: str, version: int) -> RegisteredSchema:
        self.versions(subject)
        entry = self.subjects.get(subject, {}).get(version)
        if entry is None:
            raise UsageError(f"{self.where}: no version {version} of subject {subject!r}")
        found = self.get(entry[0])
        if found is None:
            raise UsageError(f"{self.where}: subject {subject!r} version {version} names schema id "
                             f"{entry[0]}, which it does not hold")
        return found

    def references_of(self, schema: RegisteredSchema) -> list[tuple[str, RegisteredSchema]]:
        """(name, schema) of everything `schema` references, depth first, each once (a referenced
        schema before the ones that use it)."""
        out, seen = [], set()

        def walk(s: RegisteredSchema):
            for ref in s.references:
                if (ref.subject, ref.version) in seen:
                    continue
                seen.add((ref.subject, ref.version))
                target = self.version(ref.subject, ref.version)
                walk(target)
                out.append((ref.name, target))
        walk(schema)
        return out

    def add(self, subject: str | None, version: int | None, schema: RegisteredSchema,
            deleted: bool = False) -> None:
        self.by_id[schema.id] = schema
        if subject is not None and version is not None:
            self.subjects.setdefault(subject, {})[version] = (schema.id, deleted)
