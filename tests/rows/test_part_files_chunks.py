"""How PartFiles hands a row group to an export writer: a Parquet writer gets the chunks the rows
were gathered in (no copy into one batch, docs/performance.md "Typed export"), any other writer one
RecordBatch, as the exporter protocol promises (kfmt.rows.exporters)."""
from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq

from kfmt.default_plugins.exporters.files import ParquetFormat
from kfmt.rows.part_files import _hand_over

ADDRESS = pa.struct([pa.field("city", pa.string()), pa.field("zip", pa.string())])
VALUE = pa.struct([pa.field("id", pa.int64()), pa.field("billing", ADDRESS),
                   pa.field("items", pa.list_(pa.struct([pa.field("sku", pa.string()),
                                                         pa.field("price", pa.decimal128(12, 2))]))),
                   pa.field("attributes", pa.map_(pa.string(), pa.string())),
                   pa.field("note", pa.string())])
SCHEMA = pa.schema([pa.field("offset", pa.int64()), pa.field("value", VALUE), pa.field("key", pa.binary())])


def _chunk(first: int, n: int) -> pa.RecordBatch:
    import decimal

    values = [None if i % 7 == 3 else
              {"id": i, "billing": None if i % 5 == 0 else {"city": f"c{i % 13}", "zip": f"{i:05d}"},
               "items": [{"sku": f"s{i}-{k}", "price": decimal.Decimal(i * 10 + k).scaleb(-2)}
                         for k in range(i % 4)],
               "attributes": [(f"k{k}", f"v{i}") for k in range(i % 3)],
               "note": f"n{i}" if i % 2 else None}
              for i in range(first, first + n)]
    return pa.record_batch([pa.array(range(first, first + n), pa.int64()), pa.array(values, VALUE),
                            pa.array([b"k%d" % i for i in range(first, first + n)])], schema=SCHEMA)


class _Stream:
    """A staged stream as PartFiles opens them: bytes written, and their count."""

    def __init__(self):
        self.data = io.BytesIO()

    def write(self, data) -> None:
        self.data.write(data)

    @property
    def size(self) -> int:
        return self.data.tell()


class _BatchWriter:
    def __init__(self):
        self.rows = []

    def write(self, rows) -> None:
        self.rows.append(rows)


def _gathered() -> pa.Table:
    # rows gathered from several decoded chunks, and a row group that ends inside the last one
    chunks = [_chunk(0, 300), _chunk(300, 1), _chunk(301, 250)]
    return pa.Table.from_batches(chunks, SCHEMA).slice(0, 540)


def test_parquet_gets_the_chunks_as_they_are_and_writes_one_row_group_of_them():
    group = _gathered()
    stream = _Stream()
    writer = ParquetFormat().open(stream, SCHEMA, {})
    handed = _hand_over(writer, group)
    writer.close()
    assert handed is group and handed.column("value").num_chunks == 3  # not copied into one batch
    file = pq.ParquetFile(pa.BufferReader(stream.data.getvalue()))
    assert file.metadata.num_row_groups == 1 and file.metadata.num_rows == 540
    back = file.read()
    assert back.schema.equals(SCHEMA) and back.equals(group.combine_chunks())


def test_the_file_is_the_one_a_gathered_batch_gives():
    """Not gathering changes nothing a reader sees: the same rows, types and row groups."""
    group = _gathered()
    files = []
    for rows in (group, group.combine_chunks().to_batches()[0]):
        stream = _Stream()
        writer = ParquetFormat().open(stream, SCHEMA, {})
        writer.write(rows)
        writer.close()
        files.append(pq.read_table(pa.BufferReader(stream.data.getvalue())))
    assert files[0].equals(files[1])


def test_a_writer_without_takes_tables_gets_one_record_batch():
    group = _gathered()
    writer = _BatchWriter()
    handed = _hand_over(writer, group)
    assert writer.rows == [handed] and isinstance(handed, pa.RecordBatch)
    assert pa.Table.from_batches([handed]).equals(group.combine_chunks())
