"""The `iceberg` export format (a table exporter, kfmt.rows.exporters): an Apache Iceberg table written
with pyiceberg (`pip install 'kfmt[iceberg]'`).

The table has the export schema (Spark's Kafka source columns plus the on-disk ones, kfmt.rows.columns;
pyiceberg gives int8/int16 columns Iceberg's `int`) and is partitioned by `topic`, `partition` and
`day(timestamp)`. Where it lives:

* by default a SQLite-backed catalog (pyiceberg's SqlCatalog) in `DST/_catalog.db` with the warehouse
  in `DST/warehouse` (DST a local directory), or, with DST a URL (`s3://...`), DST as the warehouse and
  the catalog's `uri` given with `--iceberg-property uri=...`;
* with `--iceberg-catalog NAME`, any catalog pyiceberg's `load_catalog(NAME, **properties)` opens
  (`~/.pyiceberg.yaml`, `PYICEBERG_CATALOG__...` variables, or `--iceberg-property k=v`);
* the table is `--iceberg-table NS.TABLE` (default `kafka.records`).

Each run is one Iceberg commit: a fast append of all the run's data files (a new table is created in
the same commit, Catalog.create_table_transaction; a changelog's table, `--mode upsert --append`, has
the rows of every key the run's records touch deleted in it first) whose snapshot summary carries
every partition's high-water mark as `kfmt.hwm.<topic>.<partition>=<next offset>`, the export's
options as `kfmt.options`, and every range of offsets a run found deleted before any run exported it
as `kfmt.lost.<topic>.<partition>=[[from, to), ...]` (JSON; each commit carries the earlier ones on,
as the marks, so the newest kfmt snapshot says all). Data files are written before the commit, under
the table's location; a run killed before it leaves them unreferenced (orphans, which Iceberg's
orphan-file maintenance removes) and the table as it was.
"""
from __future__ import annotations

import itertools
import json
import os
import uuid
from urllib.parse import urlparse

from kfmt.errors import KfmtError, UsageError
from kfmt.plugin.hookspecs import hookimpl
from kfmt.plugin.options import Option

DEFAULT_TABLE = "kafka.records"
HWM_PREFIX = "kfmt.hwm."
LOST_PREFIX = "kfmt.lost."
OPTIONS_KEY = "kfmt.options"


def _pyiceberg():
    try:
        import pyiceberg  # noqa: F401
    except ImportError:
        raise UsageError("--format iceberg needs pyiceberg: pip install 'kfmt[iceberg]'") from None


class IcebergFormat:
    name = "iceberg"
    kind = "table"
    extension = ""
    # --iceberg-catalog, --iceberg-table, --iceberg-property (kfmt.plugin.options), received as the
    # settings of open_table
    options = (
        Option("catalog", "the pyiceberg catalog to use (load_catalog(NAME), configured in ~/.pyiceberg.yaml "
                          "or PYICEBERG_CATALOG__ variables; default: a SQLite catalog in DST/_catalog.db "
                          "with the warehouse in DST/warehouse)", metavar="NAME"),
        Option("table", "the table", default=DEFAULT_TABLE, metavar="NS.TABLE"),
        Option("properties", "a catalog property (repeatable), e.g. uri=... or warehouse=...", pairs=True,
               flag="property"),
    )

    def open(self, stream, schema, settings):
        raise UsageError("iceberg is a table format: it is written through open_table")

    def read_back(self, data, schema, settings):
        raise UsageError("iceberg is a table format: read it with an Iceberg reader")

    def open_table(self, destination: str, storage_options: dict, settings: dict) -> "IcebergSink":
        _pyiceberg()
        return IcebergSink(destination, storage_options, settings)


