"""Value formats against independent encoders: confluent-kafka's AvroSerializer (with its in-memory mock
registry), fastavro's single-object-free schemaless writer framed by the Avro specification's rules;
schemas from a schema directory and from a registry's REST API served on 127.0.0.1."""
from __future__ import annotations

import base64
import datetime
import decimal
import http.server
import io
import json
import threading

import pyarrow as pa
import pytest
from support.schema_truth import SCHEMAS_DEV, SCHEMAS_TRUTH, truth_records
from support.typed_inputs import rabin_fingerprint, schema_directory, write_partition

import kfmt
from kfmt.errors import UsageError
from kfmt.plugin import manager
from kfmt.plugin.hookspecs import hookimpl

EVERYTHING = {
    "type": "record", "name": "Everything", "namespace": "t",
    "fields": [
        {"name": "flag", "type": "boolean"},
        {"name": "small", "type": "int"},
        {"name": "ratio", "type": "float"},
        {"name": "blob", "type": "bytes"},
        {"name": "hash", "type": {"type": "fixed", "name": "Hash", "size": 4}},
        {"name": "choice", "type": ["null", "string", "long", {"type": "record", "name": "Point",
                                                                "fields": [{"name": "x", "type": "int"}]}]},
        {"name": "again", "type": ["null", "Point"], "default": None},
        {"name": "color", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}},
        {"name": "grid", "type": {"type": "array", "items": {"type": "map", "values": "double"}}},
        {"name": "price", "type": {"type": "fixed", "name": "Price", "size": 8, "logicalType": "decimal",
                                   "precision": 18, "scale": 3}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "at_ms", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "at_us", "type": {"type": "long", "logicalType": "time-micros"}},
        {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    ]}


def everything(i: int) -> dict:
    choice = [None, f"s{i}", 2**40 + i, {"x": i}][i % 4]
    return {"flag": i % 2 == 0, "small": -i, "ratio": 0.5 * i, "blob": bytes([i % 256]) * (i % 3),
            "hash": i.to_bytes(4, "big"), "choice": choice, "again": {"x": -i} if i % 3 else None,
            "color": ["RED", "GREEN"][i % 2], "grid": [{"a": i / 3}, {}] if i % 2 else [],
            # (no -0.000: fastavro 1.13 writes Decimal("-0.000") as the unscaled value -2)
            "price": decimal.Decimal((i + 1) * 1001).scaleb(-3) * (-1 if i % 5 == 0 else 1),
            "day": datetime.date(2024, 2, 29) + datetime.timedelta(days=i),
            "at_ms": datetime.time(1, 2, 3, 4000 * (i % 250)), "at_us": datetime.time(23, 59, 59, i),
            "local": datetime.datetime(2025, 1, 1, 12) + datetime.timedelta(milliseconds=i),
            "ts": datetime.datetime(2025, 1, 1, tzinfo=datetime.timezone.utc) + datetime.timedelta(microseconds=i)}


def expected(i: int) -> dict:
    """everything(i) as the decoded column holds it (docs/typed-export.md's mapping)."""
    v = everything(i)
    choice = v["choice"]
    members = {"member0": None, "member1": None, "member2": None}
    if choice is not None:
        members[{str: "member0", int: "member1", dict: "member2"}[type(choice)]] = choice
    return {**v, "choice": None if choice is None else members,
            "grid": [list(m.items()) for m in v["grid"]], "local": v["local"]}


@pytest.fixture(scope="module")
def serialized(tmp_path_factory):
    """100 values through confluent-kafka's AvroSerializer (mock registry), in a partition directory,
    with a schema directory holding the id the serializer registered."""
    from confluent_kafka.schema_registry._sync.mock_schema_registry_client import (
        MockSchemaRegistryClient as SchemaRegistryClient,
    )
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    client = SchemaRegistryClient({"url": "mock://typed-tests"})
    serializer = AvroSerializer(client, json.dumps(EVERYTHING))
    context = SerializationContext("things", MessageField.VALUE)
    values = [serializer(everything(i), context) for i in range(100)]
    root = tmp_path_factory.mktemp("serialized")
    write_partition(root / "logs" / "things-0", [(None, v) for v in values])
    registered = client.get_latest_version("things-value")
    schemas = schema_directory(root / "schemas", [{"id": registered.schema_id, "subject": "things-value",
                                                   "version": 1, "schema": EVERYTHING}])
    return root / "logs", schemas, values


