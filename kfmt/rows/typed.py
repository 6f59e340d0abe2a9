"""Export rows with their keys and values decoded (`--key-format`, `--value-format`; docs/typed-export.md).

The rows are those of kfmt.rows.columns with `key` and `value` replaced by the columns a value
format decodes them into (kfmt.format.value_formats), every other column as it is; `keep_raw` adds the
stored bytes as `key_bytes` and `value_bytes`. Decoding never changes which records there are: a key
or value that does not decode is null in its row, and by `on_decode_error`:

* `dead-letter` (the default): the raw record and the reason also go to the dead-letter rows
  (DEAD_LETTER_SCHEMA: the export's `_errors/`);
* `skip`: only counted;
* `fail`: the run stops with one line naming the topic, partition, offset and reason (exit 65).

Formats are chosen per topic: `NAME` for every topic (but the internal ones whose names start with
`_`, `_schemas` and `__consumer_offsets` among them, which stay `raw` unless a pattern names them),
or `GLOB:NAME` for the topics the glob matches; the last choice that matches a topic wins.
"""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from kfmt.errors import DataError, UsageError
from kfmt.format.value_formats import Binding, bound_options, check_options, value_format

ON_DECODE_ERROR = ("dead-letter", "fail", "skip")
RAW = "raw"
DEAD_LETTER_SCHEMA = pa.schema([
    pa.field("topic", pa.string()), pa.field("partition", pa.int32()), pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.timestamp("us", tz="UTC")), pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("headers", pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))),
    pa.field("side", pa.string()),  # "key" or "value": which did not decode
    pa.field("format", pa.string()),
    pa.field("schema_id", pa.int32()),  # from the framing, where it has one
    pa.field("reason", pa.string()),
])


@dataclass(frozen=True)
class FormatChoice:
    pattern: str | None  # a topic glob, None for every (non-internal) topic
    name: str

    @classmethod
    def parse(cls, text: str) -> "FormatChoice":
        pattern, sep, name = text.rpartition(":")
        if not name:
            raise UsageError(f"{text!r}: give a value format as NAME or TOPIC_GLOB:NAME")
        return cls(pattern if sep else None, name)

    def matches(self, topic: str) -> bool:
        if self.pattern is None:
            return not topic.startswith("_")
        return fnmatch.fnmatchcase(topic, self.pattern)


def choose(choices: tuple, topic: str) -> str:
    name = RAW
    for choice in choices:
        if choice.matches(topic):
            name = choice.name
    return name


@dataclass(frozen=True)
class TypingOptions:
    """How keys and values are decoded: what `kfmt export`, `cat`, `kfmt.read` and the data source take."""

    key_formats: tuple = ()  # FormatChoice, ...
    value_formats: tuple = ()
    key_options: tuple = ()  # (name, value) pairs for the key format
    value_options: tuple = ()
    schemas: str | None = None  # the schema source (kfmt.rows.schemas.sources); None: beside the data
    registry_auth: object = None  # kfmt.rows.schemas.sources.RegistryAuth
    on_decode_error: str = "dead-letter"
    keep_raw: bool = False

    def __post_init__(self):
        if self.on_decode_error not in ON_DECODE_ERROR:
            raise UsageError(f"on_decode_error must be one of {', '.join(ON_DECODE_ERROR)}, not "
                             f"{self.on_decode_error!r}")
        for choice in self.key_formats + self.value_formats:
            value_format(choice.name)  # unknown names refused before any work
        for side, choices, given in (("key", self.key_formats, self.key_options),
                                     ("value", self.value_formats, self.value_options)):
            # the formats a topic can get: those chosen, and raw for a topic no choice matches
            check_options(side, [c.name for c in choices] or [RAW], dict(given))

    @classmethod
    def of(cls, key_format=None, value_format=None, **kwargs) -> "TypingOptions":
        """From plain arguments: a format name or a list of `[GLOB:]NAME`, options as dicts."""
        def choices(given):
            if given is None:
                return ()
            return tuple(FormatChoice.parse(g) for g in ([given] if isinstance(given, str) else given))
        for side in ("key_options", "value_options"):
            kwargs[side] = tuple(sorted((kwargs.get(side) or {}).items()))
        return cls(choices(key_format), choices(value_format), **kwargs)

    @property
    def active(self) -> bool:
        return any(c.name != RAW for c in self.key_formats + self.value_formats) or self.keep_raw

    def to_json(self) -> dict:
        def names(choices):
            return [c.name if c.pattern is None else f"{c.pattern}:{c.name}" for c in choices]
        return {"key_format": names(self.key_formats), "value_format": names(self.value_formats),
                "key_options": dict(self.key_options), "value_options": dict(self.value_options),
                "schemas": self.schemas, "on_decode_error": self.on_decode_error,
                "keep_raw": self.keep_raw}


