"""A subject whose versions no one table holds (a field's type changed from int to string): refused in
one line naming both schema ids, or on request (`tables=per-schema-id`) written as one table per schema
id, each read back by pyarrow and DuckDB equal to fastavro's decoding of its records, the tombstones and
the records that do not decode in a table of their own: every record in exactly one table."""
from __future__ import annotations

import io

import pyarrow.dataset as ds
import pytest
from support.typed_inputs import schema_directory, write_partition

import kfmt
from kfmt.api.commands import export
from kfmt.errors import UsageError

V1 = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}
V2 = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "string"},
                                                {"name": "b", "type": ["null", "long"], "default": None}]}
SCHEMAS = {21: V1, 22: V2}


def framed(schema_id: int, value: dict) -> bytes:
    import fastavro

    out = io.BytesIO()
    fastavro.schemaless_writer(out, SCHEMAS[schema_id], value)
    return b"\x00" + schema_id.to_bytes(4, "big") + out.getvalue()


def truth(value: bytes):
    import fastavro

    schema_id = int.from_bytes(value[1:5], "big")
    return schema_id, fastavro.schemaless_reader(io.BytesIO(value[5:]), SCHEMAS[schema_id], None)


@pytest.fixture
def topic(tmp_path):
    records = [(b"k%d" % i, framed(21, {"a": i})) for i in range(7)]
    records += [(b"t", None), (b"bad", b"\x00\x00\x00\x03\xe7xx")]  # a tombstone, an unknown schema id
    records += [(b"k%d" % i, framed(22, {"a": f"s{i}", "b": i * 10 if i % 2 else None})) for i in range(5)]
    write_partition(tmp_path / "logs" / "r-0", records, batch_records=4)
    schemas = schema_directory(tmp_path / "s", [{"id": i, "subject": "r-value", "version": v, "schema": s}
                                                for v, (i, s) in enumerate(SCHEMAS.items(), 1)])
    return tmp_path / "logs", str(schemas), records


def test_versions_no_table_holds_are_refused_naming_both_ids(tmp_path, topic):
    logs, schemas, _ = topic
    with pytest.raises(UsageError) as err:
        export(logs, tmp_path / "out", value_format="avro", schemas=schemas)
    message = str(err.value)
    assert "schema ids 21 and 22 of subject 'r-value' cannot share one table" in message
    assert "tables=per-schema-id" in message and "\n" not in message


def test_one_table_per_schema_id_on_request(tmp_path, topic):
    duckdb = pytest.importorskip("duckdb")
    logs, schemas, records = topic
    dst = tmp_path / "out"
    report = export(logs, dst, value_format="avro", schemas=schemas, value_format_options={"tables": "per-schema-id"})
    by_offset = {i: r for i, r in enumerate(records)}
    seen = []
    for schema_id in (21, 22):
        root = dst / "topic=r" / f"value_schema_id={schema_id}"
        rows = ds.dataset(root, partitioning="hive").to_table().sort_by("offset").to_pylist()
        for row in rows:
            assert truth(by_offset[row["offset"]][1]) == (schema_id, row["value"])
        via_duckdb = duckdb.sql(f"select count(*) from read_parquet('{root}/**/*.parquet')").fetchall()[0][0]
        assert via_duckdb == len(rows)
        seen += [r["offset"] for r in rows]
    rest = ds.dataset(dst / "topic=r" / "value_schema_id=none", partitioning="hive").to_table()
    assert sorted(rest.column("offset").to_pylist()) == [7, 8]
    assert sorted(seen + rest.column("offset").to_pylist()) == list(range(len(records)))
    assert report["totals"]["output_records"] == len(records)
    dead = ds.dataset(dst / "_errors", partitioning="hive").to_table()
    assert dead.column("offset").to_pylist() == [8] and "999" in dead.column("reason")[0].as_py()


def test_one_stream_holds_a_member_per_schema_id(topic):
    logs, schemas, records = topic
    table = kfmt.read(str(logs), value_format="avro", schemas=schemas,
                      value_format_options={"tables": "per-schema-id"}).read_all()
    assert [f.name for f in table.schema.field("value").type] == ["schema_21", "schema_22"]
    for offset, value in zip(table.column("offset").to_pylist(), table.column("value").to_pylist()):
        stored = records[offset][1]
        if offset in (7, 8):
            assert value is None
        else:
            schema_id, want = truth(stored)
            assert value == {f"schema_{i}": (want if i == schema_id else None) for i in (21, 22)}


def test_an_iceberg_table_holds_a_member_per_schema_id(tmp_path, topic):
    pytest.importorskip("pyiceberg")
    from pyiceberg.catalog.sql import SqlCatalog

    logs, schemas, records = topic
    dst = tmp_path / "t"
    export(logs, dst, format="iceberg", value_format="avro", schemas=schemas,
           value_format_options={"tables": "per-schema-id"})
    catalog = SqlCatalog("kfmt", uri=f"sqlite:///{dst}/_catalog.db", warehouse=f"file://{dst}/warehouse")
    table = catalog.load_table("kafka.records").scan().to_arrow()
    assert table.num_rows == len(records)
    for offset, value in zip(table.column("offset").to_pylist(), table.column("value").to_pylist()):
        if offset not in (7, 8):
            schema_id, want = truth(records[offset][1])
            assert value[f"schema_{schema_id}"] == want
