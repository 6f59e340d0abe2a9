"""Kafka's message protocol (the generated *Data / *Record classes), read from a declarative table.

A schema is a Message: its fields in wire order, each with a type, the versions it exists in,
the versions it may be null in, and for tagged fields the tag. One reader (read_message) decodes
any schema at any version into {field name: value}; what a tool prints of it is the caller's
(kfmt dump writes what Kafka's generated JsonConverter classes write: kfmt.inspect.dump.decoders.
converter). Wire rules (KIP-482 flexible versions):

* flexible: strings, bytes and arrays carry an unsigned varint length + 1 (0 = null); every
  struct, the message included, ends with a tagged-field section (uvarint count, then per field
  uvarint tag, uvarint size, data). Tagged fields absent from the section keep their default.
* not flexible: strings int16 length, bytes int32 length, arrays int32 count (-1 = null).

Types: int8, int16, uint16, int32, int64, float64, bool, string, bytes, uuid, []<type>, and
structs (a field with `fields`: `[]Name` an array of them, `Name` one; a nullable one is preceded
by a marker: an int8, -1 for null, or in the tagged section a uvarint, 0 for null; the generator's
generateStructReader). Values: uuid as its 16 bytes (kafka_uuid gives Kafka's Uuid.toString),
bytes as bytes, float64 as a float, strings as Java decodes them (kfmt.format.javatext).

Defaults follow Kafka's generator (FieldSpec.fieldDefault): a field declared without one defaults to
0, false, "", empty bytes, the zero uuid, an empty array or a struct of defaults; `default=None` is
a schema's `"default": "null"`. A schema's `"default": null` (JSON null) is no default at all, so
such a field is declared without one.
"""
from __future__ import annotations

import base64
from dataclasses import dataclass, field

from kfmt.errors import DataError
from kfmt.format.javatext import java_string
from kfmt.format.wire import TYPES

NO_VERSIONS = (1, 0)  # an empty range


def versions(spec: str | None) -> tuple[int, int]:
    """Kafka's version range syntax: "0+", "3", "1-2"; None = no versions."""
    if spec is None:
        return NO_VERSIONS
    if spec.endswith("+"):
        return int(spec[:-1]), 1 << 15
    low, _, high = spec.partition("-")
    return int(low), int(high or low)


def within(version: int, span: tuple[int, int]) -> bool:
    return span[0] <= version <= span[1]


_IMPLICIT = object()  # F() without a default: the type's own (Kafka's "no default")


@dataclass(frozen=True)
class Field:
    name: str  # the JSON name (Kafka's camelCase field name)
    type: str
    versions: tuple[int, int]
    nullable: tuple[int, int] = NO_VERSIONS
    tag: int | None = None
    tagged: tuple[int, int] = NO_VERSIONS
    # what a tagged field absent from the record, or a field absent from the version, holds
    default: object = None
    fields: tuple["Field", ...] = ()  # the fields of a struct or []struct field

    @property
    def element(self) -> str | None:
        return self.type[2:] if self.type.startswith("[]") else None

    def is_default(self, value) -> bool:
        """Whether `value` is this field's default (FieldSpec.generateNonDefaultValueCheck: null is a
        default only where the default is null); a tagged field at its default is not written."""
        if self.default is None or value is None:
            return value is None and self.default is None
        if self.default is _EMPTY:
            return value == self.default_value()
        return value == self.default

    def default_value(self):
        """A fresh copy of the default (lists and structs are filled in by readers)."""
        if self.default is _EMPTY:
            return [] if self.element is not None else {f.name: f.default_value() for f in self.fields}
        return self.default


_EMPTY = object()  # the implicit default of arrays (empty) and structs (all fields at their defaults)


def F(name: str, type_: str, vers: str | None = "0+", *, nullable: str | None = None,
      tag: int | None = None, tagged: str | None = None, default=_IMPLICIT, fields: tuple = ()) -> Field:
    """One schema field, written the way Kafka's JSON schema files declare it (a tagged field
    without "versions" exists in its tagged versions)."""
    if tag is not None and tagged is None:
        tagged = vers
    if vers is None:
        vers = tagged
    if default is _IMPLICIT:
        default = _EMPTY if (type_.startswith("[]") or fields) else _ZERO[type_]
    return Field(name, type_, versions(vers), versions(nullable), tag, versions(tagged), default,
                 tuple(fields))


_ZERO = {"int8": 0, "int16": 0, "uint16": 0, "int32": 0, "int64": 0, "float64": 0.0, "bool": False,
         "string": "", "bytes": b"", "uuid": b"\0" * 16}


@dataclass(frozen=True)
class Message:
    name: str
    valid: tuple[int, int]
    flexible: tuple[int, int]
    fields: tuple[Field, ...] = field(default=())

    def is_flexible(self, version: int) -> bool:
        return within(version, self.flexible)


def message(name: str, valid: str, flexible: str | None, *fields: Field) -> Message:
    return Message(name, versions(valid), versions(flexible), tuple(fields))