@dataclass
class TopicTyping:
    """The decoders of one topic's keys and values (picklable: tasks get it)."""

    topic: str
    formats: dict  # side -> format name
    decoders: dict  # side -> Decoder
    on_decode_error: str
    keep_raw: bool

    def schema(self, base: pa.Schema) -> pa.Schema:
        fields = []
        for f in base:
            if f.name in self.decoders:
                fields.append(pa.field(f.name, self.decoders[f.name].arrow_type))
            else:
                fields.append(f)
            if f.name == "value" and self.keep_raw:
                fields += [pa.field("key_bytes", pa.binary()), pa.field("value_bytes", pa.binary())]
        return pa.schema(fields)

    def apply(self, rows: pa.RecordBatch, tally: "DecodeTally | None" = None
              ) -> tuple[pa.RecordBatch, pa.RecordBatch | None]:
        """(the rows decoded, the dead-letter rows of what did not decode or None)."""
        columns = {name: rows.column(name) for name in rows.schema.names}
        control = np.asarray(rows.column("is_control").to_numpy(zero_copy_only=False), dtype=bool)
        dead = []
        for side, decoder in self.decoders.items():
            decoded = decoder.decode(rows.column(side))
            columns[side] = decoded.column
            if control.any() and len(decoded.failed):  # a control record's key is Kafka's, not the topic's
                keep = ~control[decoded.failed]
                decoded.reasons = [r for r, k in zip(decoded.reasons, keep) if k]
                decoded.failed = decoded.failed[keep]
            if len(decoded.failed):
                if tally is not None:
                    tally.failed[side] = tally.failed.get(side, 0) + len(decoded.failed)
                if self.on_decode_error == "fail":
                    row = int(decoded.failed[0])
                    raise DataError(f"{self.topic}-{rows.column('partition')[row].as_py()}: the {side} "
                                    f"does not decode as {self.formats[side]}: {decoded.reasons[0]}",
                                    offset=rows.column("offset")[row].as_py())
                if self.on_decode_error == "dead-letter":
                    dead.append(_dead_letters(rows, side, self.formats[side], decoded))
        if self.keep_raw:
            columns["key_bytes"], columns["value_bytes"] = rows.column("key"), rows.column("value")
        schema = self.schema(rows.schema)
        typed = pa.RecordBatch.from_arrays([columns[f.name] for f in schema], schema=schema)
        return typed, (pa.concat_batches(dead) if len(dead) > 1 else dead[0]) if dead else None


@dataclass
class DecodeTally:
    failed: dict = field(default_factory=dict)  # side -> records that did not decode
    dead_letters: int = 0


def _dead_letters(rows: pa.RecordBatch, side: str, fmt: str, decoded) -> pa.RecordBatch:
    take = pa.array(decoded.failed)
    n = len(decoded.failed)
    ids = decoded.schema_ids
    schema_ids = (pa.array(np.where(ids[decoded.failed] >= 0, ids[decoded.failed], 0).astype(np.int32),
                           mask=ids[decoded.failed] < 0) if ids is not None else pa.nulls(n, pa.int32()))
    picked = {name: rows.column(name).take(take) for name in
              ("topic", "partition", "offset", "timestamp", "key", "value", "headers")}
    return pa.RecordBatch.from_arrays(
        [picked["topic"], picked["partition"], picked["offset"], picked["timestamp"], picked["key"],
         picked["value"], picked["headers"], pa.repeat(pa.scalar(side), n), pa.repeat(pa.scalar(fmt), n),
         schema_ids, pa.array(decoded.reasons, pa.string())], schema=DEAD_LETTER_SCHEMA)


SAMPLE_ROWS = 1000


def bind_typing(options: TypingOptions, parts, src: str | None = None,
                storage_options: dict | None = None) -> dict:
    """topic -> TopicTyping for the topics of `parts` (PartitionDirs) some format other than raw
    decodes (on the driver)."""
    if not options.active:
        return {}
    first = {}
    for part in parts:
        first.setdefault(part.topic, part)
    wanted = {t: {"key": choose(options.key_formats, t), "value": choose(options.value_formats, t)}
              for t in sorted(first)}
    schemas = None
    if any(name != RAW for sides in wanted.values() for name in sides.values()):
        from kfmt.rows.schemas.sources import open_schemas

        schemas = open_schemas(options.schemas, src, storage_options, options.registry_auth)
    out = {}
    for topic, sides in wanted.items():
        decoders, formats = {}, {}
        for side, name in sides.items():
            if name == RAW:
                continue
            fmt = value_format(name)
            given = dict(options.key_options if side == "key" else options.value_options)
            binding = Binding(topic, side, schemas, bound_options(fmt, side, given),
                              lambda part=first[topic], side=side: _sample(part, side))
            decoders[side], formats[side] = fmt.bind(binding), name
        if decoders or options.keep_raw:
            out[topic] = TopicTyping(topic, formats, decoders, options.on_decode_error, options.keep_raw)
    return out


def _sample(part, side: str) -> pa.Array:
    """The first SAMPLE_ROWS keys or values of a partition (from its log start offset)."""
    from kfmt.rows.ranges import Selection, plan_ranges, read_range

    pieces, n = [], 0
    for rng in plan_ranges(part):
        for rows in read_range(rng, Selection(), None, rows_per_chunk=SAMPLE_ROWS):
            pieces.append(rows.column(side))
            n += len(pieces[-1])
            if n >= SAMPLE_ROWS:
                return pa.concat_arrays(pieces).slice(0, SAMPLE_ROWS)
    return pa.concat_arrays(pieces) if pieces else pa.array([], pa.binary())


def plain_values(column: pa.Array) -> list:
    """A decoded column as JSON values, rendered as the registry's deserializers render them
    (docs/typed-export.md): decimals as strings with their scale, dates and times ISO-8601 (UTC
    timestamps with 6 fractional digits and Z), bytes base64, maps as objects."""
    return [_plain(v) for v in column.to_pylist(maps_as_pydicts="strict")]


def _plain(value):
    import base64
    import datetime
    import decimal

    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, datetime.datetime):
        if value.tzinfo is not None:
            return value.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        return value.isoformat()
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    return value
