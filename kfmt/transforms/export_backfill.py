"""Backfill into an Iceberg table another system created (a broker's Iceberg topics, a connector):
`kfmt export --format iceberg --append` into a table with no kfmt commit (docs/typed-export.md,
"Backfilling a live table").

The live feed wrote each partition from some offset on; kfmt exports what lies below, exactly once:
* the bound of a partition is the least `offset` the table holds for its (`topic`, `partition`) (a
  partition the table does not hold yet is exported whole, as the feed has not started it);
* the rows are the export's, in the table's own schema and partition spec: columns matched by name
  (the Kafka metadata columns and the decoded `key`/`value`), a column kfmt has no value for left null,
  or refused in one line when the table requires it;
* the commit is one Iceberg commit that records the bounds with the high-water marks, so a second run
  finds nothing below them to add.
"""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc


BACKFILL_KEY = "backfill"  # in the commit's options: "topic.partition" -> the bound


class Backfill:
    """The bounds of a backfill ((topic, partition) -> the first offset the live feed holds) and the
    rows kept below them."""

    def __init__(self, bounds: dict):
        self.bounds = bounds
        self.kept = 0

    @classmethod
    def of(cls, sink, stored: dict | None) -> "Backfill | None":
        """For a table another system wrote (its offsets held), or one a backfill committed to (the
        bounds it recorded); None for any other table."""
        if stored is None:
            return None
        if stored.get("foreign"):
            return cls(sink.offsets_held())
        if BACKFILL_KEY in stored:
            return cls({(t, int(p)): n for tp, n in stored[BACKFILL_KEY].items()
                        for t, p in [tp.rsplit(".", 1)]})
        return None

    def rows(self, p, rows: pa.RecordBatch) -> pa.RecordBatch:
        """The rows of plan partition `p` to export: below its bound, and from where a later run
        resumed (a bound may fall inside a batch, which that run reads again from its start)."""
        bound = self.bounds.get((p.part.topic, p.part.partition))
        if bound is not None:
            rows = rows.filter(pc.less(rows.column("offset"), bound))
        if p.from_offset is not None and rows.num_rows:
            rows = rows.filter(pc.greater_equal(rows.column("offset"), p.from_offset))
        self.kept += rows.num_rows
        return rows

    def mark(self, part, mark: int | None) -> int | None:
        """A backfilled partition is done up to its bound (where the feed took over)."""
        return self.bounds.get((part.topic, part.partition), mark)

    def stored(self) -> dict:
        return {BACKFILL_KEY: {f"{t}.{p}": n for (t, p), n in sorted(self.bounds.items())}}
