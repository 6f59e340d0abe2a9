"""The options of the `kafka-log` data source (pipelines/datasource.py lists them), parsed and checked
on the driver without Spark: a ValueError (or a UsageError from a value format) names the option at
fault, before anything is planned."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from kfmt.partition.transactions import ISOLATION_LEVELS
from kfmt.pipelines import kafka_options
from kfmt.pipelines.kafka_options import OffsetRange

NAME = "kafka-log"
STORAGE_PREFIX = "storage."
OPTIONS = ("path", "subscribe", "subscribepattern", "assign", "kafka.isolation.level",
           "includecontrol", "includedeleted", "maxbytespersplit", "pushfilters", *kafka_options.OPTIONS,
           "keyformat", "valueformat", "schemas", "ondecodeerror", "keepraw")
FORMAT_OPTION_PREFIXES = ("keyformatoption.", "valueformatoption.")
@dataclass
class SourceOptions:
    """The data source's options, checked (a ValueError names the option at fault)."""

    path: str
    storage: dict
    topics: "TopicFilter"
    read_committed: bool
    include_control: bool
    split_bytes: int
    offsets: OffsetRange = field(default_factory=lambda: OffsetRange.parse({}))
    include_deleted: bool = False
    push_filters: bool = True
    typing: object = None  # kfmt.rows.typed.TypingOptions (keyFormat, valueFormat...)

    @classmethod
    def parse(cls, options) -> "SourceOptions":
        from kfmt.defaults import DEFAULT_SPLIT_BYTES
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
        return cls(opts["path"], storage, TopicFilter.parse(opts), isolation == "read_committed",
                   _boolean(opts, "includecontrol", "includeControl"),
                   _positive(opts, "maxbytespersplit", "maxBytesPerSplit", DEFAULT_SPLIT_BYTES),
                   OffsetRange.parse(opts), _boolean(opts, "includedeleted", "includeDeleted"),
                   _boolean(opts, "pushfilters", "pushFilters", default="true"), _typing_options(opts))


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
