"""Typed export into Iceberg tables: the corpus's Avro topic read back with pyiceberg equal to the
deserializers' truth, and `--append` of records written with a newer schema version evolving the table."""
from __future__ import annotations

import io

import pyarrow as pa
import pytest
from support.schema_truth import SCHEMAS_DEV, rendered, same_json, truth_records
from support.typed_inputs import schema_directory, write_partition

from kfmt.api.commands import export

pytest.importorskip("pyiceberg")


def scan(dst) -> pa.Table:
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog("kfmt", uri=f"sqlite:///{dst}/_catalog.db", warehouse=f"file://{dst}/warehouse")
    return catalog.load_table("kafka.records").scan().to_arrow()


def test_orders_into_iceberg_equal_the_truth(tmp_path):
    report = export(SCHEMAS_DEV, tmp_path / "t", format="iceberg", topic="orders-avro", key_format="avro",
                    value_format="avro")
    rows = sorted(scan(tmp_path / "t").to_pylist(maps_as_pydicts="strict"),
                  key=lambda r: (r["partition"], r["offset"]))
    truth = truth_records("orders-avro")
    assert report["totals"]["output_records"] == len(truth) == len(rows)
    for row, want in zip(rows, truth):
        assert rendered(row["key"]) == want["key"]
        assert (row["value"] is None) == (want["value"] is None)
        if want["value"] is not None:
            assert same_json(rendered(row["value"]), want["value"]), want["offset"]


def test_dead_letters_of_a_table_export(tmp_path):
    import pyarrow.parquet as pq

    report = export(SCHEMAS_DEV, tmp_path / "t", format="iceberg", topic="mixed-bad", value_format="avro")
    assert scan(tmp_path / "t").num_rows == 320
    dead = pq.read_table(next((tmp_path / "t" / "_errors").rglob("*.parquet")))
    assert dead.num_rows == 44 == report["decoding"][0]["dead_letters"]


V1 = {"type": "record", "name": "R", "fields": [{"name": "n", "type": "int"}]}
V2 = {"type": "record", "name": "R", "fields": [{"name": "n", "type": "long"},
                                                {"name": "tag", "type": ["null", "string"], "default": None}]}


def framed(schema_id: int, schema: dict, value: dict) -> bytes:
    import fastavro

    out = io.BytesIO()
    fastavro.schemaless_writer(out, schema, value)
    return b"\x00" + schema_id.to_bytes(4, "big") + out.getvalue()


def test_append_evolves_the_table_schema(tmp_path):
    old = [(None, framed(1, V1, {"n": i})) for i in range(10)]
    new = [(None, framed(2, V2, {"n": 2**40 + i, "tag": f"t{i}"})) for i in range(5)]
    logs, dst = tmp_path / "logs", tmp_path / "t"
    v1 = {"id": 1, "subject": "r-value", "version": 1, "schema": V1}
    write_partition(logs / "r-0", old)
    schema_directory(tmp_path / "s1", [v1])
    export(logs, dst, format="iceberg", value_format="avro", schemas=str(tmp_path / "s1"))
    assert scan(dst).schema.field("value").type == pa.struct([("n", pa.int32())])
    write_partition(logs / "r-0", old + new, batch_records=10)  # the new records: a batch of their own
    schema_directory(tmp_path / "s2", [v1, {"id": 2, "subject": "r-value", "version": 2, "schema": V2}])
    export(logs, dst, format="iceberg", value_format="avro", schemas=str(tmp_path / "s2"), append=True)
    table = scan(dst)
    value = table.schema.field("value").type  # (pyiceberg reads strings back as large_string)
    assert [(f.name, f.type) for f in value] == [("n", pa.int64()), ("tag", pa.large_string())]
    values = sorted(zip(table.column("offset").to_pylist(), table.column("value").to_pylist()))
    assert [v for _, v in values] == [{"n": i, "tag": None} for i in range(10)] + \
        [{"n": 2**40 + i, "tag": f"t{i}"} for i in range(5)]


