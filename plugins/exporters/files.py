"""The built-in export formats (kfmt.rows.exporters): Parquet and JSON Lines, streamed through a staged
output, and read back to check what was written.

Parquet: one row group per `write` (kfmt.rows.part_files gathers the rows of one), snappy-compressed
as Spark writes by default, offsets, positions and timestamps delta-encoded, no statistics for the
byte columns (parquet_options); pyarrow stores the Arrow schema too, so pyarrow reads back the exact types
(int8 magic, int16 producer epoch, UTC timestamps) and Spark maps them to its Kafka source's types.
The partition-by columns (topic, partition, date) are not in the files: readers take them from the
Hive-style directory names, as they do for a Spark writer's output.

JSON Lines: one object per row with the same columns in the same order. Binary columns (key, value,
header values, header_key_bytes) are base64 strings; `timestamp` is an ISO-8601 UTC string with
milliseconds (`2023-11-14T22:13:20.440Z`, what Spark's JSON reader parses for a timestamp column by
default); null stays null. `spark.read.schema(...).json(DST)` reads it back with the export schema
(docs/export.md).
"""
from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING, Iterator

from kfmt.errors import KfmtError
from kfmt.plugin.hookspecs import hookimpl

if TYPE_CHECKING:
    import pyarrow as pa

# numpy and pyarrow are imported where they are used: the command line's parser loads this module to
# learn the exporters' options (kfmt.plugin.manager.load_declaring), and must stay light.

_BINARY_COLUMNS = ("key", "value")
READ_BACK_ROWS = 65536


class _Sink:
    """A StagedStream as the file object pyarrow writes to (it also asks where it is)."""

    def __init__(self, stream):
        self.stream = stream
        self.closed = False

    def write(self, data) -> int:
        self.stream.write(data)
        return len(data)

    def tell(self) -> int:
        return self.stream.size

    def flush(self) -> None:
        pass

    def close(self) -> None:  # the owner closes (publishes) the stream itself
        self.closed = True


