"""What the Java consumer read from a corpus partition, and kfmt's records in the same shape."""
from __future__ import annotations

import gzip
import json

from support.corpus import REALKAFKA

from kfmt.partition.reader import PartitionReader


def consumer_truth(name: str) -> list[tuple]:
    """(offset, timestamp, key, value, headers) of what the Java consumer read."""
    import base64

    def b(v):
        return None if v is None else base64.b64decode(v)

    with gzip.open(REALKAFKA / f"{name}.truth" / "records.jsonl.gz", "rt") as f:
        return [(r["offset"], r["timestamp"], b(r["key"]), b(r["value"]),
                 [(h["key"].encode(), b(h["value"])) for h in r["headers"]])
                for r in map(json.loads, f)]


def records_of(part) -> list[tuple]:
    out = []
    for _seg, batch, skip in PartitionReader(part).batches():
        if batch.header.is_control:
            continue
        cols = [batch.records.column(i).to_pylist() for i in range(5)]
        for offset, ts, key, value, headers in list(zip(*cols))[skip:]:
            out.append((offset, ts, key, value, [(h["key"], h["value"]) for h in headers]))
    return out
