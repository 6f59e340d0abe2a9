"""What an export file format provides (the `kfmt_register_exporters` hook; `kfmt export --format`).

Built in: `parquet` and `jsonl` (kfmt.default_plugins.exporters.files). `kfmt export` streams the
rows of each file, a row group at a time (an Arrow RecordBatch with the export schema less the
partition-by columns, kfmt.rows.part_files), into a writer the exporter opens on a staged output
stream. Before the run publishes, the rows handed to the writers must hold the records read (count
and content digest), and each file the rows handed to it: counted from the file's own metadata
where the exporter has `rows_in` (Parquet's footer: its encoding is pyarrow's), else read back
whole through `read_back` and digested (an exporter whose encoding is its own code).

A table format (`kind = "table"`, e.g. `iceberg`, kfmt.default_plugins.exporters.iceberg) is not a
file per task but a table that a catalog keeps: `open_table` gives a TableSink, which says how far
earlier runs exported each partition (their high-water marks), writes all of a run's rows as data
files, and commits them with the new marks in one atomic commit (kfmt.transforms.export_table).
"""
from __future__ import annotations

from typing import Iterator, Protocol

import pyarrow as pa


class ExportWriter(Protocol):
    def write(self, rows: pa.RecordBatch) -> None:
        """Append rows: a row group's worth (kfmt.rows.part_files), in the order of the file."""

    def close(self) -> None:
        """Finish the file (the caller publishes the stream itself)."""


class Exporter(Protocol):
    name: str  # the value of `kfmt export --format`
    extension: str  # of the files written, with its dot

    def open(self, stream, schema: pa.Schema) -> ExportWriter:
        """A writer onto `stream` (kfmt.storage.store.WriteStream: write(bytes), size)."""

    def read_back(self, data, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
        """The rows of a written file, with `schema`; a KfmtError when they cannot be read."""

    # Optional:
    # def rows_in(self, data, schema: pa.Schema) -> int:
    #     """How many rows a written file holds, from its own metadata, without decoding them (a
    #     KfmtError when it cannot tell, or the schema differs): an exporter with it is not read back."""


class TableSink(Protocol):
    description: str  # where the table is, for messages and the report
    # (topic, partition) -> [[from, to), ...]: offsets deleted before any run exported them
    # (kfmt.transforms.losses), as the table's last kfmt commit recorded them; set by high_water_marks
    lost: dict

    def high_water_marks(self) -> tuple[dict | None, dict]:
        """(the options of the export that wrote the table, or None for a new table; (topic, partition)
        -> next offset to export), as the table's last kfmt commit left them."""

    def write(self, chunks, schema: pa.Schema) -> dict:
        """Write `chunks` (pa.Tables with `schema`, the export schema, which a new table gets) as data
        files not yet in the table.
        Returns {"records": rows written, ...}."""

    def commit(self, high_water_marks: dict, options: dict, lost: dict) -> dict:
        """Add every file written to the table with the marks, options and lost ranges (as `lost`
        above), in one atomic commit, also when no file was written (the marks moved past a lost
        range): on any failure nothing is committed. Returns facts for the report ("records", ...)."""


class TableExporter(Protocol):
    name: str
    kind: str  # "table"

    def open_table(self, destination: str, storage_options: dict, settings: dict) -> TableSink:
        """The table at `destination` (created on the first commit); `settings`: the format's own
        options (`kfmt export --iceberg-...`)."""


def is_table(exporter) -> bool:
    return getattr(exporter, "kind", "files") == "table"


def exporters() -> dict[str, Exporter]:
    """The export formats the loaded plugins provide, by name."""
    from kfmt.plugin import registry

    return registry.get().exporters