def test_upsert_replaces_the_table_with_the_topics_state(tmp_path):
    from support.schema_truth import latest_per_key

    from kfmt.errors import UsageError

    logs, dst = tmp_path / "logs", tmp_path / "t"
    schemas = schema_directory(tmp_path / "s", [{"id": 1, "subject": "c-value", "version": 1, "schema": V1}])
    first = [(b"a", framed(1, V1, {"n": 1})), (b"b", framed(1, V1, {"n": 2})), (b"a", framed(1, V1, {"n": 3}))]
    write_partition(logs / "c-0", first, batch_records=3)
    export(logs, dst, format="iceberg", mode="upsert", value_format="avro", schemas=str(schemas))
    assert sorted((r["key"], r["value"]["n"]) for r in scan(dst).to_pylist()) == [(b"a", 3), (b"b", 2)]
    later = [(b"b", None), (b"c", framed(1, V1, {"n": 4}))]  # a tombstone removes b
    write_partition(logs / "c-0", first + later, batch_records=3)
    with pytest.raises(UsageError, match="--append"):
        export(logs, dst, format="iceberg", mode="upsert", value_format="avro", schemas=str(schemas))
    export(logs, dst, format="iceberg", mode="upsert", value_format="avro", schemas=str(schemas), append=True)
    assert sorted((r["key"], r["value"]["n"]) for r in scan(dst).to_pylist()) == [(b"a", 3), (b"c", 4)]
    # and the corpus's compacted changelog equals its latest-per-key truth
    export(SCHEMAS_DEV, tmp_path / "cl", format="iceberg", mode="upsert", topic="changelog-avro",
           key_format="avro", value_format="avro", isolation="read_committed")
    got = sorted((r["key"], r["offset"]) for r in scan(tmp_path / "cl").to_pylist())
    assert got == sorted((t["key"], t["offset"]) for t in latest_per_key("changelog-avro"))


def live_table(dst, schema: pa.Schema, spec_field: str = "partition"):
    """A table as another system creates it (its own schema and partition spec), with a SQLite catalog
    where kfmt's default catalog looks."""
    from pyiceberg.catalog.sql import SqlCatalog

    dst.mkdir(parents=True)
    catalog = SqlCatalog("kfmt", uri=f"sqlite:///{dst}/_catalog.db", warehouse=f"file://{dst}/warehouse")
    catalog.create_namespace("kafka")
    table = catalog.create_table("kafka.records", schema=schema)
    with table.update_spec() as spec:
        spec.add_identity(spec_field)
    return catalog.load_table("kafka.records")


def test_backfill_below_a_live_feed_exactly_once(tmp_path):
    """A broker's Iceberg feature wrote offsets 100 on of each orders-avro partition into its own
    table (its schema: some Kafka columns, the decoded value, a column of its own); kfmt backfills
    everything below, once."""
    import kfmt

    rows = kfmt.read(SCHEMAS_DEV, topics="orders-avro", value_format="avro").read_all()
    value_type = rows.schema.field("value").type
    schema = pa.schema([pa.field("topic", pa.string(), nullable=False),
                        pa.field("partition", pa.int32(), nullable=False),
                        pa.field("offset", pa.int64(), nullable=False),
                        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
                        pa.field("value", value_type), pa.field("ingested_by", pa.string())])
    table = live_table(tmp_path / "t", schema)
    live = rows.filter(pa.compute.greater_equal(rows.column("offset"), 100))
    feed = pa.table({**{n: live.column(n) for n in ("topic", "partition", "offset", "timestamp", "value")},
                     "ingested_by": pa.array(["broker"] * live.num_rows)}, schema=schema)
    table.append(feed)
    with pytest.raises(Exception, match="--append backfills it"):
        export(SCHEMAS_DEV, tmp_path / "t", format="iceberg", topic="orders-avro", value_format="avro")
    report = export(SCHEMAS_DEV, tmp_path / "t", format="iceberg", topic="orders-avro", value_format="avro",
                    append=True)
    assert report["totals"]["output_records"] == rows.num_rows - live.num_rows
    got = scan(tmp_path / "t")
    assert sorted(zip(got.column("partition").to_pylist(), got.column("offset").to_pylist())) == \
        sorted(zip(rows.column("partition").to_pylist(), rows.column("offset").to_pylist()))
    assert got.column("value").to_pylist().count(None) == rows.column("value").to_pylist().count(None)
    again = export(SCHEMAS_DEV, tmp_path / "t", format="iceberg", topic="orders-avro", value_format="avro",
                   append=True)
    assert again.get("written") is False and scan(tmp_path / "t").num_rows == rows.num_rows


