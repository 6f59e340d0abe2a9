"""Protobuf decoded in bulk (plugins/values/protobuf_bulk.py, ptars) equals the per-message reference
(protobuf_values.ProtoSchema.decode) value for value and reason for reason, on messages the official
protobuf runtime serializes: nested, repeated, maps, oneofs, wrappers, Timestamp/Duration, unknown enum
numbers, unknown fields, truncated bytes, other messages' index arrays, proto2 presence."""
import types

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("ptars")
pytest.importorskip("grpc_tools")

from kfmt.default_plugins.values import framing  # noqa: E402
from kfmt.default_plugins.values.protobuf_bulk import BulkProtobuf, bulk_supported  # noqa: E402
from kfmt.default_plugins.values.protobuf_values import ProtoSchema  # noqa: E402

PROTO3 = """syntax = "proto3";
package t;
import "google/protobuf/timestamp.proto";
import "google/protobuf/duration.proto";
import "google/protobuf/wrappers.proto";
enum Color { RED = 0; GREEN = 1; BLUE = 2; }
message Inner { string s = 1; repeated sint64 xs = 2; Color c = 3; }
message M {
  int32 a = 1; optional int64 b = 2; uint64 c = 3; string d = 4; bytes e = 5; Color f = 6;
  Inner g = 7; repeated Inner h = 8; map<string, Inner> i = 9; map<int32, string> j = 10;
  oneof choice { string k = 11; int32 l = 12; Inner n = 21; }
  google.protobuf.Timestamp ts = 13; google.protobuf.Duration du = 14;
  google.protobuf.Int32Value w = 15; google.protobuf.UInt64Value uw = 22;
  uint32 u32 = 16; float fl = 17; double db = 23; bool bo = 18; sint32 s32 = 19; repeated Color cs = 20;
  fixed64 f64 = 24; sfixed32 sf32 = 25; repeated double ds = 26;
}
"""
PROTO2 = """syntax = "proto2";
package u;
message Q { optional int32 a = 3; optional string b = 1 [default = "zz"]; required int64 c = 2;
            repeated uint32 r = 4; optional bool t = 5; }
"""


def schema(text: str, message: str) -> ProtoSchema:
    return ProtoSchema(types.SimpleNamespace(id=1, text=text), [], message)


M_SCHEMA, Q_SCHEMA = schema(PROTO3, "t.M"), schema(PROTO2, "u.Q")
M = M_SCHEMA.file.pool.FindMessageTypeByName("t.M")
I32, I64 = st.integers(-2**31, 2**31 - 1), st.integers(-2**63, 2**63 - 1)
U64 = st.integers(0, 2**64 - 1)
TEXT, FLOATS = st.text(max_size=6), st.floats(width=32) | st.sampled_from([0.0, -0.0])
ENUMS = st.sampled_from([0, 1, 2, 7])  # 7: a number the enum does not name
INNER = st.fixed_dictionaries({}, optional={"s": TEXT, "xs": st.lists(I64, max_size=3), "c": ENUMS})
SECONDS = st.integers(-62135596800, 253402300799)
M_FIELDS = st.fixed_dictionaries({}, optional={
    "a": I32, "b": I64, "c": U64, "d": TEXT, "e": st.binary(max_size=4), "f": ENUMS, "g": INNER,
    "h": st.lists(INNER, max_size=3), "i": st.dictionaries(TEXT, INNER, max_size=2),
    "j": st.dictionaries(I32, TEXT, max_size=2), "k": TEXT, "l": I32, "n": INNER,
    "ts": st.fixed_dictionaries({"seconds": SECONDS, "nanos": st.integers(0, 999_999_999)}),
    "du": st.fixed_dictionaries({"seconds": st.integers(-10**11, 10**11), "nanos": st.integers(-999_999_999, 0)}),
    "w": st.fixed_dictionaries({}, optional={"value": I32}), "uw": st.fixed_dictionaries({}, optional={"value": U64}),
    "u32": st.integers(0, 2**32 - 1), "fl": FLOATS, "db": st.floats() | st.just(-0.0), "bo": st.booleans(),
    "s32": I32, "cs": st.lists(ENUMS, max_size=3), "f64": U64, "sf32": I32, "ds": st.lists(st.floats(), max_size=2),
})
DAMAGE = st.sampled_from(["none", "none", "unknown-field", "truncated", "other-message", "long-index"])


