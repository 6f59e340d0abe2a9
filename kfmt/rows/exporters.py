"""What an export file format provides (the `kfmt_register_exporters` hook; `kfmt export --format`).

Built in: `parquet` and `jsonl` (kfmt.default_plugins.exporters.files). `kfmt export` streams the
rows of each file, a row group at a time (an Arrow RecordBatch with the export schema less the
partition-by columns, kfmt.rows.part_files), into a writer the exporter opens on a staged output
stream, then reads the published bytes back through `read_back` and checks that they hold the same
records (count and content digest) before the run publishes.
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


def exporters() -> dict[str, Exporter]:
    """The export formats the loaded plugins provide, by name."""
    from kfmt.plugin import registry

    return registry.get().exporters