class Reader:
    """A cursor over a record's key or value bytes."""

    def __init__(self, data: bytes, what: str):
        self.data = memoryview(data)
        self.pos = 0
        self.what = what

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise DataError(f"{self.what}: {n} bytes needed at byte {self.pos} of {len(self.data)}")
        out = bytes(self.data[self.pos:self.pos + n])
        self.pos += n
        return out

    def fixed(self, type_: str):
        """A fixed-size value of one of kfmt.format.wire's TYPES (int8 .. float64), big-endian."""
        layout = TYPES[type_]
        return layout.unpack(self.take(layout.size))[0]

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            b = self.take(1)[0]
            value |= (b & 0x7F) << shift
            if b < 0x80:
                return value
            shift += 7
            if shift > 28:
                raise DataError(f"{self.what}: varint longer than 5 bytes at byte {self.pos}")

    def remaining(self) -> int:
        return len(self.data) - self.pos


def read_message(schema: Message, data: bytes, version: int, what: str | None = None,
                 exact: bool = False) -> dict:
    """Decode data as schema at version: {json name: value}. Kafka's readers ignore bytes after
    the message; exact=True refuses them (the tests check the schemas with it)."""
    what = what or schema.name
    if not within(version, schema.valid):
        raise DataError(f"{what}: version {version} is not a version of {schema.name}")
    reader = Reader(data, what)
    value = read_struct(reader, schema.fields, version, schema.is_flexible(version))
    if exact and reader.remaining():
        raise DataError(f"{what}: {reader.remaining()} bytes left after {schema.name} v{version}")
    return value


def read_struct(reader: Reader, fields: tuple[Field, ...], version: int, flexible: bool) -> dict:
    values = {}
    for f in fields:
        if not within(version, f.versions) or (flexible and within(version, f.tagged)):
            values[f.name] = f.default_value()
        else:
            values[f.name] = _read_value(reader, f, f.type, version, flexible)
    if flexible:
        by_tag = {f.tag: f for f in fields if within(version, f.tagged)}
        for _ in range(reader.uvarint()):
            tag, size = reader.uvarint(), reader.uvarint()
            body = reader.take(size)
            f = by_tag.get(tag)
            if f is None:
                continue  # an unknown tagged field: kept by Kafka, printed nowhere
            sub = Reader(body, f"{reader.what} (tag {tag})")
            values[f.name] = _read_value(sub, f, f.type, version, True, tagged=True)
    return values


def _read_value(reader: Reader, f: Field, type_: str, version: int, flexible: bool, tagged: bool = False):
    if type_ in TYPES:
        return reader.fixed(type_)
    if type_ == "bool":
        return reader.take(1)[0] != 0
    if type_ == "uuid":
        return reader.take(16)
    if type_ in ("string", "bytes"):
        if flexible:
            length = reader.uvarint() - 1
        else:
            length = reader.fixed("int16" if type_ == "string" else "int32")
        if length < 0:
            return _null(reader, f, version)
        raw = reader.take(length)
        return java_string(raw) if type_ == "string" else raw
    if type_.startswith("[]"):
        count = reader.uvarint() - 1 if flexible else reader.fixed("int32")
        if count < 0:
            return _null(reader, f, version)
        if count > reader.remaining():  # every element takes a byte at least
            raise DataError(f"{reader.what}: array of {count} elements in {reader.remaining()} bytes")
        element = type_[2:]
        if f.fields:
            return [read_struct(reader, f.fields, version, flexible) for _ in range(count)]
        return [_read_value(reader, f, element, version, flexible) for _ in range(count)]
    if f.fields:  # one struct; a nullable one says first whether it is there
        if within(version, f.nullable) and (reader.uvarint() <= 0 if tagged else reader.fixed("int8") < 0):
            return None
        return read_struct(reader, f.fields, version, flexible)
    raise DataError(f"{reader.what}: no reader for type {type_}")


def _null(reader: Reader, f: Field, version: int):
    if not within(version, f.nullable):
        raise DataError(f"{reader.what}: non-nullable field {f.name} is null")
    return None


def kafka_uuid(raw: bytes) -> str:
    """`Uuid.toString()`: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


FRAME_VERSION = 1


def read_frame(value: bytes | None, what: str) -> tuple[int, int, bytes]:
    """(api key, version, message bytes) of a value framed by Kafka's AbstractApiMessageSerde
    (MetadataRecordSerde, RemoteLogMetadataSerde): uvarint frame version 1, api key, version."""
    if value is None:
        raise DataError("the record has no value")
    reader = Reader(value, what)
    frame = reader.uvarint()
    if frame != FRAME_VERSION:
        raise DataError(f"Could not deserialize metadata record due to unknown frame version "
                        f"{frame}(expected {FRAME_VERSION})")
    api_key, version = reader.uvarint(), reader.uvarint()
    return api_key, version, bytes(value[reader.pos:])
