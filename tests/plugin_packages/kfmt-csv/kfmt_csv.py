"""CSV as a kfmt export format: the columns asked for, one line per record, keys and values encoded
as asked (kfmt export --format csv --csv-columns ... --csv-binary hex)."""
import base64
import csv
import io

from kfmt.plugin.hookspecs import hookimpl
from kfmt.plugin.options import Option

BINARY = {"base64": lambda b: base64.b64encode(b).decode("ascii"), "hex": bytes.hex,
          "text": lambda b: b.decode("utf-8", "replace")}


def _columns_problem(text):
    """What is wrong with --csv-columns: a name that is not a column of the export's files
    (docs/export.md; topic and partition are directory names), or a list column (headers)."""
    import pyarrow as pa  # only once a value is checked, not when kfmt builds its command line
    from kfmt.rows.columns import EXPORT_SCHEMA

    flat = [f.name for f in EXPORT_SCHEMA
            if not pa.types.is_list(f.type) and f.name not in ("topic", "partition")]
    wrong = [name for name in text.split(",") if name not in flat]
    return f"no flat column {', '.join(wrong)} (one of {', '.join(flat)})" if wrong else None


class Csv:
    name = "csv"                     # kfmt export --format csv
    extension = ".csv"
    # Its settings: the flags --csv-columns, --csv-delimiter, --csv-header and --csv-binary of kfmt
    # export, the keywords csv_columns... of kfmt.export; open() receives them checked, as a dict.
    options = (
        Option("columns", "the columns written, comma-separated", default="offset,timestamp_ms,key,value",
               validate=_columns_problem),
        Option("delimiter", "the field delimiter", choices=(",", ";", "|", "tab"), default=","),
        Option("header", "write the column names first", bool, default=False),
        Option("binary", "how keys and values are written", choices=tuple(BINARY), default="base64"),
    )

    def open(self, stream, schema, settings):
        return CsvWriter(stream, settings)

    def rows_in(self, data, schema, settings):
        """How many records a written file holds (kfmt export checks every file it wrote)."""
        lines = csv.reader(io.StringIO(bytes(data).decode("utf-8")), _dialect(settings))
        return sum(1 for _ in lines) - (1 if settings["header"] else 0)


class CsvWriter:
    def __init__(self, stream, settings):
        self.stream, self.settings = stream, settings
        self.columns = settings["columns"].split(",")
        self.encode = BINARY[settings["binary"]]
        if settings["header"]:
            self._write([self.columns])

    def write(self, rows):           # a pyarrow RecordBatch of export rows
        columns = []
        for name in self.columns:
            values = rows.column(name).to_pylist()
            if name in ("key", "value"):
                values = [None if v is None else self.encode(v) for v in values]
            columns.append(values)
        self._write(zip(*columns))

    def _write(self, lines):
        text = io.StringIO()
        csv.writer(text, _dialect(self.settings), lineterminator="\n").writerows(lines)
        self.stream.write(text.getvalue().encode("utf-8"))

    def close(self):
        pass                         # kfmt publishes the stream itself


def _dialect(settings):
    class Dialect(csv.excel):
        delimiter = "\t" if settings["delimiter"] == "tab" else settings["delimiter"]
    return Dialect


@hookimpl
def kfmt_register_exporters(register):
    register(Csv())
