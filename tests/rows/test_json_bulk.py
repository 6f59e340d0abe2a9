"""JSON values decoded in bulk (json_values.decode_json: pyarrow's JSON reader on the chunk, the
payloads it refuses alone one by one) equal the one-by-one reference (json.loads, _shape, pa.array)
value for value and reason for reason, on chunks the standard json library writes with values that do
not fit mixed in: wrong types, fractions for integers, integers beyond int64, nulls, missing and extra
fields, nested objects and arrays, text that is not JSON, values over several lines."""
import json

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kfmt.default_plugins.values.json_values import _decode_one_by_one, arrow_type, decode_json

SCHEMA = {"type": "object", "properties": {
    "id": {"type": "integer"}, "name": {"type": "string"}, "price": {"type": "number"},
    "ok": {"type": "boolean"}, "tags": {"type": "array", "items": {"type": "string"}},
    "home": {"type": "object", "properties": {"city": {"type": ["string", "null"]}, "zip": {"type": "integer"}}},
    "items": {"type": "array", "items": {"type": "object", "properties": {"n": {"type": "integer"}}}}}}
ARROW = arrow_type(SCHEMA)
ANY = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=False),
                st.text(max_size=4), st.lists(st.integers(), max_size=2))
FITS = st.fixed_dictionaries({}, optional={
    "id": st.integers(-2**63, 2**63 - 1), "name": st.text(max_size=5), "price": st.floats(allow_nan=False, allow_infinity=False) | st.integers(-10**6, 10**6),
    "ok": st.booleans(), "tags": st.lists(st.text(max_size=3), max_size=3),
    "home": st.fixed_dictionaries({}, optional={"city": st.none() | st.text(max_size=4), "zip": st.integers(0, 99999)}),
    "items": st.lists(st.fixed_dictionaries({}, optional={"n": st.integers(-5, 5)}), max_size=2),
    "extra": ANY})
MISFITS = st.fixed_dictionaries({}, optional={name: ANY for name in ("id", "name", "price", "ok", "tags", "home")})
PAYLOAD = st.one_of(
    FITS.map(json.dumps), FITS.map(json.dumps), FITS.map(json.dumps),
    MISFITS.map(json.dumps), FITS.map(lambda v: json.dumps(v, indent=1)),
    st.sampled_from(["", "[1]", "nope", '{"id": 1', "null", "3", ' {"id": 2}', '{"name": "\\ud800"}']))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(PAYLOAD, min_size=1, max_size=40), st.booleans())
def test_bulk_equals_the_one_by_one_reference(texts, strict):
    payloads = [t.encode() for t in texts]
    values, failed = decode_json(payloads, ARROW, strict)
    want, want_failed = _decode_one_by_one(payloads, ARROW, strict)
    assert failed == want_failed
    assert values.type == want.type
    assert values.to_pylist() == want.to_pylist()


def test_a_chunk_with_misfits_keeps_the_rest_in_bulk(monkeypatch):
    from kfmt.default_plugins.values import json_values

    good = [json.dumps({"id": i, "name": "x"}).encode() for i in range(64)]
    payloads = good[:30] + [b'{"id": "not a number"}'] + good[30:]
    seen = []
    real = json_values._decode_one_by_one
    monkeypatch.setattr(json_values, "_decode_one_by_one", lambda p, a, s: seen.append(len(p)) or real(p, a, s))
    values, failed = decode_json(payloads, ARROW)
    assert [i for i, _ in failed] == [30]
    assert seen and max(seen) <= json_values.SMALLEST_BLOCK
    assert values.field("id").to_pylist()[:30] == list(range(30))
    assert isinstance(values, pa.StructArray)
