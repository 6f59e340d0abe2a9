"""The schema-registry corpus (tests/data/schemas-dev: partitions a real Kafka 3.6 broker wrote, values
serialized by confluent-kafka's serializers against a real Karapace registry) and its truth
(tests/data/schemas-dev-truth: every record decoded by confluent-kafka's deserializers; README-corpus.md
there says how values are rendered), and typed rows rendered the same way to compare with it."""
from __future__ import annotations

import base64
import datetime
import decimal
import gzip
import json
import math

from support.corpus import TESTS

SCHEMAS_DEV = TESTS / "data" / "schemas-dev"
SCHEMAS_TRUTH = TESTS / "data" / "schemas-dev-truth"
TOPICS = ("orders-avro", "changelog-avro", "events-json", "mixed-bad", "plain-json", "users-proto")
# the formats each topic's keys and values were written with (the corpus README)
KEY_FORMATS = ["string", "orders-*:avro", "changelog-*:avro"]  # the last match wins
VALUE_FORMATS = ["registry", "plain-*:json"]


def truth_records(topic: str) -> list[dict]:
    out = []
    for directory in sorted(SCHEMAS_TRUTH.glob(f"{topic}-*.truth")):
        with gzip.open(directory / "records.jsonl.gz", "rt") as f:
            out += [json.loads(line) for line in f]
    return out


def latest_per_key(topic: str) -> list[dict]:
    path = SCHEMAS_TRUTH / f"{topic}-0.truth" / "latest-per-key.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def rendered(value):
    """A typed value as the corpus's truth renders Avro and JSON values."""
    if isinstance(value, dict):
        return {k: rendered(v) for k, v in value.items()}
    if isinstance(value, list):
        if value and all(isinstance(v, tuple) for v in value):  # a map from to_pylist
            return {k: rendered(v) for k, v in value}
        return [rendered(v) for v in value]
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, datetime.datetime):
        return value.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    return value


def same_json(mine, truth) -> bool:
    """JSON Schema values: a property the truth lacks is null in the table (and floats compared as
    the float64 they are)."""
    if isinstance(truth, dict) and isinstance(mine, dict):
        return all(same_json(mine.get(k), truth.get(k)) for k in set(mine) | set(truth))
    if isinstance(truth, list) and isinstance(mine, list):
        return len(mine) == len(truth) and all(same_json(a, b) for a, b in zip(mine, truth))
    if isinstance(truth, float) or isinstance(mine, float):
        return mine is not None and truth is not None and math.isclose(mine, truth, rel_tol=1e-12)
    return mine == truth


_INT64_AS_STRING = ("score", "delta", "f64")  # int64, sint64, fixed64: strings in proto3 JSON


def proto_rendered(value, float32_fields=("ratio",)):
    """A typed Protobuf value as MessageToDict(preserving_proto_field_name=True) renders it: unset
    fields left out, 64-bit integers as strings, bytes base64, Timestamps RFC 3339, maps as objects
    (the registry's .proto text has the map as a repeated entry message: Karapace renders it so)."""
    out = {}
    for k, v in value.items():
        if v is None or v == []:
            continue
        if k == "counters":
            v = {e["key"]: e["value"] for e in v}
        elif k in _INT64_AS_STRING:
            v = str(v)
        elif isinstance(v, datetime.datetime):
            v = _rfc3339(v)
        elif isinstance(v, bytes):
            v = base64.b64encode(v).decode()
        elif isinstance(v, dict):
            v = proto_rendered(v)
        elif isinstance(v, list) and v and isinstance(v[0], dict):
            v = [proto_rendered(x) for x in v]
        out[k] = v
    return out


def _rfc3339(ts: datetime.datetime) -> str:
    text = ts.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    micros = ts.microsecond
    if micros:
        text += f".{micros:06d}" if micros % 1000 else f".{micros // 1000:03d}"
    return text + "Z"


def same_proto(mine: dict, truth: dict) -> bool:
    if set(mine) != set(truth):
        return False
    for k, v in truth.items():
        if isinstance(v, float):
            if not math.isclose(mine[k], v, rel_tol=1e-6):
                return False
        elif mine[k] != v:
            return False
    return True
