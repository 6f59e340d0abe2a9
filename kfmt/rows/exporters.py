"""What an export file format provides (the `kfmt_register_exporters` hook; `kfmt export --format`).

Built in: `parquet` and `jsonl` (kfmt.default_plugins.exporters.files). `kfmt export` streams the
rows of each file, a row group at a time (an Arrow RecordBatch with the export schema less the
partition-by columns, kfmt.rows.part_files; a Table of chunks to a writer that `takes_tables`),
into a writer the exporter opens on a staged output stream. Before the run publishes, the rows
handed to the writers must hold the records read (count and content digest), and each file the rows
handed to it: counted from the file's own metadata where the exporter has `rows_in` (Parquet's
footer: its encoding is pyarrow's), else read back whole through `read_back` and digested (an
exporter whose encoding is its own code).

A table format (`kind = "table"`, e.g. `iceberg`, kfmt.default_plugins.exporters.iceberg) is not a
file per task but a table that a catalog keeps: `open_table` gives a TableSink, which says how far
earlier runs exported each partition (their high-water marks), writes all of a run's rows as data
files, and commits them with the new marks in one atomic commit (kfmt.transforms.export_table).
"""
from __future__ import annotations

from typing import Iterator, Protocol

import pyarrow as pa

from kfmt.errors import UsageError
from kfmt.plugin.options import declared, from_keywords


class ExportWriter(Protocol):
    # Optional: True when write() also takes a pa.Table, a row group's rows in the chunks they were
    # gathered in (a writer that writes chunks as they are, as Parquet's does, spares gathering them)
    # takes_tables: bool = False

    def write(self, rows: pa.RecordBatch) -> None:
        """Append rows: a row group's worth (kfmt.rows.part_files), in the order of the file."""

    def close(self) -> None:
        """Finish the file (the caller publishes the stream itself)."""


class Exporter(Protocol):
    name: str  # the value of `kfmt export --format`
    extension: str  # of the files written, with its dot
    # Optional: the settings it takes (kfmt.plugin.options.Option), which become the flags
    # `--<name>-<option>` of `kfmt export` and the keywords `<name>_<option>` of `kfmt.export`.
    # options: tuple = ()

    def open(self, stream, schema: pa.Schema, settings: dict) -> ExportWriter:
        """A writer onto `stream` (kfmt.storage.store.WriteStream: write(bytes), size); `settings`:
        the value of each of its options (option name -> value, defaults filled in)."""

    def read_back(self, data, schema: pa.Schema, settings: dict) -> Iterator[pa.RecordBatch]:
        """The rows of a written file, with `schema`; a KfmtError when they cannot be read."""

    # Optional:
    # def rows_in(self, data, schema: pa.Schema, settings: dict) -> int:
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
        """The table at `destination` (created on the first commit); `settings`: the value of each
        of its options, as `open` receives them (`kfmt export --iceberg-...`)."""


def is_table(exporter) -> bool:
    return getattr(exporter, "kind", "files") == "table"


def exporters() -> dict[str, Exporter]:
    """The export formats the loaded plugins provide, by name."""
    from kfmt.plugin import registry

    return registry.get().exporters


def exporter_named(name: str) -> Exporter:
    known = exporters()
    if name not in known:
        raise UsageError(f"unknown export format {name!r} (known: {', '.join(sorted(known))})")
    return known[name]


def settings_from_keywords(name: str, keywords: dict) -> dict:
    """The settings of the exporter `name` from `kfmt.export`'s keyword arguments `<name>_<option>`
    (kfmt.plugin.options.from_keywords; a keyword of another exporter's option is refused)."""
    exporter = exporter_named(name)
    others = {other: declared(e) for other, e in exporters().items() if other != name}
    return from_keywords(name, declared(exporter), keywords, others)
