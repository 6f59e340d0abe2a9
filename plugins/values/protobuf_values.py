"""Protobuf values of a registered `.proto` schema, as Spark's `from_protobuf` maps them
(SchemaConverters in spark-protobuf):

| Protobuf | Arrow |
| --- | --- |
| message | struct of its fields in field-number order (a oneof's members are fields too) |
| repeated T, map<K, V> | list<T>, map<K, V> |
| int32, sint32, sfixed32 / int64, sint64, sfixed64 | int32 / int64 |
| uint32, fixed32 / uint64, fixed64 | int64 / decimal128(20, 0) (no unsigned types in Spark or Iceberg) |
| float, double, bool, string, bytes | float32, float64, bool, string, binary |
| enum | string (the value's name; an unknown number as its digits) |
| google.protobuf.Timestamp / Duration | timestamp(us, UTC) / duration(us) |
| google.protobuf.*Value wrappers | the wrapped type, nullable |
| google.protobuf.Struct, Value, ListValue, Any, Empty | the value's JSON text (proto3 JSON mapping) |

A field not set -- and in proto3 a scalar at its default, which the wire does not tell apart from
unset -- is null (Spark's default `emit.default.values=false`).

The registry keeps Protobuf schemas as `.proto` text; it is compiled by protoc (grpcio-tools, with the
well-known types it ships) together with the schemas it references, and records are parsed by the
protobuf runtime (upb, its C parser). Confluent's framing puts the message-index array after the schema
id: a zig-zag varint count and that many zig-zag varint indexes (the path to the message through
top-level and nested messages), or the single byte 0 for the first top-level message.
"""
from __future__ import annotations

import decimal
import json
import os
import tempfile

import pyarrow as pa

from kfmt.errors import UsageError

TIMESTAMP = pa.timestamp("us", tz="UTC")
_WRAPPERS = {"google.protobuf.DoubleValue": pa.float64(), "google.protobuf.FloatValue": pa.float32(),
             "google.protobuf.Int64Value": pa.int64(), "google.protobuf.UInt64Value": pa.decimal128(20, 0),
             "google.protobuf.Int32Value": pa.int32(), "google.protobuf.UInt32Value": pa.int64(),
             "google.protobuf.BoolValue": pa.bool_(), "google.protobuf.StringValue": pa.string(),
             "google.protobuf.BytesValue": pa.binary()}
_JSON_TEXT = ("google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue",
              "google.protobuf.Any", "google.protobuf.Empty")


class ProtoSchema:
    """A registered Protobuf schema compiled: its messages, and the table type of the one its
    records are written with."""

    def __init__(self, schema, references: list, message: str | None = None):
        self.file = _compile(schema, references)
        self.messages = list(self.file.message_types_by_name.values())
        if not self.messages:
            raise ValueError("the schema defines no message")
        self.message = self._named(message) if message else None
        self.arrow = arrow_type(self.message or self.messages[0])

    def _named(self, name: str):
        for m in self.messages:
            if name in (m.name, m.full_name):
                return m
        raise ValueError(f"no message {name!r} in the schema")

    def with_indexes(self, indexes: list[int]):
        desc = self.messages[indexes[0]]
        for i in indexes[1:]:
            desc = desc.nested_types[i]
        return desc

    def decode(self, payloads: list[bytes]) -> tuple[pa.Array, list[tuple[int, str]]]:
        from google.protobuf import message_factory
        from google.protobuf.message import DecodeError

        values, failed, classes = [], [], {}
        for i, payload in enumerate(payloads):
            try:
                indexes, at = _message_indexes(payload)
                desc = self.with_indexes(indexes)
                if self.message is not None and desc is not self.message:
                    raise ValueError(f"message {desc.full_name}, not {self.message.full_name}")
                if desc.full_name not in classes:
                    classes[desc.full_name] = message_factory.GetMessageClass(desc)
                msg = classes[desc.full_name]()
                msg.ParseFromString(payload[at:])
                values.append(_value(msg))
            except (DecodeError, ValueError, IndexError) as err:
                failed.append((i, f"not a Protobuf message of the schema: {err}"))
                values.append(None)
        return pa.array(values, self.arrow), failed


def _message_indexes(payload: bytes) -> tuple[list[int], int]:
    count, at = _zigzag(payload, 0)
    if count == 0:
        return [0], at
    if count < 0 or count > len(payload):
        raise ValueError(f"a message-index array of {count} entries")
    indexes = []
    for _ in range(count):
        value, at = _zigzag(payload, at)
        indexes.append(value)
    return indexes, at


def _zigzag(b: bytes, p: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if p >= len(b):
            raise ValueError("the message-index array is cut short")
        byte = b[p]
        p += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), p
        shift += 7