def test_avro_matches_confluent_kafkas_serializer(serialized):
    logs, schemas, _ = serialized
    table = kfmt.read(logs, value_format="avro", schemas=str(schemas)).read_all()
    got = table.column("value").to_pylist()
    for i, row in enumerate(got):
        want = expected(i)
        assert row.keys() == want.keys()
        for name in want:
            assert row[name] == want[name], (i, name, row[name], want[name])


def test_types_follow_sparks_from_avro(serialized):
    logs, schemas, _ = serialized
    value = kfmt.read(logs, value_format="avro", schemas=str(schemas)).schema.field("value").type
    assert value.field("choice").type == pa.struct([("member0", pa.string()), ("member1", pa.int64()),
                                                    ("member2", pa.struct([("x", pa.int32())]))])
    assert value.field("again").type == pa.struct([("x", pa.int32())])
    assert value.field("hash").type == pa.binary()
    assert value.field("price").type == pa.decimal128(18, 3)
    assert value.field("local").type == pa.timestamp("us")
    assert value.field("ts").type == pa.timestamp("us", tz="UTC")
    assert value.field("grid").type == pa.list_(pa.map_(pa.string(), pa.float64()))


def test_avro_single_object_encoding(tmp_path):
    """Datums framed as the Avro specification's single-object encoding: C3 01, the CRC-64-AVRO
    fingerprint of the schema's canonical form (computed here from the specification's algorithm)
    little-endian, the datum (fastavro's schemaless writer)."""
    import fastavro

    schema = {"type": "record", "name": "P", "fields": [{"name": "x", "type": "long"},
                                                        {"name": "s", "type": "string"}]}
    canonical = b'{"name":"P","type":"record","fields":[{"name":"x","type":"long"},{"name":"s","type":"string"}]}'
    header = b"\xc3\x01" + rabin_fingerprint(canonical).to_bytes(8, "little")
    values = []
    for i in range(10):
        out = io.BytesIO()
        fastavro.schemaless_writer(out, schema, {"x": i * 1000, "s": f"v{i}"})
        values.append(header + out.getvalue())
    values.append(b"\xc3\x01" + b"\x00" * 8 + b"\x02")  # a fingerprint of no schema
    write_partition(tmp_path / "logs" / "points-0", [(None, v) for v in values])
    schemas = schema_directory(tmp_path / "schemas", [{"id": 7, "subject": "points-value", "version": 1,
                                                       "schema": schema}])
    table = kfmt.read(tmp_path / "logs", value_format="avro-single", schemas=str(schemas)).read_all()
    assert table.column("value").to_pylist() == [{"x": i * 1000, "s": f"v{i}"} for i in range(10)] + [None]


def test_incompatible_versions_are_refused_naming_both_ids(tmp_path):
    v1 = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}
    v2 = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "string"}]}
    schemas = schema_directory(tmp_path / "schemas", [{"id": 21, "subject": "r-value", "version": 1, "schema": v1},
                                                      {"id": 22, "subject": "r-value", "version": 2, "schema": v2}])
    write_partition(tmp_path / "logs" / "r-0", [(None, b"\x00\x00\x00\x00\x15\x02")])
    with pytest.raises(UsageError, match=r"schema ids 21 and 22 of subject 'r-value' cannot share one table \(a: "):
        kfmt.read(tmp_path / "logs", value_format="avro", schemas=str(schemas))


