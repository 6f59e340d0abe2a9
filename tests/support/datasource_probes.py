"""Small partitions with chosen timestamps for the data source's option and push-down tests, and a count of
the bytes its stores hand out."""
from __future__ import annotations

import json

from support.corpus_truth import consumer_records
from support.export_truth import TXN

from kfmt.storage.store import Storage

OUT_OF_ORDER = ["v2-none-0", "v1-gzip-0", "v2-zstd-0", TXN, "compact-v2-none-0"]


def topic(name: str) -> str:
    return name.rsplit("-", 1)[0]


def one_partition(name: str, value) -> str:
    return json.dumps({topic(name): {"0": value}})


def probe_timestamps(name: str) -> list[int]:
    """Timestamps worth asking about: before everything, after everything, and at and just past
    every record whose timestamp is below an earlier record's (out of order), and a spread of
    others."""
    stamps = [r["timestamp"] for r in consumer_records(name)]
    out = {min(stamps) - 1, max(stamps), max(stamps) + 1}
    highest = -1
    for ts in stamps:
        if ts < highest:
            out |= {ts, ts + 1}
        highest = max(highest, ts)
    out |= set(stamps[:: max(1, len(stamps) // 10)])
    return sorted(out)


class ByteCount:
    """Bytes every Storage hands out in this process (read and map), counted at the store."""

    def __init__(self, monkeypatch):
        self.total = 0
        for method in ("read", "map"):
            original = getattr(Storage, method)

            def counted(storage, *args, _original=original, **kwargs):
                data = _original(storage, *args, **kwargs)
                self.total += len(data)
                return data

            monkeypatch.setattr(Storage, method, counted)
