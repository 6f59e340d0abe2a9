"""kfmt: read, verify, convert and write Apache Kafka partition directories without a broker.

The Python API (docs/python.md):

    import kfmt
    reader = kfmt.read("/data/kafka-logs", topics="orders*", isolation="read_committed")
    duckdb.sql("select partition, count(*) from reader group by all")   # or polars.from_arrow(reader)
    report = kfmt.upgrade("/data/old-logs", "/data/new-logs")

`read` streams records as a pyarrow.RecordBatchReader (the export schema); each command of the `kfmt`
tool is a function returning its report (the JSON `kfmt CMD --format json` prints) and raising
kfmt.errors' exceptions. Names resolve on first use, so `import kfmt` stays light (no pyarrow, no
pyspark until something is called).
"""
from __future__ import annotations

import importlib

__version__ = "0.1.0"

_HOMES = {
    "read": "kfmt.api.reader", "open_log": "kfmt.api.reader", "Log": "kfmt.api.reader",
    "PartitionSummary": "kfmt.api.reader",
    **{name: "kfmt.api.commands" for name in (
        "upgrade", "reindex", "resegment", "recompress", "export", "compact", "retain", "archive",
        "restore", "salvage", "verify", "info", "Report")},
    **{name: "kfmt.errors" for name in ("KfmtError", "UsageError", "DataError", "KfmtWarning")},
    "report": "kfmt.api.report",
    "EXPORT_SCHEMA": "kfmt.rows.columns",
}
__all__ = sorted(_HOMES) + ["__version__"]


def __getattr__(name: str):
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'kfmt' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # resolved once
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