class RegistryHandler(http.server.BaseHTTPRequestHandler):
    """The read-only part of a schema registry's REST API, from the corpus's REST dump, behind basic
    authentication (user `reader`, password `s3cret`)."""

    dump: dict = {}
    requests: list = []

    def do_GET(self):
        self.requests.append(self.path)
        if self.headers.get("Authorization") != "Basic " + base64.b64encode(b"reader:s3cret").decode():
            return self._send(401, {"error_code": 401, "message": "Unauthorized"})
        path, _, _ = self.path.partition("?")
        parts = path.strip("/").split("/")
        by_id, by_subject = self.dump["by_id"], self.dump["by_subject"]
        if parts[:2] == ["schemas", "ids"] and parts[2] in by_id:
            entry = by_id[parts[2]]
            return self._send(200, {k: entry[k] for k in ("schema", "schemaType", "references") if k in entry})
        if parts[0] == "subjects" and len(parts) >= 3:
            subject = __import__("urllib.parse").parse.unquote(parts[1])
            versions = by_subject.get(subject)
            if versions is not None and len(parts) == 3:
                return self._send(200, [int(v) for v in versions])
            if versions is not None and parts[3] in versions:
                return self._send(200, versions[parts[3]])
        self._send(404, {"error_code": 40403, "message": "Schema not found"})

    def _send(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def registry():
    dump = json.loads((SCHEMAS_TRUTH / "_registry.json").read_text())
    RegistryHandler.dump = _normalized(dump)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), RegistryHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _normalized(dump: dict) -> dict:
    """by_id and by_subject keyed by strings, as the REST answers are looked up."""
    by_subject = {}
    for subject, versions in dump["by_subject"].items():
        items = versions.items() if isinstance(versions, dict) else [(v["version"], v) for v in versions]
        by_subject[subject] = {str(k): v for k, v in items}
    return {"by_id": {str(k): v for k, v in dump["by_id"].items()}, "by_subject": by_subject}


def test_schemas_from_a_registry_url(registry):
    table = kfmt.read(SCHEMAS_DEV, topics="orders-avro", value_format="avro", schemas=registry,
                      schema_registry_auth="reader:s3cret", on_decode_error="fail").read_all()
    from_topic = kfmt.read(SCHEMAS_DEV, topics="orders-avro", value_format="avro").read_all()
    assert table.column("value").to_pylist() == from_topic.column("value").to_pylist()
    assert len(truth_records("orders-avro")) == table.num_rows


def test_registry_auth_refused_is_one_line(registry, tmp_path):
    from kfmt.api.commands import export
    from kfmt.errors import KfmtError

    with pytest.raises(KfmtError, match=r"schema registry http://127.0.0.1:\d+/subjects/orders-avro-value/"
                                        r"versions\?deleted=true: HTTP 401"):
        export(SCHEMAS_DEV, tmp_path / "out", topic="orders-avro", value_format="avro",
               schemas=registry, schema_registry_auth="reader:wrong", master="inprocess")


class Reversed:
    """A third-party value format: the bytes reversed, as text."""

    name = "reversed"
    options = ()
    description = "test"

    def bind(self, binding):
        return self

    arrow_type = pa.string()

    def decode(self, data):
        from kfmt.format.value_formats import Decoded

        return Decoded(pa.array([None if v is None else v[::-1].decode() for v in data.to_pylist()], pa.string()))


class ReversedPlugin:
    @hookimpl
    def kfmt_register_value_formats(self, register):
        register(Reversed())


def test_a_plugin_adds_a_value_format(tmp_path):
    write_partition(tmp_path / "logs" / "words-0", [(b"k", b"olleh"), (None, None)])
    plugin = ReversedPlugin()
    manager.register(plugin, "reversed-format")
    try:
        table = kfmt.read(tmp_path / "logs", value_format="reversed").read_all()
        assert table.column("value").to_pylist() == ["hello", None]
    finally:
        manager.unregister("reversed-format")
    with pytest.raises(UsageError, match="unknown value format 'reversed'"):
        kfmt.read(tmp_path / "logs", value_format="reversed")
