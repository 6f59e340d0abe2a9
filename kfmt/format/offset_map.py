"""The key -> latest offset map of a cleaning (kfmt compact, kfmt.transforms.cleanup.compaction), in a
fixed amount of memory (docs/format.md §14). It lives in the format layer beside its compiled
kernels (key MD5s straight from a key column, the table probed record by record), which it chooses
itself: its callers never see which runs.

Kafka's cleaner (`SkimpyOffsetMap`) never holds keys: it keeps the MD5 of each key (16 bytes) and
the latest offset seen for it (8 bytes) in one preallocated buffer of `log.cleaner.dedupe.buffer.size`
bytes, an open-addressing table of `memory // 24` slots. It stops taking keys once the table holds
`slots * log.cleaner.io.buffer.load.factor` entries (0.9 by default): the map is then *full*, and the
cleaning covers only the offsets mapped so far (`latest_offset`). Two keys with the same MD5 are one
key to Kafka, and to this map.

This is the same table in numpy: one `(slots, 3)` uint64 array (hash high, hash low, offset + 1,
0 meaning an empty slot), probed linearly, filled and queried a batch of records at a time (by the
compiled kernels of kfmt/csrc/digest.c and md5.h where they are built, record by record, with the
same contents; the numpy code here is their reference). Memory is allocated once, zero-filled lazily by the OS,
and never grows: a partition with more distinct keys than the map admits is cleaned in prefixes,
never loaded whole.
"""
from __future__ import annotations

import hashlib

import numpy as np
import pyarrow as pa

from kfmt.defaults import DEFAULT_OFFSET_MAP_LOAD_FACTOR, DEFAULT_OFFSET_MAP_MEMORY
from kfmt.errors import UsageError
from kfmt.format.kernels import native

BYTES_PER_ENTRY = 24  # MD5 (16) + offset (8), as SkimpyOffsetMap
_NO_OFFSET = -1


def key_hashes(keys) -> np.ndarray:
    """The MD5 of each key (bytes) as an (n, 2) uint64 array (big-endian halves)."""
    md5 = hashlib.md5
    return _halves(b"".join(md5(k).digest() for k in keys))


def record_key_hashes(records: pa.RecordBatch, indices: np.ndarray) -> np.ndarray:
    """key_hashes of the keys of the records at `indices` (keys present), straight from the key
    column in one compiled call where kfmt.format.kernels has it (kfmt/csrc/md5.h)."""
    indices = np.ascontiguousarray(indices, dtype=np.int64)
    if native is not None and type(records) is pa.RecordBatch:
        raw = native.key_md5s(records, indices)
        if raw is not NotImplemented:
            return _halves(raw)
    return key_hashes(records.column(2).take(pa.array(indices)).to_pylist())


def _halves(digests: bytes) -> np.ndarray:
    return np.frombuffer(digests, dtype=">u8").astype(np.uint64).reshape(-1, 2)