class IcebergSink:
    def __init__(self, destination: str, storage_options: dict, settings: dict):
        from pyiceberg.catalog import load_catalog
        from pyiceberg.catalog.sql import SqlCatalog

        properties = {**{k: str(v) for k, v in (storage_options or {}).items()},
                      **settings.get("properties", {})}
        name = settings.get("catalog")
        self.identifier = settings.get("table") or DEFAULT_TABLE
        if "." not in self.identifier:
            raise UsageError(f"--iceberg-table {self.identifier!r}: give it as NAMESPACE.TABLE")
        if name:
            self.catalog = load_catalog(name, **properties)
            where = f"catalog {name}"
        else:
            scheme = urlparse(destination).scheme
            if scheme in ("", "file"):
                root = os.path.abspath(destination[len("file://"):] if scheme else destination)
                os.makedirs(root, exist_ok=True)
                properties.setdefault("uri", f"sqlite:///{os.path.join(root, '_catalog.db')}")
                properties.setdefault("warehouse", f"file://{os.path.join(root, 'warehouse')}")
            else:
                if "uri" not in properties:
                    raise UsageError(f"{destination}: a warehouse URL needs the catalog's database: "
                                     f"--iceberg-property uri=... (or --iceberg-catalog NAME)")
                properties.setdefault("warehouse", destination)
            self.catalog = SqlCatalog("kfmt", **properties)
            where = f"SQLite catalog {properties['uri']}"
        self.description = f"Iceberg table {self.identifier} in {where}"
        self.table = self.catalog.load_table(self.identifier) if self.catalog.table_exists(
            self.identifier) else None
        self.lost: dict = {}  # (topic, partition) -> [[from, to), ...], from high_water_marks

    def high_water_marks(self) -> tuple[dict | None, dict]:
        """From the newest snapshot that a kfmt run committed (others may append to the table too)."""
        if self.table is None:
            return None, {}
        snapshot = self.table.current_snapshot()
        while snapshot is not None:
            summary = snapshot.summary.additional_properties if snapshot.summary else {}
            if OPTIONS_KEY in summary:
                marks = {_partition_of(k, HWM_PREFIX): int(v) for k, v in summary.items()
                         if k.startswith(HWM_PREFIX)}
                self.lost = {_partition_of(k, LOST_PREFIX): json.loads(v) for k, v in summary.items()
                             if k.startswith(LOST_PREFIX)}
                return json.loads(summary[OPTIONS_KEY]), marks
            snapshot = (self.table.snapshot_by_id(snapshot.parent_snapshot_id)
                        if snapshot.parent_snapshot_id is not None else None)
        # a table another system writes (a broker's Iceberg topics): kfmt may backfill below it
        self.foreign = True
        return {"foreign": True}, {}

    def offsets_held(self) -> dict:
        """(topic, partition) -> the least offset the table holds (a backfill exports what lies below)."""
        names = {f.name for f in self.table.schema().fields}
        if not {"topic", "partition", "offset"} <= names:
            raise UsageError(f"{self.description}: the table has no topic, partition and offset columns "
                             f"to tell which records it holds; kfmt cannot backfill it exactly once")
        held = self.table.scan(selected_fields=("topic", "partition", "offset")).to_arrow()
        if not held.num_rows:
            return {}
        grouped = held.group_by(["topic", "partition"]).aggregate([("offset", "min")])
        return {(t, int(p)): int(o) for t, p, o in zip(grouped.column("topic").to_pylist(),
                                                       grouped.column("partition").to_pylist(),
                                                       grouped.column("offset_min").to_pylist())}

    def write(self, chunks, schema) -> dict:
        """Write the chunks as data files of the table (not yet part of it: commit adds them); a new
        table gets `schema` (the export schema)."""
        from pyiceberg.io.pyarrow import _dataframe_to_data_files, schema_to_pyarrow
        from pyiceberg.transforms import DayTransform

        if self.table is None:  # created by the same commit that adds the first data files
            namespace = self.identifier.rsplit(".", 1)[0]
            self.catalog.create_namespace_if_not_exists(namespace)
            self._tx = self.catalog.create_table_transaction(self.identifier, schema=schema)
            with self._tx.update_spec() as spec:
                spec.add_identity("topic")
                spec.add_identity("partition")
                spec.add_field("timestamp", DayTransform(), "timestamp_day")
        else:
            self._tx = self.table.transaction()
            if getattr(self, "foreign", False):  # another system's table: its schema as given
                _check_fillable(schema_to_pyarrow(self.table.schema()), schema, self.description)
            elif not schema_to_pyarrow(self.table.schema()).equals(schema, check_metadata=False):
                # typed rows of newer schema versions (docs/typed-export.md): the table's schema
                # evolves in the same commit, by Iceberg's rules (added optional fields, promotions)
                with self._tx.update_schema() as update:
                    update.union_by_name(schema)
        tx = self._tx
        if getattr(self, "delete_keys", None) and self.table is not None:
            tx.delete(_rows_of_keys(self.delete_keys))
        arrow_schema = schema_to_pyarrow(tx.table_metadata.schema())
        counter, write_uuid = itertools.count(0), uuid.uuid4()
        self._data_files = []
        for chunk in chunks:
            # pyiceberg's data file writer, as Transaction.append uses it (split by partition value)
            self._data_files += _dataframe_to_data_files(tx.table_metadata, _as_table(chunk, arrow_schema),
                                                         tx._table.io, write_uuid, counter)
        return {"data_files": len(self._data_files),
                "records": sum(f.record_count for f in self._data_files)}

    def commit(self, high_water_marks: dict, options: dict, lost: dict | None = None) -> dict:
        """One fast append of every data file written (none: a snapshot that only moves the marks),
        with the marks and the lost ranges in its snapshot summary."""
        summary = {OPTIONS_KEY: json.dumps(options, sort_keys=True)}
        summary.update({f"{HWM_PREFIX}{t}.{p}": str(n) for (t, p), n in sorted(high_water_marks.items())})
        summary.update({f"{LOST_PREFIX}{t}.{p}": json.dumps(r) for (t, p), r in sorted((lost or {}).items())})
        tx = self._tx
        with tx.update_snapshot(snapshot_properties=summary).fast_append() as append:
            for data_file in self._data_files:
                append.append_data_file(data_file)
        try:
            self.table = tx.commit_transaction()
        except Exception as err:  # a concurrent commit, a catalog that refuses: one line, nothing committed
            raise KfmtError(f"{self.description}: the commit failed: {err}; nothing was committed") from None
        snapshot = self.table.current_snapshot()
        return {"table": self.identifier, "snapshot_id": snapshot.snapshot_id,
                "data_files": len(self._data_files),
                "records": sum(f.record_count for f in self._data_files)}