class ParquetFormat:
    name = "parquet"
    extension = ".parquet"

    def open(self, stream, schema: pa.Schema, settings: dict) -> "ParquetFileWriter":
        return ParquetFileWriter(stream, schema)

    def read_back(self, data, schema: pa.Schema, settings: dict) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa
        import pyarrow.parquet as pq  # on first use: every command loads this plugin

        file = pq.ParquetFile(pa.BufferReader(data))
        if not file.schema_arrow.equals(schema):
            raise KfmtError(f"the written file's schema differs from the export schema:\n"
                            f"{file.schema_arrow}")
        yield from file.iter_batches(batch_size=READ_BACK_ROWS)

    def rows_in(self, data, schema: pa.Schema, settings: dict) -> int:
        """The rows a written file holds, from its footer (the encoding is pyarrow's: the export
        checks the rows it hands the writer, kfmt.transforms.export_job)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        metadata = pq.read_metadata(pa.BufferReader(data))
        if not metadata.schema.to_arrow_schema().equals(schema):
            raise KfmtError(f"the written file's schema differs from the export schema:\n"
                            f"{metadata.schema.to_arrow_schema()}")
        held = sum(metadata.row_group(i).num_rows for i in range(metadata.num_row_groups))
        if held != metadata.num_rows:
            raise KfmtError(f"the footer says {metadata.num_rows} rows, its row groups {held}")
        return held


# Columns of (nearly) unique, mostly growing integers: offsets, positions, timestamps. pyarrow's default
# would build a dictionary of every value of a row group (131072 int64 fit its 1 MiB limit) and
# store them all again as dictionary pages; DELTA_BINARY_PACKED stores the differences in a few bits
# each (Parquet's standard encoding for such columns; Spark, pyarrow, pandas and DuckDB read it).
DELTA_COLUMNS = ("offset", "timestamp", "timestamp_ms", "batch_base_offset", "batch_last_offset",
                 "file_position")
# ... and no dictionary either for the record sequence numbers (unique too)
PLAIN_COLUMNS = ("sequence",)
# Columns without min/max statistics: keys, values and headers are arbitrary bytes, whose min and max
# prune nothing for any query, and pyarrow would compute them over every byte of every page.
NO_STATISTICS = ("key", "value", "headers", "header_key_bytes")


def parquet_options(schema: pa.Schema) -> dict:
    """pyarrow.parquet.ParquetWriter's options for the export's files (snappy, as Spark writes by
    default; the encodings above)."""
    names = schema.names
    return {"compression": "snappy",
            "use_dictionary": [n for n in names if n not in DELTA_COLUMNS + PLAIN_COLUMNS],
            "column_encoding": {n: "DELTA_BINARY_PACKED" for n in names if n in DELTA_COLUMNS},
            "write_statistics": [n for n in names if n not in NO_STATISTICS]}


class ParquetFileWriter:
    takes_tables = True  # write() takes a row group's chunks as they are (kfmt.rows.exporters)

    def __init__(self, stream, schema: pa.Schema):
        self.stream = stream
        import pyarrow.parquet as pq  # on first use: every command loads this plugin

        self._writer = pq.ParquetWriter(_Sink(stream), schema, **parquet_options(schema))

    def write(self, rows: pa.RecordBatch | pa.Table) -> None:
        self._writer.write(rows, row_group_size=rows.num_rows)

    def close(self) -> None:
        self._writer.close()


class JsonLinesFormat:
    name = "jsonl"
    extension = ".jsonl"

    def open(self, stream, schema: pa.Schema, settings: dict) -> "JsonLinesWriter":
        return JsonLinesWriter(stream)

    def read_back(self, data, schema: pa.Schema, settings: dict) -> Iterator[pa.RecordBatch]:
        lines = bytes(data).splitlines()
        for start in range(0, len(lines), READ_BACK_ROWS):
            try:
                objects = [json.loads(line) for line in lines[start:start + READ_BACK_ROWS]]
            except ValueError as err:
                raise KfmtError(f"a written line is not JSON: {err}") from None
            yield json_objects_to_rows(objects, schema)


class JsonLinesWriter:
    def __init__(self, stream):
        self.stream = stream

    def write(self, rows: pa.RecordBatch) -> None:
        text = "".join(json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n"
                       for obj in rows_to_json_objects(rows))
        self.stream.write(text.encode("utf-8"))

    def close(self) -> None:
        pass


@hookimpl
def kfmt_register_exporters(register):
    register(ParquetFormat())
    register(JsonLinesFormat())


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def _unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text, validate=True)


def rows_to_json_objects(rows: pa.RecordBatch) -> list[dict]:
    """Export rows as JSON-ready dicts (see the module docstring), columns in schema order."""
    import numpy as np
    import pyarrow as pa

    names = rows.schema.names
    cols = {}
    for name in names:
        column = rows.column(name)
        if name in _BINARY_COLUMNS:
            cols[name] = [_b64(v) for v in column.to_pylist()]
        elif name == "timestamp":
            micros = column.cast(pa.int64()).to_numpy().astype("datetime64[us]")
            cols[name] = np.datetime_as_string(micros, unit="ms", timezone="UTC").tolist()
        elif name == "headers":
            cols[name] = [None if hs is None else [{"key": h["key"], "value": _b64(h["value"])} for h in hs]
                          for hs in column.to_pylist()]
        elif name == "header_key_bytes":
            cols[name] = [None if ks is None else [_b64(k) for k in ks] for ks in column.to_pylist()]
        elif name == "date":
            cols[name] = [None if d is None else d.isoformat() for d in column.to_pylist()]
        else:
            cols[name] = column.to_pylist()
    return [dict(zip(names, values)) for values in zip(*(cols[n] for n in names))]


def json_objects_to_rows(objects: list[dict], schema: pa.Schema) -> pa.RecordBatch:
    """The inverse of rows_to_json_objects; every object must have exactly the schema's columns."""
    import numpy as np
    import pyarrow as pa

    names = schema.names
    for obj in objects:
        if list(obj) != names:
            raise KfmtError(f"a written line has the columns {list(obj)}, not {names}")
    cols = {}
    for name in names:
        values = [obj[name] for obj in objects]
        if name in _BINARY_COLUMNS:
            values = [_unb64(v) for v in values]
        elif name == "timestamp":
            if any(not v.endswith("Z") for v in values):
                raise KfmtError("a written timestamp is not in UTC")
            ms = np.array([v[:-1] for v in values], dtype="datetime64[ms]").astype(np.int64)
            values = pa.array(ms * 1000, pa.int64()).cast(schema.field(name).type)
        elif name == "headers":
            values = [None if hs is None else [{"key": h["key"], "value": _unb64(h["value"])} for h in hs]
                      for hs in values]
        elif name == "header_key_bytes":
            values = [None if ks is None else [_unb64(k) for k in ks] for ks in values]
        elif name == "date":
            values = pa.array(np.array([v or "NaT" for v in values], dtype="datetime64[D]"),
                              pa.date32(), mask=np.array([v is None for v in values], dtype=bool))
        cols[name] = values if isinstance(values, pa.Array) else pa.array(values, schema.field(name).type)
    return pa.RecordBatch.from_arrays([cols[n] for n in names], schema=schema)
