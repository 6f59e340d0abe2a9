"""`kfmt cat --key-format/--value-format`: decoded keys and values, rendered as the registry's
deserializers render them (the schema-registry corpus's truth)."""
from __future__ import annotations

import json

from support.cli import run_kfmt
from support.schema_truth import SCHEMAS_DEV, same_json, truth_records


def test_cat_json_renders_as_the_deserializers():
    result = run_kfmt("cat", SCHEMAS_DEV / "changelog-avro-0", "--key-format", "avro", "--value-format", "avro",
                      "--format", "json")
    assert result.code == 0, result.err
    got = [json.loads(line) for line in result.lines]
    truth = truth_records("changelog-avro")
    assert [g["offset"] for g in got] == [t["offset"] for t in truth]
    for g, t in zip(got, truth):
        assert g["key"] == t["key"] and same_json(g["value"], t["value"]), t["offset"]


def test_cat_warns_once_per_record_that_does_not_decode():
    result = run_kfmt("cat", SCHEMAS_DEV, "--topic", "mixed-bad", "--value-format", "avro", "--format", "json")
    assert result.code == 0
    assert len(result.lines) == 320
    warned = [line for line in result.err.splitlines() if "does not decode as avro" in line]
    assert len(warned) == 44, result.err[:2000]


def test_cat_fail_exits_65_naming_the_record():
    result = run_kfmt("cat", SCHEMAS_DEV / "mixed-bad-0", "--value-format", "avro", "--on-decode-error", "fail")
    assert result.code == 65
    assert "mixed-bad: offset 15: the value does not decode as avro: 3 bytes" in result.err
    assert len(result.err.strip().splitlines()) == 1


def test_cat_max_records_with_a_format_stops_per_partition():
    """--max-records with a value format: the first K records of each partition, decoded, as the
    deserializers' truth has them (K inside a batch and beyond the partition's end)."""
    truth = truth_records("orders-avro")
    for k in (0, 1, 7, 10**6):
        result = run_kfmt("cat", SCHEMAS_DEV, "--topic", "orders-avro", "--key-format", "avro",
                          "--value-format", "avro", "--format", "json", "--max-records", str(k))
        assert result.code == 0, result.err
        got = [json.loads(line) for line in result.lines]
        want = [t for p in sorted({t["partition"] for t in truth})
                for t in [t for t in truth if t["partition"] == p][:k]]
        assert [(g["partition"], g["offset"]) for g in got] == [(t["partition"], t["offset"]) for t in want]
        for g, t in zip(got, want):
            assert g["key"] == t["key"] and same_json(g["value"], t["value"]), t["offset"]
