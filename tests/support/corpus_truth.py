"""Readers for the realkafka corpus's ground truth (`TOPIC-0.truth/`, see its README): what the Java
consumer read, and what kafka-dump-log listed. Tests compare kfmt against these, never against
kfmt's own output."""
from __future__ import annotations

import functools
import gzip
import json
import re
from dataclasses import dataclass

from support.corpus import REALKAFKA


@functools.cache
def consumer_records(name: str, kind: str = "records") -> tuple[dict, ...]:
    """What a Java consumer read (`records` or `records.read_committed`), in offset order."""
    with gzip.open(REALKAFKA / f"{name}.truth" / f"{kind}.jsonl.gz", "rt") as f:
        return tuple(json.loads(line) for line in f)


@dataclass(frozen=True)
class ListedEntry:
    """One line of kafka-dump-log's batch listing (`dump-log.batches.txt`)."""

    file: str
    offset: int  # v2: baseOffset; legacy: the message's (a wrapper's: its last inner) offset
    last_offset: int
    count: int | None  # v2 only
    position: int
    size: int
    magic: int
    codec: str
    is_control: bool


@functools.cache
def kafka_listing(name: str) -> tuple[ListedEntry, ...]:
    entries, file = [], None
    for line in (REALKAFKA / f"{name}.truth" / "dump-log.batches.txt").read_text().splitlines():
        if line.startswith("Dumping "):
            file = line.split()[1]
            continue
        fields = dict(re.findall(r"(\w+): (\S+)", line))
        if "position" not in fields:
            continue
        first = int(fields.get("baseOffset", fields.get("offset")))
        last = int(fields.get("lastOffset", fields.get("offset")))
        count = int(fields["count"]) if "count" in fields else None
        entries.append(ListedEntry(file, first, last, count, int(fields["position"]), int(fields["size"]),
                                   int(fields["magic"]), fields["compresscodec"],
                                   fields.get("isControl") == "true"))
    return tuple(entries)


@functools.cache
def control_records(name: str) -> tuple[tuple[int, int], ...]:
    """(offset, timestamp) of the transaction markers kafka-dump-log's deep iteration listed;
    consumers never see them, but a timestamp lookup does (FileRecords.searchForTimestamp)."""
    out = []
    with gzip.open(REALKAFKA / f"{name}.truth" / "dump-log.deep.txt.gz", "rt", errors="replace") as f:
        for line in f:
            if line.startswith("| offset:") and "endTxnMarker:" in line:
                m = re.match(r"\| offset: (\d+) \w+: (-?\d+) ", line)
                out.append((int(m[1]), int(m[2])))
    return tuple(out)


def first_offset_at_or_after(name: str, timestamp: int) -> int | None:
    """Kafka's offset for a timestamp: the first record in offset order, control records included,
    whose timestamp is >= `timestamp`."""
    stamps = [(r["offset"], r["timestamp"]) for r in consumer_records(name)] + list(control_records(name))
    return min((o for o, t in stamps if t >= timestamp), default=None)
