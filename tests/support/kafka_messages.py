"""Records of Kafka's message protocol encoded by a peer: kafka-python's JSON-schema-driven codec
(kafka.protocol.schemas, which reads Kafka's own message definitions), given kfmt's declared schema
turned back into Kafka's JSON form. The tests decode what it writes with kfmt's reader: the wire
rules (flexible versions, tagged fields, nullable structs, compact arrays) are then checked against
an independent implementation, for record types the real-broker corpus does not hold."""
from __future__ import annotations

import uuid

from hypothesis import strategies as st
from kafka.protocol.schemas.fields.struct import StructField

from kfmt.format.internal_topics.protocol import NO_VERSIONS, Field, Message

_TOP = 1 << 15


def _versions(span: tuple[int, int]) -> str | None:
    if span == NO_VERSIONS:
        return None
    low, high = span
    return f"{low}+" if high == _TOP else (f"{low}" if low == high else f"{low}-{high}")


def _field_json(f: Field) -> dict:
    out = {"name": f.name, "type": f.type, "versions": _versions(f.versions)}
    for key, span in (("nullableVersions", f.nullable), ("taggedVersions", f.tagged)):
        if span != NO_VERSIONS:
            out[key] = _versions(span)
    if f.tag is not None:
        out["tag"] = f.tag
    if f.default is None:
        out["default"] = "null"
    elif isinstance(f.default, bool):
        out["default"] = "true" if f.default else "false"
    elif isinstance(f.default, (int, float)) and f.default != 0:
        out["default"] = str(f.default)
    if f.fields:
        out["fields"] = [_field_json(x) for x in f.fields]
    return out


def kafka_json(schema: Message) -> dict:
    """The schema as Kafka's JSON message definition declares it."""
    return {"name": schema.name, "type": "data", "validVersions": _versions(schema.valid),
            "flexibleVersions": _versions(schema.flexible) or "none",
            "fields": [_field_json(f) for f in schema.fields]}


def peer_encode(schema: Message, values: dict, version: int) -> bytes:
    """kafka-python's encoding of `values` ({json name: value}, as kfmt's reader returns them)."""
    flexible = schema.is_flexible(version)
    return StructField(kafka_json(schema)).encode(_to_peer(schema.fields, values), version=version,
                                                   compact=flexible, tagged=flexible)


def _to_peer(fields: tuple[Field, ...], values: dict) -> dict:
    out = {}
    for f in fields:
        value = values.get(f.name)
        out[StructField.underscore_name(f.name)] = _peer_value(f, f.type, value)
    return out


def _peer_value(f: Field, type_: str, value):
    if value is None:
        return None
    if type_.startswith("[]"):
        return [(_to_peer(f.fields, v) if f.fields else _peer_value(f, type_[2:], v)) for v in value]
    if f.fields:
        return _to_peer(f.fields, value)
    return uuid.UUID(bytes=value) if type_ == "uuid" else value


_SCALARS = {
    "int8": st.integers(-128, 127), "int16": st.integers(-(1 << 15), (1 << 15) - 1),
    "uint16": st.integers(0, (1 << 16) - 1), "int32": st.integers(-(1 << 31), (1 << 31) - 1),
    "int64": st.integers(-(1 << 63), (1 << 63) - 1), "bool": st.booleans(),
    "float64": st.floats(allow_nan=False), "string": st.text(max_size=12),
    "bytes": st.binary(max_size=12), "uuid": st.binary(min_size=16, max_size=16),
}


def values_for(fields: tuple[Field, ...], version: int):
    """A strategy of values ({json name: value}) for the fields present in `version`; a field not
    in the version holds its default, as the reader leaves it."""
    parts = {}
    for f in fields:
        if not f.versions[0] <= version <= f.versions[1]:
            parts[f.name] = st.just(f.default_value())
            continue
        # the peer leaves out a tagged array, string or bytes that is empty, where Kafka leaves out
        # only its default (null for these): such a field is drawn non-empty
        strategy = _value(f, f.type, version, min_size=int(f.tag is not None and f.default is None))
        nullable = f.nullable[0] <= version <= f.nullable[1] and f.tag is None  # the peer drops tagged nulls
        parts[f.name] = st.none() | strategy if nullable else strategy
    return st.fixed_dictionaries(parts)


def _value(f: Field, type_: str, version: int, min_size: int = 0):
    if type_.startswith("[]"):
        element = values_for(f.fields, version) if f.fields else _SCALARS[type_[2:]]
        return st.lists(element, min_size=min_size, max_size=3)
    if f.fields:
        return values_for(f.fields, version)
    if min_size and type_ in ("string", "bytes"):
        return st.text(min_size=1, max_size=12) if type_ == "string" else st.binary(min_size=1, max_size=12)
    return _SCALARS[type_]