def test_backfill_refuses_a_required_column_it_cannot_fill(tmp_path):
    from kfmt.errors import UsageError

    schema = pa.schema([pa.field("topic", pa.string(), nullable=False), pa.field("partition", pa.int32()),
                        pa.field("offset", pa.int64()), pa.field("tenant", pa.string(), nullable=False)])
    live_table(tmp_path / "t", schema)
    with pytest.raises(UsageError, match="the table requires column 'tenant', which kfmt export has no value for"):
        export(SCHEMAS_DEV, tmp_path / "t", format="iceberg", topic="orders-avro", value_format="avro",
               append=True)


def dead_letter_files(dst) -> list:
    return sorted((dst / "_errors").rglob("*.parquet")) if (dst / "_errors").exists() else []


def test_dead_letters_are_not_published_when_the_commit_fails(tmp_path, monkeypatch):
    """Another writer creates the table while kfmt writes its data files: kfmt's commit (a table
    creation) fails, and none of the run's dead letters are left."""
    from pyiceberg.catalog.sql import SqlCatalog

    from kfmt.default_plugins.exporters.iceberg import IcebergSink
    from kfmt.errors import KfmtError

    real_write = IcebergSink.write

    def write_then_race(self, chunks, schema):
        written = real_write(self, chunks, schema)
        catalog = SqlCatalog("kfmt", uri=f"sqlite:///{tmp_path}/t/_catalog.db",
                             warehouse=f"file://{tmp_path}/t/warehouse")
        catalog.create_table("kafka.records", schema=pa.schema([pa.field("x", pa.int32())]))
        return written

    monkeypatch.setattr(IcebergSink, "write", write_then_race)
    with pytest.raises(KfmtError, match="the commit failed"):
        export(SCHEMAS_DEV, tmp_path / "t", format="iceberg", topic="mixed-bad", value_format="avro")
    assert dead_letter_files(tmp_path / "t") == []
    assert not list((tmp_path / "t" / "_errors").iterdir())


def test_dead_letters_staged_by_a_run_cut_after_its_commit_are_published_by_the_next(tmp_path, monkeypatch):
    from kfmt.transforms.export_table_letters import TableDeadLetters

    def killed(self):
        raise KeyboardInterrupt  # the run ends between its commit and the publication

    with monkeypatch.context() as m:
        m.setattr(TableDeadLetters, "publish", killed)
        with pytest.raises(KeyboardInterrupt):
            export(SCHEMAS_DEV, tmp_path / "t", format="iceberg", topic="mixed-bad", value_format="avro")
    assert scan(tmp_path / "t").num_rows == 320  # committed
    pending = dead_letter_files(tmp_path / "t")
    assert pending and all("_pending-" in str(f) for f in pending)
    export(SCHEMAS_DEV, tmp_path / "t", format="iceberg", topic="mixed-bad", value_format="avro", append=True)
    import pyarrow.parquet as pq

    published = dead_letter_files(tmp_path / "t")
    assert published and not [f for f in published if "_pending-" in str(f)]
    assert sum(pq.read_table(f).num_rows for f in published) == 44
