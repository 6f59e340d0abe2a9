"""`spark.read.format("kafka-log").load(PATH)`: partition directories as a DataFrame.

A Python Data Source (Spark 4) with kfmt.rows.columns's schema: Spark's Kafka source columns, then the
on-disk ones. PATH is a partition directory or a log directory, local or any fsspec URL (Spark here
has no s3a: tasks read through kfmt's storage layer). Planning (on the driver side) lists segments
and plans the units of kfmt/rows/ranges.py: one task per segment, big segments cut into byte
ranges at batch boundaries, small consecutive segments of a partition sharing a task; each task
yields Arrow record batches.

Options (case-insensitive, as all Spark options; Spark's Kafka source names where one applies):
* `subscribe` (comma-separated topics), `subscribePattern` (a regular expression the whole topic
  name must match) or `assign` (JSON `{"topicA":[0,1]}`): which partitions; at most one; default all.
* `kafka.isolation.level`: `read_uncommitted` (default) or `read_committed` (records of aborted
  transactions and everything from the last stable offset on are left out; kfmt.partition.transactions).
* `includeControl`: `true` to include control records (transaction markers); default `false`.
* `includeDeleted`: `true` to read the records below each partition's log start offset too (deleted by
  DeleteRecords or retention; no broker serves them); default `false`: a consumer's view, from the
  log start offset (kfmt.partition.layout.PartitionDir.log_start_offset).
* `maxBytesPerSplit`: bytes of log per task (default 128 MiB).
* `startingOffsets`, `endingOffsets`, `startingTimestamp`, `endingTimestamp`,
  `startingOffsetsByTimestamp`, `endingOffsetsByTimestamp`, `startingOffsetsByTimestampStrategy`,
  `minPartitions`: which offsets, as Spark's Kafka source takes them (kfmt/pipelines/kafka_options.py).
* `pushFilters`: `false` to read every byte even when Spark pushes filters (default `true`; results
  are the same either way, kfmt/pipelines/pushdown.py).
* `storage.<key>`: an fsspec storage option, e.g. `storage.endpoint_url`, `storage.key`.
A schema given with `.schema(...)` names the columns to read, any of the source's, in any order, with
their types (`spark.read.format("kafka-log").schema("offset long, timestamp timestamp")`): only those
columns are sent to Spark. Spark's Python data sources cannot prune columns themselves, so this is the
way to make counts and scans cheap; a column the source does not have, or another type, is refused.
* `keyFormat`, `valueFormat`: decode keys and values (a value format name, or comma-separated
  `TOPIC_GLOB:NAME`; kfmt.rows.typed, docs/typed-export.md), with `keyFormatOption.<k>` /
  `valueFormatOption.<k>`, `schemas` (a registry URL, schema directory or `_schemas` partition;
  default: the log directory's), `onDecodeError` (`skip`: null, the default; `fail`) and `keepRaw`.
  The topics read must decode to one type.
Spark Kafka source options that have no meaning here (`kafka.bootstrap.servers`, `failOnDataLoss`,
...) and unknown options are refused rather than ignored: a query must not silently read something
else than it asks for.
"""
from __future__ import annotations

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from kfmt.pipelines import kafka_options
from kfmt.pipelines.source_options import NAME, SourceOptions
from kfmt.rows.columns import EXPORT_DDL

# Rows per Arrow batch handed to Spark: a task's Python worker builds a batch while the JVM takes in
# the one before, so batches a quarter of the export's 65,536 rows keep both busy (a 2 GB full scan
# on local[2]: 13.0 s -> 10.8 s) and leave less of the last batch to wait for at a task's end.
# Spark's own Arrow transfers default to 10,000 rows (spark.sql.execution.arrow.maxRecordsPerBatch).
ROWS_PER_BATCH = 16384


class LogUnit(InputPartition):
    """One task: consecutive segment ranges of one partition, how to select their records, and
    the offsets [start, end) wanted (None: no bound)."""

    def __init__(self, ranges: tuple, selection, outcomes, offsets: tuple = (None, None),
                 wanted=None, pushed=None):
        super().__init__(None)
        self.ranges = ranges
        self.selection = selection
        self.outcomes = outcomes
        self.offsets = offsets
        self.wanted = wanted  # kfmt.partition.windows.Wanted of the pushed filters (None: none)
        self.pushed = pushed  # kfmt.pipelines.pushdown.Pushed, whose row filters read() applies


class KafkaLogDataSource(DataSource):
    # Whether Spark will call pushFilters: a reader that has the method fails on Spark 4.1+ while
    # spark.sql.python.filterPushdown.enabled is false, so register() says which reader to use.
    filter_pushdown = False
    parallelism: int | None = None  # the session's spark.default.parallelism (set by register())

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self):
        typing = typed_topics(SourceOptions.parse(self.options))
        if not typing:
            return EXPORT_DDL
        from pyspark.sql.pandas.types import from_arrow_schema

        return from_arrow_schema(_typed_schema(typing))

    def reader(self, schema) -> "KafkaLogReader":
        options = SourceOptions.parse(self.options)
        typing = typed_topics(options)
        columns = chosen_columns(schema, _typed_schema(typing) if typing else None)
        reader = PushdownReader(options, self.parallelism, columns) \
            if self.filter_pushdown and options.push_filters else KafkaLogReader(options, columns=columns)
        reader.typing = typing
        return reader


