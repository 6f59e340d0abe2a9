"""The iteration order of Scala 2.13's `mutable.HashMap[String, _]`, reproduced.

kafka-dump-log (Kafka 3.6, Scala 2.13) collects its stderr summaries (index mismatches, time-index
problems, non-consecutive offsets) in `mutable.Map`s keyed by absolute file path and prints them by
iterating those maps, so the order of the blocks on stderr is the map's bucket order: the improved
hash `h ^ (h >>> 16)` of `String.hashCode` masked by the table size, nodes in a bucket sorted by that
hash. The table starts at 16 slots and doubles *before* any `put` (even one that replaces a value)
once `size + 1 >= 0.75 * slots`, so the order depends on the sequence of puts, which this class
replays one by one.
"""
from __future__ import annotations

from kfmt.inspect.dump.java_output import java_string_hash

_INITIAL_SLOTS = 16
_LOAD_FACTOR = 0.75


def _improved_hash(key: str) -> int:
    h = java_string_hash(key) & 0xFFFFFFFF
    h ^= h >> 16
    return h - (1 << 32) if h >= 1 << 31 else h  # compared as a signed Int


class ScalaHashMap:
    """A str-keyed map whose `items()` come out in Scala 2.13 mutable.HashMap order."""

    def __init__(self):
        self._table: list[list[list]] = [[] for _ in range(_INITIAL_SLOTS)]  # buckets of [hash, key, value]
        self._threshold = int(_INITIAL_SLOTS * _LOAD_FACTOR)
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def get(self, key: str, default=None):
        h = _improved_hash(key)
        for node in self._table[h & (len(self._table) - 1)]:
            if node[0] == h and node[1] == key:
                return node[2]
        return default

    def put(self, key: str, value) -> None:
        if self._size + 1 >= self._threshold:
            self._grow()
        h = _improved_hash(key)
        bucket = self._table[h & (len(self._table) - 1)]
        i = 0
        while i < len(bucket) and bucket[i][0] <= h:
            if bucket[i][0] == h and bucket[i][1] == key:
                bucket[i][2] = value
                return
            i += 1
        bucket.insert(i, [h, key, value])
        self._size += 1

    def _grow(self) -> None:
        slots = len(self._table) * 2
        self._threshold = int(slots * _LOAD_FACTOR)
        table: list[list[list]] = [[] for _ in range(slots)]
        for bucket in self._table:  # splitting a bucket keeps the order of its nodes
            for node in bucket:
                table[node[0] & (slots - 1)].append(node)
        self._table = table

    def items(self):
        for bucket in self._table:
            for _h, key, value in bucket:
                yield key, value

    def values(self):
        for _key, value in self.items():
            yield value
