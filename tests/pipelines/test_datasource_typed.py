"""The kafka-log data source with keyFormat / valueFormat: the same decoded rows as kfmt.read and the
export (the schema-registry corpus, tests/support/schema_truth.py)."""
from __future__ import annotations

import pytest
from support.schema_truth import SCHEMAS_DEV, proto_rendered, same_proto, truth_records
from support.spark_session import spark  # noqa: F401  (the module's Spark session)

import kfmt

pytestmark = pytest.mark.spark


def test_spark_decodes_avro_as_kfmt_read(spark):  # noqa: F811
    df = (spark.read.format("kafka-log").option("subscribe", "orders-avro").option("keyFormat", "avro")
          .option("valueFormat", "avro").load(str(SCHEMAS_DEV)))
    assert df.schema["value"].dataType.simpleString().startswith("struct<order_id:string,quantity:bigint,")
    rows = df.selectExpr("partition", "offset", "value.quantity", "value.total", "key.region").collect()
    table = kfmt.read(SCHEMAS_DEV, topics="orders-avro", key_format="avro", value_format="avro").read_all()
    want = sorted(zip(table.column("partition").to_pylist(), table.column("offset").to_pylist(),
                      [v and v["quantity"] for v in table.column("value").to_pylist()],
                      [v and v["total"] for v in table.column("value").to_pylist()],
                      [k["region"] for k in table.column("key").to_pylist()]))
    assert sorted(tuple(r) for r in rows) == want
    assert len(rows) == len(truth_records("orders-avro"))


def test_spark_decodes_protobuf(spark):  # noqa: F811
    df = (spark.read.format("kafka-log").option("subscribe", "users-proto").option("keyFormat", "string")
          .option("valueFormat", "registry").load(str(SCHEMAS_DEV)))
    got = {(r["partition"], r["offset"]): r["value"].asDict(recursive=True)
           for r in df.select("partition", "offset", "value").collect()}
    for t in truth_records("users-proto"):
        mine = got[(t["partition"], t["offset"])]
        mine["counters"] = [dict(e) for e in mine["counters"] or []]
        assert same_proto(proto_rendered(mine), t["value"]), t["offset"]


def test_a_typed_topic_beside_a_raw_one_is_refused_when_planned(spark):  # noqa: F811
    """One DataFrame has one schema: orders-avro decoded beside plain-json read raw is refused in one
    line naming both, when the DataFrame is made (no task runs)."""
    from kfmt.pipelines.datasource import KafkaLogDataSource

    options = {"path": str(SCHEMAS_DEV), "subscribe": "orders-avro,plain-json", "valueFormat": "orders-avro:avro"}
    with pytest.raises(ValueError) as err:
        KafkaLogDataSource(options).schema()
    assert "\n" not in str(err.value)
    assert "orders-avro; plain-json (raw)" in str(err.value) and "subscribe" in str(err.value)
    with pytest.raises(Exception, match=r"orders-avro; plain-json \(raw\)"):
        (spark.read.format("kafka-log").option("subscribe", "orders-avro,plain-json")
         .option("valueFormat", "orders-avro:avro").load(str(SCHEMAS_DEV)))
