"""The part files one export task writes, sized the way a Spark writer sizes its output.

A task (a run of consecutive segment ranges of one partition, kfmt.rows.ranges.pack_ranges) writes
one file per directory it has rows for (one per partition, or one per date with `date`), as each
task of a Spark job writes one file per output partition (`FileFormatWriter`'s dynamic partition
writer). A file is closed once it reaches the target size and the task goes on in a next one, so a
file is at most the target size plus one row group.

Rows are gathered into row groups sized for scans (`ROW_GROUP_ROWS` rows or `ROW_GROUP_BYTES` of
Arrow data, whichever comes first), however small the segments they come from: a row group per
segment of a time-rolled topic would give readers thousands of tiny row groups. Every row group of a
file holds ROW_GROUP_ROWS rows but the last (rows beyond a full row group wait for the next one),
unless its rows reach ROW_GROUP_BYTES first. Memory stays bounded by one row group: when the rows
gathered for all directories together reach `ROW_GROUP_BYTES`, the biggest gathering is written out
early.

File names depend only on the task's first range and the file's number in its directory
(`part-<segment base offset>-<range>-c<NNN>.<ext>`, Spark's `c000` counter), so a re-run with the
same settings writes the same names, and the same bytes. A run that adds to an export (`kfmt export
--append`) also names the offset it resumed its partition from (`part-<segment base offset>-<range>-
o<first offset>-c<NNN>.<ext>`): an earlier run may have read the start of the same segment range, and
each run starts a partition at a later offset than the one before, so names never collide.
"""
from __future__ import annotations

import pyarrow as pa

from kfmt.defaults import DEFAULT_TARGET_FILE_BYTES
from kfmt.storage.manifest import FileRecord

ROW_GROUP_ROWS = 128 * 1024
ROW_GROUP_BYTES = 64 << 20  # of Arrow data: about what a Parquet reader decodes at once


def part_file_name(segment_base: int, range_index: int, number: int, extension: str,
                   first_offset: int | None = None) -> str:
    resumed = "" if first_offset is None else f"-o{first_offset:020d}"
    return f"part-{segment_base:020d}-{range_index:04d}{resumed}-c{number:03d}{extension}"


class _Directory:
    """One output directory of a task: rows gathered for its next row group, its open file."""

    def __init__(self):
        self.pending: list[pa.RecordBatch] = []
        self.rows = self.bytes = 0
        self.writer = None  # the exporter's writer of the open file
        self.files = 0  # files begun so far


class PartFiles:
    """Write a task's rows into part files below a staged output (kfmt.storage.staging.StagedFiles).

    `write(directory, rows)` takes rows in the order they belong in the files; `close()` finishes
    every file and returns their FileRecords, in the order they were begun."""

    def __init__(self, exporter, files, schema: pa.Schema, segment_base: int, range_index: int,
                 target_file_bytes: int = DEFAULT_TARGET_FILE_BYTES,
                 row_group_rows: int | None = None, row_group_bytes: int | None = None,
                 first_offset: int | None = None, observe=None, settings: dict | None = None):
        self.exporter, self.files, self.schema = exporter, files, schema
        self.settings = settings or {}  # the exporter's (kfmt.rows.exporters: its options' values)
        # observe(file's relative path, rows): called with every RecordBatch handed to a writer, as
        # it was handed (the export checks them against what it read: kfmt.transforms.export_job)
        self.observe = observe
        self.first_offset = first_offset  # where an appending run resumed the partition (names)
        self.segment_base, self.range_index = segment_base, range_index
        self.target_file_bytes = target_file_bytes
        self.row_group_rows = row_group_rows or ROW_GROUP_ROWS
        self.row_group_bytes = row_group_bytes or ROW_GROUP_BYTES
        self._directories: dict[str, _Directory] = {}
        self._writers: list = []  # every writer opened, in order
        self._pending_bytes = 0

    @property
    def pending_bytes(self) -> int:
        """Bytes of rows gathered and not yet written, all directories together."""
        return self._pending_bytes

    def write(self, directory: str, rows: pa.RecordBatch) -> None:
        if not rows.num_rows:
            return
        d = self._directories.setdefault(directory, _Directory())
        d.pending.append(rows)
        d.rows += rows.num_rows
        d.bytes += rows.nbytes
        self._pending_bytes += rows.nbytes
        while d.rows >= self.row_group_rows:  # full row groups; the rest waits for more rows
            self._write_row_group(directory, d, self.row_group_rows)
        if d.bytes >= self.row_group_bytes:
            self._write_row_group(directory, d)
        while self._pending_bytes >= self.row_group_bytes:
            name, fullest = max(self._directories.items(), key=lambda item: item[1].bytes)
            self._write_row_group(name, fullest)

    def close(self) -> list[FileRecord]:
        for name, d in sorted(self._directories.items()):
            if d.pending:
                self._write_row_group(name, d)
            self._finish(d)
        return [writer.stream.record for writer in self._writers]

    def abort(self) -> None:
        """Drop every file not finished (after a failure)."""
        for writer in self._writers:
            if writer.stream.record is None:
                writer.stream.abort()

    def _write_row_group(self, name: str, d: _Directory, rows: int | None = None) -> None:
        """Write the first `rows` rows gathered for a directory (all of them: None) as one row group,
        in its open file or a new one."""
        table = pa.Table.from_batches(d.pending, self.schema)
        rows = table.num_rows if rows is None else rows
        rest = table.slice(rows)
        group = table.slice(0, rows)
        self._pending_bytes -= d.bytes
        d.pending = [b for b in rest.to_batches() if b.num_rows]
        d.rows = rest.num_rows
        d.bytes = sum(b.nbytes for b in d.pending)
        self._pending_bytes += d.bytes
        if d.writer is None:
            file_name = part_file_name(self.segment_base, self.range_index, d.files,
                                       self.exporter.extension, self.first_offset)
            d.writer = self.exporter.open(self.files.open(f"{name}/{file_name}"), self.schema, self.settings)
            self._writers.append(d.writer)
            d.files += 1
        rows_handed = _hand_over(d.writer, group)
        if self.observe is not None:
            self.observe(d.writer.stream.rel, rows_handed)
        if d.writer.stream.size >= self.target_file_bytes:
            self._finish(d)

    @staticmethod
    def _finish(d: _Directory) -> None:
        if d.writer is not None:
            d.writer.close()
            d.writer.stream.close()
            d.writer = None


def _hand_over(writer, group: pa.Table):
    """Write a row group's rows: as the Table of chunks they were gathered in to a writer that
    `takes_tables` (Parquet writes chunks as they are), else as one RecordBatch, as the exporter
    protocol hands them (kfmt.rows.exporters). Returns the rows handed. Gathering nested rows
    (decoded values: structs, lists, maps) into one batch copies every buffer and rebases every
    offset: about a tenth of the typed export's CPU time (docs/performance.md, "Typed export")."""
    if getattr(writer, "takes_tables", False):
        writer.write(group)
        return group
    (batch,) = group.combine_chunks().to_batches()
    writer.write(batch)
    return batch
