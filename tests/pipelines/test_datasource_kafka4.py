"""`spark.read.format("kafka-log")` through a real local Spark session on the partitions a Kafka 4.1
broker wrote under transaction version 2 (bumped marker epochs, a fenced producer, aborted and
committed transactions, a compacted transactional topic: tests/data/realkafka4), in both isolation
levels, against what kafka-clients 4.1's consumer read (docs/format.md §7.1). The data source's
units run in Spark's Python workers here, not in this process."""
from __future__ import annotations

import pyarrow as pa
import pytest
from support.corpus4 import REALKAFKA4, TXN4, consumer_records4, has_committed_truth
from support.export_truth import as_consumer_records
from support.spark_session import spark  # noqa: F401 (the module's Spark session)

CASES = [(name, False) for name in TXN4] + [(name, True) for name in TXN4 if has_committed_truth(name)]


@pytest.mark.spark
@pytest.mark.parametrize("name,committed", CASES,
                         ids=[f"{n}-{'committed' if c else 'uncommitted'}" for n, c in CASES])
def test_spark_reads_what_the_java_consumer_read(spark, name, committed):  # noqa: F811
    isolation = "read_committed" if committed else "read_uncommitted"
    df = (spark.read.format("kafka-log").option("kafka.isolation.level", isolation)
          .option("maxBytesPerSplit", "4096").load(str(REALKAFKA4 / name)))
    table = df.orderBy("offset").toArrow()
    assert isinstance(table, pa.Table)
    assert as_consumer_records(table) == list(consumer_records4(name, committed))
    assert set(table.column("topic").to_pylist()) <= {name.rsplit("-", 1)[0]}