def chosen_columns(schema, source=None) -> tuple[str, ...] | None:
    """The columns a user-given schema asks for (None: the source's whole schema), each checked
    against the source's own (`source`, an Arrow schema; None: kfmt.rows.columns.EXPORT_SCHEMA):
    name and type."""
    from pyspark.sql.pandas.types import from_arrow_type

    from kfmt.rows.columns import EXPORT_SCHEMA

    source = EXPORT_SCHEMA if source is None else source
    if schema is None or isinstance(schema, str):
        return None
    names = tuple(schema.fieldNames())
    if names == tuple(source.names):
        return None
    for field in schema.fields:
        if field.name not in source.names:
            raise ValueError(f"{NAME}: the schema names a column the source does not have: {field.name!r} "
                             f"(its columns: {', '.join(source.names)})")
        expected = from_arrow_type(source.field(field.name).type).simpleString()
        if field.dataType.simpleString() != expected:
            raise ValueError(f"{NAME}: the schema gives column {field.name!r} the type "
                             f"{field.dataType.simpleString()}, the source's is {expected}")
    return names


def typed_topics(options: "SourceOptions") -> dict:
    """topic -> kfmt.rows.typed.TopicTyping of the partitions the options read (on the driver). A
    DataFrame has one schema: topics that decode to different types, a typed one beside one read raw
    among them, are refused here, when the query is planned."""
    from kfmt.partition.layout import find_partitions
    from kfmt.rows.typed import bind_typing

    if not options.typing.active:
        return {}
    storage, path = open_storage_of(options)
    parts = [p for p in find_partitions(storage, path) if options.topics(p.topic, p.partition)]
    typing = bind_typing(options.typing, parts, storage.url_of(path), options.storage)
    _one_schema(typing, {p.topic for p in parts})
    return typing


def _one_schema(typing: dict, topics: set) -> None:
    from kfmt.rows.columns import EXPORT_SCHEMA

    kinds: dict = {}
    for topic in sorted(topics):
        kinds.setdefault(typing[topic].schema(EXPORT_SCHEMA) if topic in typing else EXPORT_SCHEMA,
                         []).append(topic)
    if len(kinds) > 1:
        groups = "; ".join(f"{', '.join(t)}{'' if s != EXPORT_SCHEMA else ' (raw)'}" for s, t in kinds.items())
        raise ValueError(f"{NAME}: the topics read decode to different types ({groups}), and a DataFrame "
                         f"has one schema: read them one at a time (subscribe), or give each the same format")


def _typed_schema(typing: dict):
    from kfmt.rows.columns import EXPORT_SCHEMA

    return next(iter(typing.values())).schema(EXPORT_SCHEMA)


