"""Typed export (--key-format / --value-format) of the real schema-registry corpus, compared record for
record with what confluent-kafka's deserializers decoded (tests/support/schema_truth.py)."""
from __future__ import annotations

import base64
import json

import pyarrow as pa
import pyarrow.dataset as ds
import pytest
from support.schema_truth import (
    KEY_FORMATS,
    SCHEMAS_DEV,
    TOPICS,
    VALUE_FORMATS,
    proto_rendered,
    rendered,
    same_json,
    same_proto,
    truth_records,
)

from kfmt.api.commands import export
from kfmt.errors import DataError, UsageError


@pytest.fixture(scope="module")
def typed(tmp_path_factory):
    dst = tmp_path_factory.mktemp("typed") / "out"
    result = export(SCHEMAS_DEV, dst, key_format=KEY_FORMATS, value_format=VALUE_FORMATS, master="inprocess")
    return dst, result


def topic_rows(dst, topic: str, errors: bool = False) -> list[dict]:
    root = dst / "_errors" if errors else dst
    table = ds.dataset(root / f"topic={topic}", format="parquet", partitioning="hive").to_table()
    rows = table.to_pylist(maps_as_pydicts="strict") if not errors else table.to_pylist()
    return sorted(rows, key=lambda r: (r["partition"], r["offset"]))


def same_inferred(mine, truth) -> bool:
    """A value decoded with an inferred type against its json.loads: a field missing in the value is
    null in the struct, one whose sampled values disagreed holds its JSON text."""
    if isinstance(truth, dict):
        return isinstance(mine, dict) and all(same_inferred(mine[k], truth.get(k)) for k in mine) \
            and set(truth) <= set(mine)
    if isinstance(mine, str) and not isinstance(truth, str):
        return json.loads(mine) == truth
    if isinstance(truth, list):
        return len(mine) == len(truth) and all(same_inferred(m, t) for m, t in zip(mine, truth))
    return mine == truth


@pytest.mark.parametrize("topic", TOPICS)
def test_every_topic_equals_the_deserializers_truth(typed, topic):
    dst, _ = typed
    rows, truth = topic_rows(dst, topic), truth_records(topic)
    assert [(r["partition"], r["offset"]) for r in rows] == [(t["partition"], t["offset"]) for t in truth]
    for row, want in zip(rows, truth):
        if want.get("value_error") is None and want["value_b64"] is not None:
            value = row["value"]
            if topic.endswith("-avro") or topic == "mixed-bad":
                assert same_json(rendered(value), want["value"]), (topic, want["offset"])
            elif topic == "events-json":
                assert same_json(value, want["value"]), (topic, want["offset"])
            elif topic == "plain-json":  # a struct inferred from the data: the objects fit, the others not
                if isinstance(want["value"], dict):
                    assert same_inferred(value, want["value"]), want["offset"]
                else:
                    assert value is None
            else:
                assert same_proto(proto_rendered(value), want["value"]), (topic, want["offset"])
        else:
            assert row["value"] is None
        assert rendered(row["key"]) == want["key"], (topic, want["offset"])


def test_one_table_for_three_schema_versions(typed):
    """orders-avro holds schema ids 2, 3 and 4 (an added optional field, quantity int -> long)."""
    dst, _ = typed
    schema = ds.dataset(dst / "topic=orders-avro", format="parquet", partitioning="hive").schema
    value = schema.field("value").type
    assert value.field("quantity").type == pa.int64()
    assert value.field("coupon").type == pa.string()
    ids = {t.get("value_schema_id") for t in truth_records("orders-avro")} - {None}
    assert ids == {2, 3, 4}
    wide = [r for r in topic_rows(dst, "orders-avro") if r["value"] and r["value"]["quantity"] > 2**31]
    assert wide  # the v3 records past int32's range


def test_undecodable_records_go_to_the_dead_letter_output(typed):
    dst, report = typed
    bad = [t for t in truth_records("mixed-bad") if t.get("value_error")]
    dead = topic_rows(dst, "mixed-bad", errors=True)
    assert len(bad) == 44
    assert [d["offset"] for d in dead] == [t["offset"] for t in bad]
    kinds = {t["offset"]: dict((h[0], h[1]) for h in t["headers"])["kind"] for t in bad}
    for d in dead:
        assert d["side"] == "value" and d["format"] == "registry" and d["reason"]
        kind = base64.b64decode(kinds[d["offset"]]).decode()
        expected = {"unknown_schema_id": "is not in", "truncated": "", "not_framed": ""}[kind]
        assert expected in d["reason"]
    (entry,) = [e for e in report["decoding"] if e["topic"] == "mixed-bad"]
    assert entry["not_decoded"] == {"value": 44} and entry["dead_letters"] == 44
    # nothing else dropped: every topic's rows are all its records
    assert report["totals"]["output_records"] == report["totals"]["input_records"]
    assert not (dst / "_errors" / "topic=orders-avro").exists()


