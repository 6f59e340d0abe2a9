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

import json
import re

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from kfmt.pipelines import kafka_options
from kfmt.pipelines.kafka_options import OffsetRange
from kfmt.rows.columns import EXPORT_DDL

NAME = "kafka-log"
STORAGE_PREFIX = "storage."
OPTIONS = ("path", "subscribe", "subscribepattern", "assign", "kafka.isolation.level",
           "includecontrol", "includedeleted", "maxbytespersplit", "pushfilters", *kafka_options.OPTIONS,
           "keyformat", "valueformat", "schemas", "ondecodeerror", "keepraw")
FORMAT_OPTION_PREFIXES = ("keyformatoption.", "valueformatoption.")
ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
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
        reader = PushdownReader(options, self.parallelism) if self.filter_pushdown and options.push_filters \
            else KafkaLogReader(options)
        reader.typing = typed_topics(options)
        return reader


class SourceOptions:
    """The data source's options, checked (a ValueError names the option at fault)."""

    def __init__(self, path: str, storage: dict, topics: "TopicFilter", read_committed: bool,
                 include_control: bool, split_bytes: int, offsets: OffsetRange | None = None,
                 include_deleted: bool = False, push_filters: bool = True):
        self.path, self.storage, self.topics = path, storage, topics
        self.offsets = offsets or OffsetRange.parse({})
        self.read_committed, self.include_control, self.split_bytes = (read_committed,
                                                                       include_control, split_bytes)
        self.include_deleted = include_deleted
        self.push_filters = push_filters

    @classmethod
    def parse(cls, options) -> "SourceOptions":
        from kfmt.rows.ranges import DEFAULT_SPLIT_BYTES
        from kfmt.storage.store import parse_storage_options

        opts = {k.lower(): v for k, v in dict(options).items()}
        unknown = sorted(k for k in opts if k not in OPTIONS and not k.startswith(STORAGE_PREFIX)
                         and not k.startswith(FORMAT_OPTION_PREFIXES))
        if unknown:
            raise ValueError(f"{NAME}: unsupported option(s) {', '.join(unknown)} (supported: path, "
                             f"subscribe, subscribePattern, assign, kafka.isolation.level, "
                             f"includeControl, includeDeleted, maxBytesPerSplit, pushFilters, startingOffsets, endingOffsets, "
                             f"startingTimestamp, endingTimestamp, startingOffsetsByTimestamp, "
                             f"endingOffsetsByTimestamp, startingOffsetsByTimestampStrategy, "
                             f"minPartitions, storage.<fsspec option>, keyFormat, valueFormat, "
                             f"keyFormatOption.<k>, valueFormatOption.<k>, schemas, onDecodeError, keepRaw)")
        if "path" not in opts:
            raise ValueError(f'{NAME}: no path: use spark.read.format("{NAME}").load(PATH)')
        storage = parse_storage_options([f"{k[len(STORAGE_PREFIX):]}={v}" for k, v in opts.items()
                                         if k.startswith(STORAGE_PREFIX)])
        isolation = opts.get("kafka.isolation.level", "read_uncommitted")
        if isolation not in ISOLATION_LEVELS:
            raise ValueError(f"{NAME}: kafka.isolation.level must be one of {', '.join(ISOLATION_LEVELS)}, "
                             f"not {isolation!r}")
        source = cls(opts["path"], storage, TopicFilter.parse(opts), isolation == "read_committed",
                   _boolean(opts, "includecontrol", "includeControl"),
                   _positive(opts, "maxbytespersplit", "maxBytesPerSplit", DEFAULT_SPLIT_BYTES),
                   OffsetRange.parse(opts), _boolean(opts, "includedeleted", "includeDeleted"),
                   _boolean(opts, "pushfilters", "pushFilters", default="true"))
        source.typing = _typing_options(opts)
        return source


