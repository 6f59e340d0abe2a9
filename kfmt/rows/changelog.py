"""A changelog topic as the table it describes: one row per key, its last value; a tombstone (a null
value) removes the key (`kfmt export --mode upsert`; docs/typed-export.md, "Changelogs").

What a consumer that reads the whole topic concludes: within a partition the record with the highest
offset wins (Kafka orders records only within a partition; log compaction keeps exactly that one,
LogCleaner's OffsetMap). A key found in several partitions (a producer that changed its partitioner)
is decided by the later timestamp, then the higher partition number. Which records count at all is
the reader's selection (aborted transactions and control records never do; kfmt.rows.ranges).
Records without a key cannot be in a changelog (a compacted topic refuses them:
`LogValidator`'s "Compacted topic cannot accept message without key") and are counted, not kept.

`Latest` keeps the rows seen so far reduced to one per key and reduces again with each chunk, so memory
holds the live keys (per partition they are in) and one chunk, whatever the length of the history.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


class Latest:
    """The last row per key of export rows given chunk after chunk (stored key bytes in `key`)."""

    def __init__(self, schema: pa.Schema):
        self.schema = schema
        self.rows = schema.empty_table()
        self.keyless = 0

    def add(self, rows: pa.RecordBatch | pa.Table) -> None:
        keys = rows.column("key")
        if keys.null_count:
            self.keyless += keys.null_count
            rows = rows.filter(pc.is_valid(keys))
        if rows.num_rows:
            # per (key, partition) only: which partition's last record wins is decided at the end,
            # when every partition's last record of the key is known
            self.rows = latest_per_key(pa.concat_tables([self.rows, pa.Table.from_batches(
                [rows] if isinstance(rows, pa.RecordBatch) else rows.to_batches(), self.schema)]),
                across_partitions=False)

    def keys(self) -> pa.Array:
        """Every key of the rows given (stored bytes): live ones and those a tombstone removed."""
        return pc.unique(self.rows.column("key")) if self.rows.num_rows else pa.array([], pa.binary())

    def table(self) -> pa.Table:
        """The live rows: the last one per key, tombstones left out, in (partition, offset) order."""
        rows = latest_per_key(self.rows)
        live = rows.filter(pc.is_valid(rows.column("value")))
        return live.take(pc.sort_indices(live, [("partition", "ascending"), ("offset", "ascending")]))


def latest_per_key(rows: pa.Table, across_partitions: bool = True) -> pa.Table:
    """One row per key of `rows` (every key not null): the rule of the module's description (one per
    key and partition, if not `across_partitions`)."""
    if rows.num_rows <= 1:
        return rows
    rows = rows.combine_chunks()
    order = pc.sort_indices(rows, [("key", "ascending"), ("partition", "ascending"), ("offset", "ascending")])
    ordered = rows.take(order)
    keys = ordered.column("key").combine_chunks()
    partitions = ordered.column("partition").to_numpy()
    n = ordered.num_rows
    new_key = np.ones(n, dtype=bool)
    new_key[1:] = np.asarray(pc.not_equal(keys[1:], keys[:-1]).to_numpy(zero_copy_only=False), dtype=bool)
    new_partition = new_key.copy()
    new_partition[1:] |= partitions[1:] != partitions[:-1]
    last_in_partition = np.append(new_partition[1:], True)  # the highest offset of each (key, partition)
    candidates = np.flatnonzero(last_in_partition)
    if not across_partitions or len(candidates) == int(new_key.sum()):  # one partition per key: usual
        return ordered.take(pa.array(candidates))
    key_ids = np.cumsum(new_key)[candidates]
    stamps = ordered.column("timestamp_ms").to_numpy()[candidates]
    best = np.lexsort((partitions[candidates], stamps, key_ids))  # the later timestamp, then partition
    last = np.append(key_ids[best][1:] != key_ids[best][:-1], True)
    return ordered.take(pa.array(candidates[best][last]))
