"""The checks of `kfmt export`'s tasks (kfmt.transforms.export_job): what a task handed its writers
(HandedRows: per file, the records, their content digest, the batches they came from), that each
written file holds exactly that (check_file), and that what was written is what was read
(check_same_content). A failed check publishes nothing."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kfmt.errors import KfmtError
from kfmt.rows.columns import rows_to_records
from kfmt.rows.ranges import RangeTally, SegmentRange
from kfmt.storage.manifest import FileRecord


class HandedRows:
    """What a task handed to the exporter's writers, per file (the rows of every write, as the
    writer got them): data records and their content digest, control records, and the batches
    (segment, position) their rows came from. Typed rows (decoded keys and values, or dead letters)
    are counted, not digested: their stored bytes were digested before decoding."""

    def __init__(self, typed: bool = False):
        self.typed = typed
        self.files: dict[str, RangeTally] = {}
        self._batches: list[np.ndarray] = []  # (segment base, position) where each batch's rows begin

    def add(self, rel: str, rows: pa.RecordBatch) -> None:
        tally = self.files.setdefault(rel, RangeTally())
        if self.typed:
            tally.records += rows.num_rows
            if "is_control" in rows.schema.names:
                self._batches.append(batch_starts(rows))
                controls = pc.sum(rows.column("is_control").cast(pa.int64())).as_py() or 0
                tally.records -= controls
                tally.control_records += controls
            return
        self._batches.append(tally_rows(rows, tally))

    def total(self) -> RangeTally:
        total = RangeTally()
        for tally in self.files.values():
            total.merge(tally)
            if tally.first_offset is not None:  # files of several dates: the least of their firsts
                total.first_offset = min(total.first_offset, tally.first_offset)
        total.batches = distinct_batches(self._batches)
        return total


def tally_rows(rows: pa.RecordBatch, tally: RangeTally) -> np.ndarray:
    """Add export rows to `tally` (data records, their digest and first offset; control records);
    returns the (segment base, position) of the batches they come from, where each one's rows begin
    (distinct_batches counts them)."""
    control = rows.column("is_control")
    controls = pc.sum(control.cast(pa.int64())).as_py() or 0
    tally.control_records += controls
    data_rows = rows.filter(pc.invert(control)) if controls else rows
    tally.records += data_rows.num_rows
    tally.digest.update(rows_to_records(data_rows))
    if data_rows.num_rows:
        first = pc.min(data_rows.column("offset")).as_py()
        tally.first_offset = first if tally.first_offset is None else min(first, tally.first_offset)
    return batch_starts(rows)


def batch_starts(rows: pa.RecordBatch) -> np.ndarray:
    """(segment base, position) of the batches the rows come from, where each one's rows begin."""
    segments = rows.column("segment_base_offset").to_numpy()
    positions = rows.column("file_position").to_numpy()
    begins = np.ones(len(positions), dtype=bool)
    begins[1:] = (segments[1:] != segments[:-1]) | (positions[1:] != positions[:-1])
    return np.stack([segments[begins], positions[begins]], axis=1)


def distinct_batches(keys: list[np.ndarray]) -> int:
    """How many distinct (segment base, position) pairs `keys` hold (a batch whose rows went to
    several writes, files or dates, counts once)."""
    keys = [k for k in keys if len(k)]
    if not keys:
        return 0
    pairs = np.concatenate(keys)
    segments, positions = np.diff(pairs[:, 0]), np.diff(pairs[:, 1])
    if ((segments > 0) | ((segments == 0) & (positions >= 0))).all():
        # in file order (one directory's rows, as they are written): count the changes, no sort
        return 1 + int(np.count_nonzero((segments != 0) | (positions != 0)))
    return len(np.unique(pairs, axis=0))


def check_file(fmt, files, record: FileRecord, schema: pa.Schema, handed: RangeTally,
                settings: dict) -> None:
    """Check a written file against the rows handed to its writer: its size, and the rows it holds,
    counted from its own metadata where the exporter provides that (`rows_in`: Parquet's footer;
    its encoding is pyarrow's), else read back whole and digested (an exporter whose encoding is its
    own code, JSON Lines)."""
    path = files.path(record.rel)
    where = files.storage.url_of(path)
    data = files.storage.map(path)  # a local file is mapped: read without holding it
    if len(data) != record.size:
        raise KfmtError(f"{where}: {len(data)} bytes read back, {record.size} written; nothing was "
                        f"published")
    rows_in = getattr(fmt, "rows_in", None)
    typed = "reason" in schema.names or any(schema.field(n).type != pa.binary() for n in ("key", "value"))
    found = RangeTally()
    try:
        if rows_in is not None:
            held = rows_in(data, schema, settings)
        else:
            for rows in fmt.read_back(data, schema, settings):
                if typed:
                    found.records += rows.num_rows
                else:
                    tally_rows(rows, found)
            held = found.rows
    except (KfmtError, ValueError, pa.ArrowException) as err:
        raise KfmtError(f"{where}: the written file does not read back: {err}; nothing was "
                        f"published") from None
    if held != handed.rows or (rows_in is None and found.digest != handed.digest and not typed):
        raise KfmtError(f"{where}: the file holds {held} rows"
                        + ("" if rows_in else f" (digest {found.digest.hexdigest()})")
                        + f" but {handed.rows} were written to it"
                        + ("" if rows_in else f" (digest {handed.digest.hexdigest()})")
                        + "; nothing was published")


def check_same_content(ranges: tuple[SegmentRange, ...], read: RangeTally, written: RangeTally) -> None:
    if (read.digest, read.records, read.control_records) != \
            (written.digest, written.records, written.control_records):
        first, last = ranges[0], ranges[-1]
        where = f"{first.file} [{first.start}, {first.end})" + (
            "" if len(ranges) == 1 else f" to {last.file} [{last.start}, {last.end})")
        raise KfmtError(f"{where}: the rows written hold "
                        f"{written.records} records ({written.control_records} control, digest "
                        f"{written.digest.hexdigest()}) but {read.records} were read ("
                        f"{read.control_records} control, digest {read.digest.hexdigest()}); nothing "
                        f"was published")