def _typing_options(opts: dict):
    from kfmt.rows.typed import TypingOptions

    def formats(key):
        return [f.strip() for f in opts[key].split(",") if f.strip()] if key in opts else None

    def given(prefix):
        return {k[len(prefix):]: v for k, v in opts.items() if k.startswith(prefix)}
    on_error = opts.get("ondecodeerror", "skip")
    if on_error not in ("skip", "fail"):
        raise ValueError(f"{NAME}: onDecodeError must be skip or fail, not {on_error!r}")
    return TypingOptions.of(formats("keyformat"), formats("valueformat"),
                            key_options=given(FORMAT_OPTION_PREFIXES[0]),
                            value_options=given(FORMAT_OPTION_PREFIXES[1]), schemas=opts.get("schemas"),
                            on_decode_error=on_error, keep_raw=_boolean(opts, "keepraw", "keepRaw"))


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


def _boolean(opts: dict, key: str, name: str, default: str = "false") -> bool:
    value = str(opts.get(key, default)).strip().lower()
    if value not in ("true", "false"):
        raise ValueError(f"{NAME}: {name} must be true or false, not {opts[key]!r}")
    return value == "true"


def _positive(opts: dict, key: str, name: str, default: int) -> int:
    try:
        value = int(opts.get(key, default))
    except ValueError:
        value = 0
    if value <= 0:
        raise ValueError(f"{NAME}: {name} must be a positive number of bytes, not {opts[key]!r}")
    return value


class TopicFilter:
    """`subscribe`, `subscribePattern` or `assign`, as Spark's Kafka source takes them."""

    def __init__(self, topics: set | None = None, pattern: str | None = None, assigned: dict | None = None):
        self.topics, self.pattern, self.assigned = topics, pattern, assigned

    @classmethod
    def parse(cls, opts: dict) -> "TopicFilter":
        given = [k for k in ("subscribe", "subscribepattern", "assign") if k in opts]
        if len(given) > 1:
            raise ValueError(f"{NAME}: give at most one of subscribe, subscribePattern and assign")
        if "subscribe" in opts:
            topics = {t.strip() for t in opts["subscribe"].split(",") if t.strip()}
            if not topics:
                raise ValueError(f"{NAME}: subscribe names no topic")
            return cls(topics=topics)
        if "subscribepattern" in opts:
            try:
                re.compile(opts["subscribepattern"])
            except re.error as err:
                raise ValueError(f"{NAME}: subscribePattern is not a regular expression: {err}") from None
            return cls(pattern=opts["subscribepattern"])
        if "assign" in opts:
            return cls(assigned=_assignment(opts["assign"]))
        return cls()

    def __call__(self, topic: str | None, partition: int | None) -> bool:
        if self.topics is not None:
            return topic in self.topics
        if self.pattern is not None:
            return topic is not None and re.fullmatch(self.pattern, topic) is not None
        if self.assigned is not None:
            return partition in self.assigned.get(topic, ())
        return True


def _assignment(text: str) -> dict:
    """`{"topicA":[0,1],"topicB":[2]}` -> {topic: {partitions}}."""
    try:
        value = json.loads(text)
    except ValueError as err:
        raise ValueError(f"{NAME}: assign is not JSON: {err}") from None
    if not isinstance(value, dict) or not all(
            isinstance(ps, list) and all(isinstance(p, int) and not isinstance(p, bool) for p in ps)
            for ps in value.values()):
        raise ValueError(f'{NAME}: assign must be a JSON object of topics to partition lists, like '
                         f'{{"topicA":[0,1]}}')
    return {topic: set(ps) for topic, ps in value.items()}


class KafkaLogReader(DataSourceReader):
    typing: dict = {}  # topic -> kfmt.rows.typed.TopicTyping (keyFormat, valueFormat)

    def __init__(self, options: SourceOptions, parallelism: int | None = None):
        self.options = options
        self.pushed = None  # kfmt.pipelines.pushdown.Pushed, when Spark pushed filters
        self.parallelism = parallelism  # the session's default parallelism, where register() knew it

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
        """What the pushed filters want of a partition whose range options gave `bounds`."""
        from kfmt.partition.windows import Wanted

        if self.pushed is None:
            return None
        return Wanted(self.pushed.offset_intervals(*bounds), self.pushed.min_ms)

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
                    yield typing.apply(batch)[0] if typing is not None else batch


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