def _rows_of_keys(delete_keys: dict):
    """The rows of a changelog's table whose keys a run's records touch: they are replaced by the keys'
    live rows or removed (kfmt export --mode upsert --append). pyiceberg's delete rewrites the data
    files holding any of them (copy-on-write), pruned by the topic's partition and the key column's
    bounds; `delete_keys`: topic -> (the column of stored key bytes, the keys)."""
    from functools import reduce

    from pyiceberg.expressions import And, EqualTo, In, Or

    per_topic = [And(EqualTo("topic", topic), In(column, keys.to_pylist()))
                 for topic, (column, keys) in sorted(delete_keys.items())]
    return reduce(Or, per_topic)


def _partition_of(key: str, prefix: str) -> tuple[str, int]:
    """(topic, partition) of a summary key `<prefix><topic>.<partition>` (a topic may hold dots)."""
    topic, partition = key[len(prefix):].rsplit(".", 1)
    return topic, int(partition)


def _check_fillable(table_schema, rows, description: str) -> None:
    """Refuse a table with a required column the export has no value for (kfmt fills the others with
    nulls, by name: kfmt.transforms.export_backfill)."""
    for field in table_schema:
        if not field.nullable and field.name not in rows.names:
            raise UsageError(f"{description}: the table requires column {field.name!r}, which kfmt "
                             f"export has no value for (its columns: {', '.join(rows.names)})")


def _as_table(chunk, arrow_schema):
    """A chunk with the table's schema: a plain cast, or for typed rows whose fields the table holds in
    another order or not at all (an evolved table), field by field by name."""
    import pyarrow as pa

    try:
        return chunk.cast(arrow_schema)
    except (ValueError, pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        from kfmt.default_plugins.values.evolution import conform

        columns = []
        for field in arrow_schema:
            if field.name in chunk.column_names:
                columns.append(conform(chunk.column(field.name).combine_chunks(), field.type))
            else:
                columns.append(pa.nulls(chunk.num_rows, field.type))
        return pa.Table.from_arrays(columns, schema=arrow_schema)


@hookimpl
def kfmt_register_exporters(register):
    register(IcebergFormat())
