"""A message read by kfmt.format.internal_topics.protocol, as Kafka's generated XxxJsonConverter.write
renders it (the JSON kafka-dump-log 4.x prints): uuid as Uuid.toString, bytes as standard base64,
float64 written as Java writes a double (kfmt.inspect.dump.decoders.jackson), a tagged field only
when it differs from its default, fields of the version only, in schema order."""
from __future__ import annotations

import base64

from kfmt.format.internal_topics.protocol import Field, Message, kafka_uuid, within


def to_json(fields: tuple[Field, ...], values: dict, version: int, flexible: bool) -> dict:
    """What Kafka's generated XxxJsonConverter.write puts in its ObjectNode, in the same order."""
    out = {}
    for f in fields:
        if not within(version, f.versions):
            continue
        value = values[f.name]
        if flexible and within(version, f.tagged) and f.is_default(value):
            continue
        out[f.name] = _json_value(f, f.type, value, version, flexible)
    return out


def _json_value(f: Field, type_: str, value, version: int, flexible: bool):
    if value is None:
        return None
    if type_ == "uuid":
        return kafka_uuid(value)
    if type_ == "bytes":
        return base64.b64encode(value).decode("ascii")
    if type_.startswith("[]"):
        if f.fields:
            return [to_json(f.fields, v, version, flexible) for v in value]
        return [_json_value(f, type_[2:], v, version, flexible) for v in value]
    if f.fields:
        return to_json(f.fields, value, version, flexible)
    return value


def message_json(schema: Message, values: dict, version: int) -> dict:
    return to_json(schema.fields, values, version, schema.is_flexible(version))
