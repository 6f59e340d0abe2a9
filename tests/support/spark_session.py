"""The module-scoped Spark session fixture with kfmt's data source registered, and readers that run the
data source's units the way Spark's tasks would (without Spark)."""
from __future__ import annotations

import pyarrow as pa
import pytest

from kfmt.pipelines.datasource import KafkaLogDataSource, KafkaLogReader
from kfmt.rows.columns import EXPORT_SCHEMA


def reader(path, **options) -> KafkaLogReader:
    return KafkaLogDataSource({"path": str(path), **{k: str(v) for k, v in options.items()}}).reader(None)


def read_all(path, **options) -> tuple[pa.Table, list]:
    """(rows of every unit, in unit order; the units), as Spark's tasks would read them."""
    r = reader(path, **options)
    units = r.partitions()
    batches = [b for unit in units for b in r.read(unit)]
    return pa.Table.from_batches(batches, EXPORT_SCHEMA), units


@pytest.fixture(scope="module")
def spark():
    from kfmt.pipelines.datasource import register
    from kfmt.pipelines.session import spark_session, stop_session

    session = spark_session("local[2]")
    register(session)
    yield session
    stop_session()


@pytest.fixture(scope="module", name="spark")
def plain_spark():
    """The module's Spark session as kfmt's users start one (kfmt's data source not registered):
    import it as `plain_spark`, use it as `spark`."""
    from kfmt.pipelines.session import spark_session, stop_session

    session = spark_session("local[2]")
    yield session
    stop_session()