class KafkaLogReader(DataSourceReader):
    typing: dict = {}  # topic -> kfmt.rows.typed.TopicTyping (keyFormat, valueFormat)

    def __init__(self, options: SourceOptions, parallelism: int | None = None,
                 columns: tuple[str, ...] | None = None):
        self.options = options
        self.pushed = None  # kfmt.pipelines.pushdown.Pushed, when Spark pushed filters
        self.parallelism = parallelism  # the session's default parallelism, where register() knew it
        self.columns = columns  # a user-given schema's columns (chosen_columns); None: all

    def partitions(self):
        from kfmt.partition.layout import find_partitions
        from kfmt.partition.reader import PartitionReader
        from kfmt.partition.transactions import partition_outcomes
        from kfmt.rows.ranges import Selection, partition_identity, split_ranges

        o, pushed = self.options, self.pushed
        selection = Selection(o.include_control, o.read_committed, o.include_deleted)
        storage, path = open_storage_of(o)
        parts = [p for p in find_partitions(storage, path) if o.topics(p.topic, p.partition)]
        o.offsets.check_partitions([partition_identity(p) for p in parts])
        planned = []  # (ranges, outcomes, offsets, wanted, reader) of every partition to read
        for part in parts:
            reader = PartitionReader(part, recover_tail=True)
            # resolved for every partition, so that a range no partition can give fails the query
            # with pushdown as without
            bounds = o.offsets.resolve(reader, *partition_identity(part))
            if pushed is not None and (pushed.empty or not pushed.wants_partition(*partition_identity(part))):
                continue
            wanted = self._wanted(bounds)
            ranges = self._ranges(part, o.split_bytes, bounds, reader, wanted)
            if ranges:
                planned.append((part, ranges, partition_outcomes(reader) if o.read_committed else None,
                                bounds, wanted, reader))
        units = self._units(planned, o.split_bytes)
        tasks = o.offsets.min_partitions or 0
        if pushed is not None:
            # what pushed filters leave may be far less than a task's worth: spread it over the
            # cores, as Spark's file sources size splits by bytes per core
            tasks = max(tasks, self.parallelism or 0)
        if tasks and len(units) < tasks:
            # Spark's minPartitions: smaller tasks, as far as the ranges can be cut
            total = sum(r.end - r.start for _, ranges, *_ in planned for r in ranges)
            split = max(1, total // tasks)
            planned = [(part, split_ranges(ranges, split, reader), outcomes, bounds, wanted, reader)
                       for part, ranges, outcomes, bounds, wanted, reader in planned]
            # a unit may take an eighth more than its share, so that small ranges (the tails of
            # earlier segments that a timestamp seek leaves, a short last segment) ride along with a
            # neighbour instead of being Spark tasks of their own, as long as there are still `tasks`
            units = self._units(planned, split + split // 8)
            if len(units) < tasks:
                units = self._units(planned, split)
        # Spark wants at least one partition: an empty unit reads nothing.
        return units or [LogUnit((), selection, None)]

    def _wanted(self, bounds):
        """What the pushed filters and the range options (their `bounds`, resolved as ListOffsets
        resolves them) want of a partition; None: everything."""
        from kfmt.partition.windows import Wanted

        if self.pushed is None:
            return None if bounds == (None, None) else Wanted((bounds,))
        return Wanted(self.pushed.offset_intervals(*bounds), self.pushed.min_ms, self.pushed.max_ms)

    @staticmethod
    def _ranges(part, split_bytes: int, bounds, reader, wanted) -> list:
        from kfmt.pipelines.pushdown import narrow_ranges
        from kfmt.rows.ranges import plan_ranges

        ranges = kafka_options.ranges_within(plan_ranges(part, split_bytes, reader), *bounds, reader)
        return ranges if wanted is None else narrow_ranges(ranges, reader, wanted)

    def _units(self, planned, split_bytes) -> list[LogUnit]:
        from kfmt.rows.ranges import Selection, pack_ranges

        selection = Selection(self.options.include_control, self.options.read_committed,
                              self.options.include_deleted)
        return [LogUnit(unit, selection, outcomes, bounds, wanted, self.pushed)
                for _, ranges, outcomes, bounds, wanted, _ in planned
                for unit in pack_ranges(ranges, split_bytes)]

    def read(self, unit: LogUnit):
        from kfmt.rows.ranges import NoDigest, RangeTally, read_range

        start, end = unit.offsets
        for rng in unit.ranges:
            tally = RangeTally(digest=NoDigest())  # counts nobody reads: no record hashing
            for batch in read_range(rng, unit.selection, unit.outcomes, tally, rows_per_chunk=ROWS_PER_BATCH,
                                    wanted=unit.wanted):
                batch = kafka_options.clip(batch, start, end)
                if unit.pushed is not None:
                    batch = unit.pushed.filter_rows(batch)
                if batch.num_rows:
                    typing = self.typing.get(rng.topic)
                    if typing is not None:
                        batch = typing.apply(batch)[0]
                    yield batch if self.columns is None else batch.select(self.columns)


class PushdownReader(KafkaLogReader):
    """The reader when Spark pushes filters (kfmt/pipelines/pushdown.py): the ones it handles exactly
    are not returned; the others are, and Spark applies them after the scan."""

    def pushFilters(self, filters):
        from kfmt.pipelines.pushdown import Pushed

        self.pushed = Pushed()
        for spark_filter in filters:
            if not self.pushed.take(spark_filter):
                yield spark_filter


def open_storage_of(options: SourceOptions):
    from kfmt.storage.store import open_storage

    return open_storage(options.path, options.storage)


def register(spark, check_workers: bool = True) -> None:
    """Make `spark.read.format("kafka-log")` available in this session. First (unless
    `check_workers` is false) one tiny job checks that Spark's Python workers can import kfmt, so
    that a worker interpreter without it is one clear error here, not a traceback in every task."""
    if check_workers:
        from kfmt.pipelines.worker_check import check_workers_import_kfmt

        check_workers_import_kfmt(spark)
    spark.dataSource.register(_source_for(spark))


def _source_for(spark) -> type:
    """The data source class for this session: with filter pushdown unless the session turned Spark's
    spark.sql.python.filterPushdown.enabled off (left unset, it is turned on here; Spark versions
    without pushFilters never call it)."""
    key = "spark.sql.python.filterPushdown.enabled"
    setting = spark.conf.get(key, None)
    if setting is None:
        spark.conf.set(key, "true")
    enabled = setting is None or str(setting).strip().lower() == "true"
    try:
        parallelism = spark.sparkContext.defaultParallelism
    except Exception:  # Spark Connect sessions have no SparkContext
        parallelism = None
    # a class made here is pickled by value (not by name), so these reach Spark's workers
    return type(KafkaLogDataSource.__name__, (KafkaLogDataSource,), {
        "filter_pushdown": enabled, "parallelism": parallelism, "__doc__": KafkaLogDataSource.__doc__})
