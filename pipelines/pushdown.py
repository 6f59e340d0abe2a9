"""Filters Spark pushes into the `kafka-log` data source (DataSourceReader.pushFilters, Spark 4.1+),
turned into what to read: which partitions, which offsets, from which timestamp on.

Handled (all on columns that are never null):
* `topic`: =, <=> and IN; `partition` and `offset`: =, <=>, <, <=, >, >=, IN; IS NOT NULL on any of
  them. These are exact: partitions are pruned and rows are filtered on their integer values here,
  so Spark does not check them again.
* `timestamp` (and `timestamp_ms`, its stored milliseconds): =, <, <=, >, >=, IN. These prune (a
  lower bound seeks through the `.timeindex`, kfmt.partition.windows) and filter rows, but are
  also returned to Spark, which checks them again: a literal's time zone and microseconds are
  Spark's to interpret, and a second check costs little.
Anything else (NOT, string patterns, other columns) is returned untouched for Spark to apply.
"""
from __future__ import annotations

import datetime

import numpy as np
import pyarrow as pa

EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
EXACT_COLUMNS = ("topic", "partition", "offset")
TIME_COLUMNS = ("timestamp", "timestamp_ms")
# an interval is (lo, hi): integers lo <= x < hi, None for an open side
EVERYTHING = ((None, None),)