def _compile(schema, references: list):
    """The FileDescriptor of `schema` (a RegisteredSchema), its references compiled with it."""
    try:
        from google.protobuf import descriptor_pb2, descriptor_pool
        from grpc_tools import protoc
    except ImportError:
        raise UsageError("Protobuf values need protobuf and grpcio-tools: pip install 'kfmt[schemas]'") from None
    import importlib.resources

    main = f"kfmt_registered_{schema.id}.proto"
    with tempfile.TemporaryDirectory(prefix="kfmt-proto-") as tmp:
        for name, text in [(n, s.text) for n, s in references] + [(main, schema.text)]:
            path = os.path.join(tmp, *name.split("/"))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
        out = os.path.join(tmp, "set.pb")
        include = str(importlib.resources.files("grpc_tools") / "_proto")
        code = protoc.main(["protoc", f"-I{tmp}", f"-I{include}", "--include_imports",
                            f"--descriptor_set_out={out}", main])
        if code != 0:
            raise ValueError(f"protoc could not compile schema id {schema.id}")
        with open(out, "rb") as f:
            files = descriptor_pb2.FileDescriptorSet.FromString(f.read())
    pool = descriptor_pool.DescriptorPool()
    for proto in files.file:
        pool.Add(proto)
    return pool.FindFileByName(main)


def arrow_type(desc, seen: tuple = ()) -> pa.DataType:
    """The Arrow type of a message descriptor."""
    if desc.full_name in _WRAPPERS:
        return _WRAPPERS[desc.full_name]
    if desc.full_name == "google.protobuf.Timestamp":
        return TIMESTAMP
    if desc.full_name == "google.protobuf.Duration":
        return pa.duration("us")
    if desc.full_name in _JSON_TEXT:
        return pa.string()
    if desc.full_name in seen:
        raise ValueError(f"message {desc.full_name} contains itself (recursive types have no table type)")
    fields = sorted(desc.fields, key=lambda f: f.number)
    return pa.struct([pa.field(f.name, _field_type(f, seen + (desc.full_name,))) for f in fields])


def _field_type(field, seen: tuple) -> pa.DataType:
    if _is_map(field):
        key, value = field.message_type.fields_by_name["key"], field.message_type.fields_by_name["value"]
        return pa.map_(_scalar_type(key, seen), _scalar_type(value, seen))
    item = _scalar_type(field, seen)
    return pa.list_(item) if _repeated(field) else item


def _repeated(field) -> bool:
    return getattr(field, "is_repeated", None) if hasattr(field, "is_repeated") else field.label == 3


def _is_map(field) -> bool:
    return (field.message_type is not None and _repeated(field)
            and field.message_type.GetOptions().map_entry)


def _scalar_type(field, seen: tuple) -> pa.DataType:
    from google.protobuf.descriptor import FieldDescriptor as F

    if field.type in (F.TYPE_MESSAGE, F.TYPE_GROUP):
        return arrow_type(field.message_type, seen)
    return {F.TYPE_INT32: pa.int32(), F.TYPE_SINT32: pa.int32(), F.TYPE_SFIXED32: pa.int32(),
            F.TYPE_INT64: pa.int64(), F.TYPE_SINT64: pa.int64(), F.TYPE_SFIXED64: pa.int64(),
            F.TYPE_UINT32: pa.int64(), F.TYPE_FIXED32: pa.int64(),
            F.TYPE_UINT64: pa.decimal128(20, 0), F.TYPE_FIXED64: pa.decimal128(20, 0),
            F.TYPE_FLOAT: pa.float32(), F.TYPE_DOUBLE: pa.float64(), F.TYPE_BOOL: pa.bool_(),
            F.TYPE_STRING: pa.string(), F.TYPE_BYTES: pa.binary(), F.TYPE_ENUM: pa.string()}[field.type]


def _value(msg):
    """A parsed message as the Python value pa.array takes for its Arrow type."""
    name = msg.DESCRIPTOR.full_name
    if name in _WRAPPERS:
        return _scalar(msg.DESCRIPTOR.fields_by_name["value"], msg.value)
    if name == "google.protobuf.Timestamp":
        return msg.seconds * 1_000_000 + msg.nanos // 1000
    if name == "google.protobuf.Duration":
        return msg.seconds * 1_000_000 + int(msg.nanos / 1000)
    if name in _JSON_TEXT:
        from google.protobuf import json_format

        return json.dumps(json_format.MessageToDict(msg), ensure_ascii=False)
    out = {}
    for field, value in msg.ListFields():  # the fields set (proto3: not at their default)
        if _is_map(field):
            vf = field.message_type.fields_by_name["value"]
            out[field.name] = [(k, _scalar(vf, v)) for k, v in value.items()]
        elif _repeated(field):
            out[field.name] = [_scalar(field, v) for v in value]
        else:
            out[field.name] = _scalar(field, value)
    return out


def _scalar(field, value):
    from google.protobuf.descriptor import FieldDescriptor as F

    if field.type in (F.TYPE_MESSAGE, F.TYPE_GROUP):
        return _value(value)
    if field.type == F.TYPE_ENUM:
        named = field.enum_type.values_by_number.get(value)
        return named.name if named is not None else str(value)
    if field.type in (F.TYPE_UINT64, F.TYPE_FIXED64):
        return decimal.Decimal(value)
    return value
