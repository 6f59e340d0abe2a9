"""Read a generated log directory back with a second independent reader, kafka-python's
`kafka.record.MemoryRecords` (CRCs checked), and print what it holds per topic: records, entries,
records per entry (median, 90th percentile, largest), the share of null keys and of records with
headers, value lengths (median, 90th percentile), and how many records are stamped earlier than the
largest timestamp before them. A check that bench/producer_logs.py writes what its docstring says.

    python bench/producer_stats.py LOGDIR
"""
from __future__ import annotations

import os
import statistics
import sys
from collections import defaultdict

from kafka.record.memory_records import MemoryRecords

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "baselines"))
import logs  # noqa: E402


def describe(logdir: str) -> dict:
    topics = defaultdict(lambda: {"records": 0, "entries": 0, "per_entry": [], "null_keys": 0, "headers": 0,
                                  "values": [], "earlier": 0})
    for topic, _, path in logs.partitions(logdir):
        t = topics[topic]
        largest, expected = None, 0
        for segment in logs.segments(path):
            with open(segment, "rb") as f:
                records = MemoryRecords(f.read())
            while records.has_next():
                batch = records.next_batch()
                if not batch.validate_crc():
                    raise SystemExit(f"{segment}: CRC mismatch in the entry at offset {expected}")
                n = 0
                for r in batch:
                    if r.offset != expected:
                        raise SystemExit(f"{segment}: offset {r.offset} where {expected} was due")
                    expected += 1
                    n += 1
                    t["null_keys"] += r.key is None
                    t["headers"] += bool(r.headers)
                    t["values"].append(len(r.value))
                    if largest is not None and r.timestamp < largest:
                        t["earlier"] += 1
                    largest = r.timestamp if largest is None else max(largest, r.timestamp)
                t["entries"] += 1
                t["records"] += n
                t["per_entry"].append(n)
    return topics


def main(argv=None) -> int:
    (logdir,) = argv or sys.argv[1:]
    print("| topic | records | entries | records per entry (median, p90, max) | null keys | with headers "
          "| value bytes (median, p90) | stamped earlier |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for topic, t in sorted(describe(logdir).items()):
        per, values, n = t["per_entry"], t["values"], t["records"]
        q = lambda xs, p: sorted(xs)[int(p * (len(xs) - 1))]  # noqa: E731
        print(f"| {topic} | {n:,} | {t['entries']:,} | {statistics.median(per):g}, {q(per, 0.9)}, {max(per)} "
              f"| {t['null_keys'] / n:.1%} | {t['headers'] / n:.1%} | {statistics.median(values):g}, "
              f"{q(values, 0.9)} | {t['earlier'] / n:.2%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