class Pushed:
    """The conjunction of the pushed filters this reader handles."""

    def __init__(self):
        self.topics: set | None = None  # None: any topic
        self.partitions = EVERYTHING
        self.offsets = EVERYTHING
        self.min_ms: int | None = None  # timestamps in [min_ms, max_ms] (stored milliseconds)
        self.max_ms: int | None = None

    def take(self, spark_filter) -> bool:
        """Record a filter; whether it is handled exactly (else Spark must apply it too)."""
        from pyspark.sql import datasource as ds

        column = spark_filter.attribute if hasattr(spark_filter, "attribute") else None
        if column is None or len(column) != 1:
            return False
        name = column[0]
        if isinstance(spark_filter, ds.IsNotNull):
            return name in EXACT_COLUMNS or name in TIME_COLUMNS
        if name == "topic":
            values = _values(spark_filter, ds, str)
            if values is None:
                return False
            self.topics = set(values) if self.topics is None else self.topics & set(values)
            return True
        if name in ("partition", "offset"):
            intervals = _intervals(spark_filter, ds, lambda v: v if _is_int(v) else None)
            if intervals is None:
                return False
            setattr(self, name + "s", _intersect(getattr(self, name + "s"), intervals))
            return True
        if name in TIME_COLUMNS:
            to_ms = _micros_as_ms if name == "timestamp" else (lambda v: (v, v) if _is_int(v) else None)
            self._take_time(spark_filter, ds, to_ms)
        return False

    def _take_time(self, spark_filter, ds, to_ms) -> None:
        """Narrow [min_ms, max_ms]; a value it cannot read narrows nothing (Spark still checks)."""
        if isinstance(spark_filter, ds.In):
            bounds = [to_ms(v) for v in spark_filter.value]
            if not bounds or any(b is None for b in bounds):
                return
            self._narrow(min(b[0] for b in bounds), max(b[1] for b in bounds))
            return
        bound = to_ms(getattr(spark_filter, "value", None))
        if bound is None:
            return
        ceil_ms, floor_ms = bound  # the value, rounded up and down to whole milliseconds
        if isinstance(spark_filter, (ds.EqualTo, ds.EqualNullSafe)):
            self._narrow(ceil_ms, floor_ms)
        elif isinstance(spark_filter, ds.GreaterThan):
            self._narrow(floor_ms + 1, None)
        elif isinstance(spark_filter, ds.GreaterThanOrEqual):
            self._narrow(ceil_ms, None)
        elif isinstance(spark_filter, ds.LessThan):
            self._narrow(None, ceil_ms - 1)
        elif isinstance(spark_filter, ds.LessThanOrEqual):
            self._narrow(None, floor_ms)

    def _narrow(self, lo: int | None, hi: int | None) -> None:
        if lo is not None:
            self.min_ms = lo if self.min_ms is None else max(self.min_ms, lo)
        if hi is not None:
            self.max_ms = hi if self.max_ms is None else min(self.max_ms, hi)

    # --- using it ---
    def wants_partition(self, topic: str | None, partition: int | None) -> bool:
        if self.topics is not None and topic not in self.topics:
            return False
        return self.partitions == EVERYTHING or (partition is not None
                                                 and _contains(self.partitions, partition))

    def offset_intervals(self, start: int | None, end: int | None) -> tuple:
        """The pushed offset intervals within [start, end) (the range options' bounds)."""
        return _intersect(self.offsets, ((start, end),))

    def filter_rows(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """The rows of an export RecordBatch that pass the offset and timestamp filters."""
        keep = None
        if self.offsets != EVERYTHING:
            from kfmt.partition.windows import overlaps

            offsets = batch.column("offset").to_numpy()
            keep = overlaps(self.offsets, offsets, offsets)
        if self.min_ms is not None or self.max_ms is not None:
            ms = batch.column("timestamp_ms").to_numpy()
            in_time = np.ones(len(ms), dtype=bool)
            if self.min_ms is not None:
                in_time &= ms >= self.min_ms
            if self.max_ms is not None:
                in_time &= ms <= self.max_ms
            keep = in_time if keep is None else keep & in_time
        if keep is None or keep.all():
            return batch
        return batch.filter(pa.array(keep))

    @property
    def empty(self) -> bool:
        return (self.topics is not None and not self.topics) or not self.partitions or not self.offsets \
            or (self.min_ms is not None and self.max_ms is not None and self.min_ms > self.max_ms)


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _values(spark_filter, ds, kind) -> list | None:
    if isinstance(spark_filter, (ds.EqualTo, ds.EqualNullSafe)):
        values = [spark_filter.value]
    elif isinstance(spark_filter, ds.In):
        values = list(spark_filter.value)
    else:
        return None
    return values if all(isinstance(v, kind) for v in values) else None


def _intervals(spark_filter, ds, as_int) -> tuple | None:
    """The integer intervals a comparison or IN on an integer column keeps; None if not handled."""
    if isinstance(spark_filter, ds.In):
        points = [as_int(v) for v in spark_filter.value]
        if any(p is None for p in points):
            return None
        return _union([(p, p + 1) for p in points])
    v = as_int(getattr(spark_filter, "value", None))
    if v is None:
        return None
    if isinstance(spark_filter, (ds.EqualTo, ds.EqualNullSafe)):
        return ((v, v + 1),)
    if isinstance(spark_filter, ds.GreaterThan):
        return ((v + 1, None),)
    if isinstance(spark_filter, ds.GreaterThanOrEqual):
        return ((v, None),)
    if isinstance(spark_filter, ds.LessThan):
        return ((None, v),)
    if isinstance(spark_filter, ds.LessThanOrEqual):
        return ((None, v + 1),)
    return None


def _micros_as_ms(value) -> tuple[int, int] | None:
    """A timestamp literal (a time-zone-aware datetime) as (ms rounded up, ms rounded down)."""
    if not isinstance(value, datetime.datetime) or value.tzinfo is None:
        return None
    micros = (value - EPOCH) // datetime.timedelta(microseconds=1)
    return -(-micros // 1000), micros // 1000


def _union(intervals: list) -> tuple:
    out: list = []
    for lo, hi in sorted(intervals):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return tuple(out)


def _intersect(a: tuple, b: tuple) -> tuple:
    """Intersection of two sorted, disjoint interval tuples (None: open side)."""
    out = []
    for alo, ahi in a:
        for blo, bhi in b:
            lo = alo if blo is None else blo if alo is None else max(alo, blo)
            hi = ahi if bhi is None else bhi if ahi is None else min(ahi, bhi)
            if lo is None or hi is None or lo < hi:
                out.append((lo, hi))
    return tuple(sorted(out, key=lambda i: -2**63 if i[0] is None else i[0]))


def _contains(intervals: tuple, x: int) -> bool:
    return any((lo is None or x >= lo) and (hi is None or x < hi) for lo, hi in intervals)


def narrow_ranges(ranges: list, reader, wanted) -> list:
    """The planned ranges of one partition (kfmt.rows.ranges.SegmentRange, offset order) cut down to
    the bytes that can hold `wanted` records (kfmt.partition.windows.Wanted): segments whose offsets
    miss every wanted interval are dropped, the others are cut to their byte window."""
    from dataclasses import replace

    from kfmt.partition.windows import byte_window

    if wanted.nothing:
        return []
    if wanted.is_everything:
        return ranges
    segments = {seg.base_offset: seg for seg in reader.part.segments}
    bases = sorted(segments)
    following = dict(zip(bases, bases[1:]))
    windows: dict = {}
    out = []
    for rng in ranges:
        base = rng.segment_base
        if base not in windows:
            span = ((base, following.get(base)),)
            hit = wanted.intervals is None or _intersect(wanted.intervals, span)
            windows[base] = byte_window(reader, segments[base], wanted) if hit else None
        window = windows[base]
        if window is None or rng.end <= window[0] or rng.start >= window[1]:
            continue
        start, end = max(rng.start, window[0]), min(rng.end, window[1])
        out.append(replace(rng, start=start, end=end, ends_log=rng.ends_log and end == rng.end))
    return out