def test_readers_open_the_typed_table(typed):
    duckdb = pytest.importorskip("duckdb")
    dst, _ = typed
    glob = str(dst / "topic=orders-avro" / "*" / "*.parquet")
    n, total = duckdb.sql(f"select count(*), sum(value.quantity) from read_parquet('{glob}')").fetchall()[0]
    truth = [t for t in truth_records("orders-avro") if t["value"]]
    assert n == len(truth_records("orders-avro"))
    assert total == sum(t["value"]["quantity"] for t in truth)


def test_kfmt_read_decodes_as_export_does(typed):
    import kfmt

    dst, _ = typed
    for topic in ("orders-avro", "users-proto", "events-json"):
        table = kfmt.read(SCHEMAS_DEV, topics=topic, key_format=KEY_FORMATS, value_format=VALUE_FORMATS).read_all()
        rows = sorted(table.to_pylist(maps_as_pydicts="strict"), key=lambda r: (r["partition"], r["offset"]))
        exported = topic_rows(dst, topic)
        assert [r["value"] for r in rows] == [r["value"] for r in exported]


def test_fail_stops_at_the_first_bad_record(tmp_path):
    with pytest.raises(DataError, match=r"offset 15: mixed-bad-0: the value does not decode as avro: 3 bytes"):
        export(SCHEMAS_DEV, tmp_path / "out", topic="mixed-bad", value_format="avro",
               on_decode_error="fail", master="inprocess")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_skip_keeps_rows_and_writes_no_dead_letters(tmp_path):
    result = export(SCHEMAS_DEV, tmp_path / "out", topic="mixed-bad", value_format="avro",
                    on_decode_error="skip", master="inprocess")
    assert not (tmp_path / "out" / "_errors").exists()
    assert result["totals"]["output_records"] == 320
    assert result["decoding"][0]["not_decoded"] == {"value": 44}


def test_keep_raw_keeps_the_stored_bytes(tmp_path):
    export(SCHEMAS_DEV, tmp_path / "out", topic="changelog-avro", key_format="avro", value_format="avro",
           keep_raw=True, master="inprocess")
    rows = topic_rows(tmp_path / "out", "changelog-avro")
    truth = truth_records("changelog-avro")
    assert [r["value_bytes"] for r in rows] == [t["value_b64"] and base64.b64decode(t["value_b64"])
                                               for t in truth]


def test_a_format_without_schemas_is_refused(tmp_path):
    import shutil

    shutil.copytree(SCHEMAS_DEV / "orders-avro-0", tmp_path / "logs" / "orders-avro-0")  # no _schemas beside it
    with pytest.raises(UsageError, match="needs schemas"):
        export(tmp_path / "logs", tmp_path / "out", value_format="avro", master="inprocess")


def test_unknown_format_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="unknown value format 'avroo'"):
        export(SCHEMAS_DEV, tmp_path / "out", value_format="avroo", master="inprocess")


def test_upsert_is_the_latest_value_per_key(tmp_path):
    """The compacted changelog topic as its table: exactly the truth's latest-per-key records."""
    from support.schema_truth import latest_per_key

    report = export(SCHEMAS_DEV, tmp_path / "out", topic="changelog-avro", mode="upsert", key_format="avro",
                    value_format="avro", isolation="read_committed", master="inprocess")
    rows = topic_rows(tmp_path / "out", "changelog-avro")
    truth = sorted(latest_per_key("changelog-avro"), key=lambda t: t["offset"])
    assert [(r["key"], r["offset"]) for r in rows] == [(t["key"], t["offset"]) for t in truth]
    for row, want in zip(rows, truth):
        assert same_json(rendered(row["value"]), want["value"])
    assert report["totals"]["output_records"] == len(truth) == 57
    assert report["totals"]["input_records"] == len(truth_records("changelog-avro"))


def test_upsert_into_files_refuses_append(tmp_path):
    with pytest.raises(UsageError, match="writes the whole table"):
        export(SCHEMAS_DEV, tmp_path / "out", topic="changelog-avro", mode="upsert", append=True,
               master="inprocess")