class OffsetMap:
    """A fixed-size map of 128-bit key hashes to offsets (Kafka's SkimpyOffsetMap semantics)."""

    def __init__(self, memory: int = DEFAULT_OFFSET_MAP_MEMORY,
                 load_factor: float = DEFAULT_OFFSET_MAP_LOAD_FACTOR):
        slots = memory // BYTES_PER_ENTRY
        if not 0 < load_factor <= 1:
            raise UsageError(f"the offset map's load factor must lie in (0, 1], got {load_factor}")
        # Kafka's Cleaner requires room for more than one entry, or cleaning never progresses.
        if slots * load_factor <= 1:
            raise UsageError(f"an offset map of {memory} bytes holds {slots} entries of "
                             f"{BYTES_PER_ENTRY} bytes: too small to fit even one key "
                             f"(at load factor {load_factor})")
        self.memory = memory
        self.slots = slots
        self.load_factor = load_factor
        # Kafka leaves one slot free at most (maxDesiredMapSize < slots): linear probing then
        # always ends at an empty slot.
        self.max_entries = min(int(slots * load_factor), slots - 1)
        self._table = np.zeros((slots, 3), dtype=np.uint64)
        self.entries = 0
        self.latest_offset = _NO_OFFSET

    # --- what the cleaner asks ---
    @property
    def full(self) -> bool:
        return self.entries >= self.max_entries

    @property
    def utilization(self) -> float:
        return self.entries / self.slots

    def update_latest_offset(self, offset: int) -> None:
        self.latest_offset = offset

    def get(self, hashes: np.ndarray) -> np.ndarray:
        """The mapped offset of each hash, -1 where the key is not in the map."""
        n = len(hashes)
        result = np.full(n, _NO_OFFSET, dtype=np.int64)
        if not n or not self.entries:
            return result
        if native is not None:  # the same probing, record by record (kfmt/csrc/digest.c)
            return np.frombuffer(native.offset_map_get(self._table, _table_rows(hashes)), np.int64)
        pos = self._start(hashes)
        active = np.arange(n)
        while active.size:
            rows = self._table[pos[active]]
            empty = rows[:, 2] == 0
            match = ~empty & (rows[:, 0] == hashes[active, 0]) & (rows[:, 1] == hashes[active, 1])
            result[active[match]] = rows[match, 2].astype(np.int64) - 1
            active = active[~(empty | match)]
            pos[active] = (pos[active] + 1) % self.slots
        return result

    def put(self, hashes: np.ndarray, offsets: np.ndarray) -> int:
        """Map the keys of one batch, in record order, until the map is full (SkimpyOffsetMap.put
        behind Cleaner.buildOffsetMapForSegment's `map.size < maxDesiredMapSize` check). Returns how
        many of the records were taken: all of them unless the map filled up before one of them
        (that record and the rest were not mapped). `latest_offset` becomes the last offset taken."""
        n = len(hashes)
        if not n:
            return 0
        if self.full:
            return 0
        if native is not None:  # the same, record by record (kfmt/csrc/digest.c)
            taken, self.entries = native.offset_map_put(
                self._table, _table_rows(hashes), np.ascontiguousarray(offsets, dtype=np.int64),
                self.max_entries, self.entries)
            if taken:
                self.latest_offset = int(offsets[taken - 1])
            return taken
        known = self.get(hashes) >= 0
        # A record adds an entry when its key is neither mapped nor seen earlier in the batch.
        first_seen = np.zeros(n, dtype=bool)
        first_seen[_first_occurrences(hashes)] = True
        new = first_seen & ~known
        size_before = self.entries + np.cumsum(new) - new
        stops = np.flatnonzero(size_before >= self.max_entries)
        taken = int(stops[0]) if stops.size else n
        if taken:
            self._insert(hashes[:taken], offsets[:taken])
            self.latest_offset = int(offsets[taken - 1])
        return taken

    # --- the table ---
    def _start(self, hashes: np.ndarray) -> np.ndarray:
        return (hashes[:, 0] % np.uint64(self.slots)).astype(np.int64)

    def _insert(self, hashes: np.ndarray, offsets: np.ndarray) -> None:
        # The latest occurrence of each key wins (offsets increase within a batch).
        last = len(hashes) - 1 - _first_occurrences(hashes[::-1])
        hashes, values = hashes[last], offsets[last].astype(np.uint64) + np.uint64(1)
        pos = self._start(hashes)
        active = np.arange(len(hashes))
        while active.size:
            rows = self._table[pos[active]]
            empty = rows[:, 2] == 0
            match = ~empty & (rows[:, 0] == hashes[active, 0]) & (rows[:, 1] == hashes[active, 1])
            updated = active[match]
            self._table[pos[updated], 2] = values[updated]
            # Several new keys may probe the same empty slot in one round: the first takes it,
            # the others look at it again next round, find it taken and move on.
            candidates = active[empty]
            slots, first = np.unique(pos[candidates], return_index=True)
            winners = candidates[first]
            self._table[slots, 0] = hashes[winners, 0]
            self._table[slots, 1] = hashes[winners, 1]
            self._table[slots, 2] = values[winners]
            self.entries += len(winners)
            losers = np.setdiff1d(candidates, winners, assume_unique=True)
            moving = active[~empty & ~match]
            pos[moving] = (pos[moving] + 1) % self.slots
            active = np.concatenate([moving, losers])


def _table_rows(hashes: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(hashes, dtype=np.uint64)


def _first_occurrences(hashes: np.ndarray) -> np.ndarray:
    """Indices of the first occurrence of each distinct 128-bit hash, in index order."""
    pairs = np.ascontiguousarray(hashes).view([("hi", np.uint64), ("lo", np.uint64)]).ravel()
    _, first = np.unique(pairs, return_index=True)
    return np.sort(first)