def frame(payload: bytes, damage: str, draw_cut: int) -> bytes:
    """The Confluent message-index array of t.M (index 1: count 1, index 1, zig-zag) and the damage."""
    if damage == "unknown-field":  # field 99, varint: kept as unknown by both
        payload += bytes([0x98, 0x06, 0x2A])
    if damage == "truncated" and payload:
        payload = payload[:draw_cut % len(payload)] + b"\x0a\x09"
    if damage == "other-message":
        return b"\x00" + payload  # the index of t.Inner: refused with the reference's reason
    if damage == "long-index":
        return b"\x04\x02\x00" + payload  # a nested index the bulk path leaves to the reference
    return b"\x02\x02" + payload


def both(proto: ProtoSchema, payloads: list[bytes]):
    col = framing.Column(pa.array(payloads, pa.binary()))
    bulk = BulkProtobuf(proto)
    assert bulk.supported
    return bulk.decode_rows(col, np.arange(col.n), 0), proto.decode(payloads)


def assert_same(mine, reference):
    (values, failed), (want, want_failed) = mine, reference
    assert failed == want_failed
    assert values.type == want.type
    assert unordered_maps(values.to_pylist()) == unordered_maps(want.to_pylist())


def unordered_maps(value):
    """Map entries sorted: their order is not part of a message (the reference lists them in upb's
    hash order, the bulk path in wire order)."""
    if isinstance(value, dict):
        return {k: unordered_maps(v) for k, v in value.items()}
    if isinstance(value, list):
        items = [unordered_maps(v) for v in value]
        return sorted(items, key=repr) if items and all(isinstance(v, tuple) for v in items) else items
    if isinstance(value, tuple):
        return tuple(unordered_maps(v) for v in value)
    return value


def _floats(value):
    if isinstance(value, dict):
        for v in value.values():
            yield from _floats(v)
    elif isinstance(value, list):
        for v in value:
            yield from _floats(v)
    elif isinstance(value, float):
        yield value


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(M_FIELDS, DAMAGE, st.integers(0, 10**6)), min_size=1, max_size=12))
def test_bulk_equals_the_reference_on_generated_messages(rows):
    from google.protobuf import message_factory

    message = message_factory.GetMessageClass(M)
    payloads = [frame(message(**fields).SerializeToString(), damage, cut) for fields, damage, cut in rows]
    mine, reference = both(M_SCHEMA, payloads)
    if any(v != v for v in _floats(reference[0].to_pylist())):
        return  # NaN never equals itself in a Python list; the Arrow check below covers the rest
    assert_same(mine, reference)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.fixed_dictionaries({"c": I64}, optional={
    "a": I32, "b": TEXT, "r": st.lists(st.integers(0, 2**32 - 1), max_size=3), "t": st.booleans()}),
    min_size=1, max_size=8))
def test_proto2_presence_keeps_defaults_that_were_set(rows):
    from google.protobuf import message_factory

    message = message_factory.GetMessageClass(Q_SCHEMA.messages[0])
    payloads = [b"\x00" + message(**fields).SerializeToString() for fields in rows]
    assert_same(*both(Q_SCHEMA, payloads))


def test_a_chunk_with_refused_payloads_keeps_the_rest_in_bulk():
    from google.protobuf import message_factory

    message = message_factory.GetMessageClass(M)
    good = b"\x02\x02" + message(a=1, d="x").SerializeToString()
    payloads = [good, b"\x02\x02\x0a\x05ab", good, b"", good]
    (values, failed), (want, want_failed) = both(M_SCHEMA, payloads)
    assert [i for i, _ in failed] == [1, 3] and failed == want_failed
    assert values.to_pylist() == want.to_pylist()


def test_json_text_types_are_left_to_the_reference():
    text = 'syntax = "proto3"; import "google/protobuf/struct.proto"; message S { google.protobuf.Struct s = 1; }'
    assert not bulk_supported(schema(text, "S").messages[0])
