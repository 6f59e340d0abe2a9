"""The options of Spark's Kafka source that pick which offsets a batch query reads, with the meaning
they have there (Spark's KafkaSourceProvider and KafkaOffsetReader), resolved on a partition
directory instead of a broker.

* `startingOffsets`: `earliest` (default) or JSON `{"topicA":{"0":23,"1":-2}}`; `endingOffsets`:
  `latest` (default) or JSON, exclusive. In the JSON -2 means earliest and -1 latest. As in Spark's
  batch queries, a start cannot be latest and an end cannot be earliest, and JSON must name every
  partition the query reads (no more, no fewer).
* `startingTimestamp` / `endingTimestamp` (ms since the epoch, every partition), and
  `startingOffsetsByTimestamp` / `endingOffsetsByTimestamp` (JSON as above, with timestamps): the
  offset a broker's ListOffsets returns for the timestamp, i.e. the first offset (in offset order,
  control records included) whose timestamp is at or after it. With out-of-order timestamps that is
  not a filter on the timestamp: records after that offset are read whatever their timestamps.
  Precedence as in Spark: the single timestamp, then the JSON of timestamps, then the offsets.
* `startingOffsetsByTimestampStrategy`: what a starting timestamp no record reaches means: `error`
  (default; the query fails) or `latest` (the partition reads nothing). An ending timestamp no
  record reaches means latest, as in Spark.
* `minPartitions`: at least this many tasks where the segments' indexes allow the cuts.

"latest" is the log end offset (the offset after the partition's last batch); "earliest" is the
start of what the directory holds. Offsets outside the directory's range read what there is.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

EARLIEST, LATEST = -2, -1
NO_MATCH = object()
NAME = "kafka-log"

OPTIONS = ("startingoffsets", "endingoffsets", "startingtimestamp", "endingtimestamp",
           "startingoffsetsbytimestamp", "endingoffsetsbytimestamp",
           "startingoffsetsbytimestampstrategy", "minpartitions")
STRATEGIES = ("error", "latest")


@dataclass(frozen=True)
class Bound:
    """One side of the range: `offsets` (EARLIEST, LATEST, or {(topic, partition): offset}) or
    `timestamps` (one timestamp for all partitions, or {(topic, partition): timestamp})."""

    option: str  # the option it came from, for messages
    offsets: object = None
    timestamps: object = None

    def per_partition(self):
        return next((v for v in (self.offsets, self.timestamps) if isinstance(v, dict)), None)

    def value_for(self, topic: str, partition: int):
        table = self.per_partition()
        return table[(topic, partition)] if table is not None else \
            (self.offsets if self.timestamps is None else self.timestamps)


@dataclass(frozen=True)
class OffsetRange:
    """Which offsets of every partition a query reads, as the options gave them."""

    start: Bound
    end: Bound
    start_strategy: str = "error"
    min_partitions: int | None = None

    @classmethod
    def parse(cls, opts: dict) -> "OffsetRange":
        """From lower-cased options; a ValueError names the option at fault."""
        start = _bound(opts, "starting", default=EARLIEST, refused=LATEST)
        end = _bound(opts, "ending", default=LATEST, refused=EARLIEST)
        strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
        if strategy not in STRATEGIES:
            raise ValueError(f"{NAME}: startingOffsetsByTimestampStrategy must be error or latest, not "
                             f"{opts['startingoffsetsbytimestampstrategy']!r}")
        min_partitions = None
        if "minpartitions" in opts:
            min_partitions = _integer(opts["minpartitions"], "minPartitions")
            if min_partitions <= 0:
                raise ValueError(f"{NAME}: minPartitions must be a positive integer, not "
                                 f"{opts['minpartitions']!r}")
        return cls(start, end, strategy, min_partitions)

    @property
    def is_everything(self) -> bool:
        return self.start.offsets == EARLIEST and self.end.offsets == LATEST

    def check_partitions(self, partitions: list[tuple[str, int]]) -> None:
        """JSON of offsets or timestamps must name exactly the partitions read (Spark's rule: a
        partition left out would otherwise be read from an unstated position)."""
        for bound in (self.start, self.end):
            table = bound.per_partition()
            if table is not None and set(table) != set(partitions):
                raise ValueError(
                    f"{NAME}: {bound.option} must give every partition the query reads, and only those "
                    f"(use -2 for earliest, -1 for latest): it gives {_names(table)}, the query reads "
                    f"{_names(partitions)}")

    def resolve(self, reader, topic: str, partition: int) -> tuple[int | None, int | None]:
        """[first offset, end offset) of one partition (None: unbounded on that side), from its
        PartitionReader; a ValueError when the range cannot be resolved as Spark would fail."""
        end_of_log = _LogEnd(reader)
        start = self._offset(self.start, reader, topic, partition, end_of_log)
        if start is NO_MATCH:  # a starting timestamp no record reaches
            if self.start_strategy == "error":
                raise ValueError(
                    f"{NAME}: no record of {topic}-{partition} has a timestamp at or after "
                    f"{self.start.value_for(topic, partition)} ({self.start.option}); set "
                    f"startingOffsetsByTimestampStrategy=latest to read nothing from such partitions")
            start = end_of_log()
        end = self._offset(self.end, reader, topic, partition, end_of_log)
        if end is NO_MATCH:  # an ending timestamp no record reaches: latest, as in Spark
            end = None
        if end is not None and start is not None and start > end:
            raise ValueError(f"{NAME}: the starting offset {start} of {topic}-{partition} is after its "
                             f"ending offset {end} ({self.start.option}, {self.end.option})")
        return start, end

    def _offset(self, bound: Bound, reader, topic, partition, end_of_log):
        """The offset a bound gives a partition: None for no bound, NO_MATCH for a timestamp
        no record reaches."""
        value = bound.value_for(topic, partition)
        if value == EARLIEST:
            return None
        if value == LATEST:
            return end_of_log() if bound is self.start else None
        if bound.timestamps is None:
            return value
        # ListOffsets by timestamp (LogSegment.findOffsetByTimestamp): the first offset whose
        # timestamp is >= value, found through the .timeindex and a scan of one segment
        point = reader.start_point(from_timestamp=value)
        return NO_MATCH if point is None else point[2]


class _LogEnd:
    """The log end offset, found (by a frame scan of the last segment holding data) on first use."""

    def __init__(self, reader):
        self.reader, self.value = reader, None

    def __call__(self) -> int:
        if self.value is None:
            segments = self.reader.part.segments
            # an empty active segment's base offset is the log end offset
            end = segments[-1].base_offset if segments else 0
            for seg in reversed(segments):
                if seg.size:
                    last = None
                    for last in self.reader.frames(seg):
                        pass
                    if last is not None:
                        end = max(end, last.next_offset)
                        break
            self.value = end
        return self.value


def clip(batch, start: int | None, end: int | None):
    """The rows of an export RecordBatch whose offset is in [start, end)."""
    import pyarrow.compute as pc

    if start is None and end is None:
        return batch
    offsets = batch.column(batch.schema.get_field_index("offset"))
    keep = None
    if start is not None:
        keep = pc.greater_equal(offsets, start)
    if end is not None:
        below = pc.less(offsets, end)
        keep = below if keep is None else pc.and_(keep, below)
    return batch.filter(keep)


def _bound(opts: dict, side: str, default: int, refused: int) -> Bound:
    single, by_timestamp, offsets = f"{side}timestamp", f"{side}offsetsbytimestamp", f"{side}offsets"
    if single in opts:
        return Bound(f"{side}Timestamp", timestamps=_timestamp(opts[single], f"{side}Timestamp"))
    if by_timestamp in opts:
        name = f"{side}OffsetsByTimestamp"
        table = _partition_json(opts[by_timestamp], name)
        for tp, ts in table.items():
            if ts < EARLIEST:
                raise ValueError(f"{NAME}: {name} gives {tp[0]}-{tp[1]} the timestamp {ts}: a timestamp "
                                 f"is >= 0 (or -2 for earliest, -1 for latest)")
        return Bound(name, timestamps=table)
    name = f"{side}Offsets"
    text = opts.get(offsets, {EARLIEST: "earliest", LATEST: "latest"}[default]).strip()
    words = {"earliest": EARLIEST, "latest": LATEST}
    refused_word = {EARLIEST: "earliest", LATEST: "latest"}[refused]
    if text.lower() in words:
        if words[text.lower()] == refused:
            raise ValueError(f"{NAME}: {name} can't be {refused_word} for batch queries "
                             f"(as in Spark's Kafka source)")
        return Bound(name, offsets=words[text.lower()])
    if not text.startswith("{"):
        raise ValueError(f"{NAME}: {name} must be earliest, latest or JSON like "
                         f'{{"topicA":{{"0":23,"1":-2}}}}, not {text!r}')
    table = _partition_json(text, name)
    for tp, offset in table.items():
        if offset == refused:
            raise ValueError(f"{NAME}: {side} offset of {tp[0]}-{tp[1]} can't be {refused_word} "
                             f"for batch queries ({name})")
        if offset < EARLIEST:
            raise ValueError(f"{NAME}: {name} gives {tp[0]}-{tp[1]} the offset {offset}: an offset is "
                             f">= 0 (or -2 for earliest, -1 for latest)")
    return Bound(name, offsets=table)


def _partition_json(text: str, name: str) -> dict:
    """`{"topicA":{"0":23,"1":-2}}` -> {(topic, partition): value}."""
    try:
        value = json.loads(text)
    except ValueError as err:
        raise ValueError(f"{NAME}: {name} is not JSON: {err}") from None
    shape = f'{name} must be a JSON object of topics to {{"partition": number}} objects, like ' \
            f'{{"topicA":{{"0":23,"1":-2}}}}'
    if not isinstance(value, dict):
        raise ValueError(f"{NAME}: {shape}")
    out = {}
    for topic, partitions in value.items():
        if not isinstance(partitions, dict):
            raise ValueError(f"{NAME}: {shape}")
        for partition, number in partitions.items():
            if not partition.lstrip("-").isdigit() or not isinstance(number, int) or isinstance(number, bool):
                raise ValueError(f"{NAME}: {shape}")
            out[(topic, int(partition))] = number
    return out


def _timestamp(text: str, name: str) -> int:
    value = _integer(text, name)
    if value < 0:
        raise ValueError(f"{NAME}: {name} must be milliseconds since the epoch (>= 0), not {text!r}")
    return value


def _integer(text: str, name: str) -> int:
    try:
        return int(str(text).strip())
    except ValueError:
        raise ValueError(f"{NAME}: {name} must be an integer, not {text!r}") from None


def _names(partitions) -> str:
    return ", ".join(f"{t}-{p}" for t, p in sorted(partitions)) or "none"


def ranges_within(ranges: list, start: int | None, end: int | None, reader=None) -> list:
    """The planned ranges (kfmt.rows.ranges.SegmentRange, one partition, offset order) that can hold
    offsets in [start, end): a segment holds offsets from its base offset up to the next segment's,
    and (given the partition's PartitionReader) the ranges of the start's segment that end before
    the position its `.index` gives for the start hold only earlier offsets. The rows are clipped
    to [start, end) when read."""
    bases = sorted({r.segment_base for r in ranges})
    next_base = dict(zip(bases, bases[1:]))
    kept = [r for r in ranges
            if (end is None or r.segment_base < end)
            and (start is None or r.segment_base not in next_base or next_base[r.segment_base] > start)]
    if reader is None or start is None or not kept or not reader.part.segments:
        return kept
    # the offset seek of a consumer (docs/format.md §6.5): a checked index entry at or below start
    seg_index, position, _ = reader.start_point(from_offset=start)
    seg_base = reader.part.segments[seg_index].base_offset
    return [r for r in kept if r.segment_base != seg_base or r.end > position]
