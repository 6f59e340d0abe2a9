"""`kfmt.read`: the records of a partition or log directory as a stream of Arrow record batches.

The rows are those of `kfmt export` and of the `kafka-log` Spark data source (kfmt.rows.columns's
EXPORT_SCHEMA: Spark's Kafka source columns, then the on-disk ones), made by the same code
(kfmt.rows.ranges.read_range, one segment range at a time), so what a notebook reads here is what an
export would have written. The stream is a `pyarrow.RecordBatchReader`, which pandas, Polars and DuckDB
take through Arrow's C stream interface without a copy to disk; memory holds one chunk of rows
(`batch_rows`) at a time, whatever the size of the log.

Which records, as a consumer of the broker that wrote the directory would see them:
* from the partition's log start offset (Kafka's LogLoader: the larger of the log directory's
  `log-start-offset-checkpoint` entry and the first segment's base offset); `include_deleted=True` also
  gives what lies below it (records a DeleteRecords or retention left in the first segment);
* offsets in [from_offset, to_offset); timestamps by Kafka's ListOffsets rule (KIP-79,
  `LogSegment.findOffsetByTimestamp`): from the first record whose timestamp is >= from_timestamp, up to
  (not including) the first record whose timestamp is >= to_timestamp, every record in between whatever
  its own timestamp;
* `isolation="read_committed"` leaves out aborted transactions and everything from the last stable
  offset on (kfmt.partition.transactions); control records only with `include_control=True`.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterable, Iterator

import pyarrow as pa
import pyarrow.compute as pc

from kfmt.errors import UsageError
from kfmt.partition.layout import PartitionDir, find_partitions
from kfmt.partition.reader import PartitionReader
from kfmt.partition.transactions import ISOLATION_LEVELS
from kfmt.rows.columns import EXPORT_SCHEMA
from kfmt.rows.ranges import ROWS_PER_CHUNK, Selection, plan_ranges, read_range
from kfmt.rows.schemas.sources import RegistryAuth
from kfmt.rows.typed import TypingOptions, bind_typing
from kfmt.storage.store import open_storage


@dataclass(frozen=True)
class PartitionSummary:
    """What `open_log(...).partitions()` tells of one partition, without reading its records."""

    topic: str | None
    partition: int | None
    path: str  # its URL
    segments: int
    bytes: int  # of .log files
    log_start_offset: int | None  # where a consumer starts (None: no segment)
    first_segment_offset: int | None  # the first segment's base offset (below it: nothing on disk)


class Log:
    """A partition or log directory opened for reading (local path or fsspec URL)."""

    def __init__(self, path: str | os.PathLike, *, storage_options: dict | None = None, topics: str | None = None,
                 partitions: int | Iterable[int] | None = None):
        self.storage, self.path = open_storage(os.fspath(path), storage_options)
        self.storage_options = storage_options
        wanted = _partition_set(partitions)
        parts = find_partitions(self.storage, self.path, topics, None)
        self.parts = [p for p in parts if wanted is None or p.partition in wanted]
        if not self.parts:
            narrowed = topics is not None or partitions is not None
            raise UsageError(f"{self.storage.url_of(self.path)}: no partition directories"
                             + (" match the topics/partitions asked for" if narrowed else ""))

    def partitions(self) -> list[PartitionSummary]:
        """Every selected partition, in (topic, partition) order."""
        return [PartitionSummary(p.topic, p.partition, p.storage.url_of(p.path), len(p.segments),
                                 sum(s.size for s in p.segments), p.log_start_offset if p.segments else None,
                                 p.segments[0].base_offset if p.segments else None)
                for p in self.parts]

    def read(self, *, from_offset: int | None = None, to_offset: int | None = None,
             from_timestamp: int | None = None, to_timestamp: int | None = None,
             isolation: str = "read_uncommitted", include_control: bool = False,
             include_deleted: bool = False, batch_rows: int = ROWS_PER_CHUNK,
             key_format=None, value_format=None, key_format_options: dict | None = None,
             value_format_options: dict | None = None, schemas: str | None = None,
             schema_registry_auth: str | None = None, schema_registry_token: str | None = None,
             on_decode_error: str = "skip", keep_raw: bool = False) -> pa.RecordBatchReader:
        """The selected records of every partition, partition after partition in (topic, partition)
        order, each in offset order (see the module's description of the selection).

        `key_format` / `value_format`: a value format name or a list of `TOPIC_GLOB:NAME`
        (kfmt.rows.typed, docs/typed-export.md) to get keys and values decoded; `schemas` where their
        schemas are (default: the log directory's `_schemas` partition; a registry URL takes
        `schema_registry_auth="user:password"` or a bearer `schema_registry_token`); a value that does not decode
        is null (`on_decode_error="fail"` raises instead). Topics with different types need separate
        reads: the stream has one schema."""
        if isolation not in ISOLATION_LEVELS:
            raise UsageError(f"isolation must be one of {', '.join(ISOLATION_LEVELS)}, not {isolation!r}")
        if batch_rows <= 0:
            raise UsageError(f"batch_rows must be positive, not {batch_rows}")
        bounds = _Bounds(from_offset, to_offset, from_timestamp, to_timestamp, include_deleted)
        selection = Selection(include_control, isolation == "read_committed", include_deleted)
        batches = (rows for part in self.parts
                   for rows in self._partition_rows(part, bounds, selection, batch_rows))
        typing = TypingOptions.of(key_format, value_format, key_options=key_format_options,
                                  value_options=value_format_options, schemas=schemas,
                                  registry_auth=RegistryAuth(schema_registry_auth, schema_registry_token),
                                  on_decode_error=on_decode_error, keep_raw=keep_raw)
        if not typing.active:
            return pa.RecordBatchReader.from_batches(EXPORT_SCHEMA, batches)
        return self._typed(typing, batches)

    def _typed(self, options: TypingOptions, batches) -> pa.RecordBatchReader:
        """The stream with keys and values decoded: one schema, so every topic read must decode to
        the same types."""
        bound = bind_typing(options, self.parts, self.storage.url_of(self.path),
                            self.storage_options)
        schemas = {t: bound[t].schema(EXPORT_SCHEMA) if t in bound else EXPORT_SCHEMA
                   for t in {p.topic for p in self.parts}}
        if len(set(schemas.values())) > 1:
            raise UsageError("the topics read decode to different types: read them one at a time "
                             "(topics=...)")
        schema = next(iter(schemas.values()))

        def decoded():
            for rows in batches:
                typing = bound.get(rows.column("topic")[0].as_py())
                yield typing.apply(rows)[0] if typing is not None else rows
        return pa.RecordBatchReader.from_batches(schema, decoded())

    def _partition_rows(self, part: PartitionDir, bounds: "_Bounds", selection: Selection,
                        batch_rows: int) -> Iterator[pa.RecordBatch]:
        lo, hi = bounds.offsets(part, None if bounds.include_deleted else part.log_start_offset)
        if lo is not None and hi is not None and lo >= hi:
            return
        outcomes = None
        if selection.read_committed:
            from kfmt.partition.transactions import partition_outcomes

            outcomes = partition_outcomes(PartitionReader(part))
        bases = [s.base_offset for s in part.segments]
        following = dict(zip(bases, bases[1:]))  # a segment's offsets end where the next begins
        for rng in plan_ranges(part):
            after = following.get(rng.segment_base)
            if (lo is not None and after is not None and after <= lo) or (hi is not None
                                                                          and rng.segment_base >= hi):
                continue  # the whole segment lies outside [lo, hi): not even read
            for rows in read_range(rng, selection, outcomes, rows_per_chunk=batch_rows):
                rows = _within(rows, lo, hi)
                if rows.num_rows:
                    yield rows


@dataclass(frozen=True)
class _Bounds:
    from_offset: int | None
    to_offset: int | None
    from_timestamp: int | None
    to_timestamp: int | None
    include_deleted: bool

    def offsets(self, part: PartitionDir, log_start: int | None) -> tuple[int | None, int | None]:
        """[lo, hi) of one partition (None: unbounded)."""
        lo = _largest(self.from_offset, log_start)
        hi = self.to_offset
        if self.from_timestamp is not None or self.to_timestamp is not None:
            reader = PartitionReader(part)
            if self.from_timestamp is not None:
                start = reader.start_point(None, self.from_timestamp)
                if start is None:  # no record that new: nothing to read
                    return 0, 0
                lo = _largest(lo, start[2])
            if self.to_timestamp is not None:
                end = reader.start_point(None, self.to_timestamp)
                if end is not None:  # else every record is older: no bound
                    hi = end[2] if hi is None else min(hi, end[2])
        return lo, hi


def _largest(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def _within(rows: pa.RecordBatch, lo: int | None, hi: int | None) -> pa.RecordBatch:
    """The rows whose offsets lie in [lo, hi) (None: unbounded)."""
    offsets = rows.column("offset")
    keep = None
    if lo is not None and pc.min(offsets).as_py() < lo:
        keep = pc.greater_equal(offsets, lo)
    if hi is not None and pc.max(offsets).as_py() >= hi:
        below = pc.less(offsets, hi)
        keep = below if keep is None else pc.and_(keep, below)
    return rows if keep is None else rows.filter(keep)


def _partition_set(partitions: int | Iterable[int] | None) -> set[int] | None:
    if partitions is None:
        return None
    if isinstance(partitions, bool) or not isinstance(partitions, (int, Iterable)):
        raise UsageError(f"partitions must be a partition number or a list of them, not {partitions!r}")
    return {partitions} if isinstance(partitions, int) else {int(p) for p in partitions}


def open_log(path: str | os.PathLike, *, storage_options: dict | None = None, topics: str | None = None,
             partitions: int | Iterable[int] | None = None) -> Log:
    """A partition or log directory, `topics` (a glob on topic names) and `partitions` (a number or
    a list) narrowing a log directory as `--topic`/`--partition` do."""
    return Log(path, storage_options=storage_options, topics=topics, partitions=partitions)


def read(path: str | os.PathLike, *, topics: str | None = None, partitions: int | Iterable[int] | None = None,
         from_offset: int | None = None, to_offset: int | None = None,
         from_timestamp: int | None = None, to_timestamp: int | None = None,
         isolation: str = "read_uncommitted", include_control: bool = False,
         include_deleted: bool = False, storage_options: dict | None = None,
         batch_rows: int = ROWS_PER_CHUNK, **typing) -> pa.RecordBatchReader:
    """The records of a partition or log directory as a `pyarrow.RecordBatchReader` of export rows:
    `open_log(path, ...).read(...)` in one call (`typing`: key_format, value_format, ..., as
    Log.read takes them)."""
    return open_log(path, storage_options=storage_options, topics=topics, partitions=partitions).read(
        from_offset=from_offset, to_offset=to_offset, from_timestamp=from_timestamp,
        to_timestamp=to_timestamp, isolation=isolation, include_control=include_control,
        include_deleted=include_deleted, batch_rows=batch_rows, **typing)
