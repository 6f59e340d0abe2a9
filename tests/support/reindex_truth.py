"""The companion files of a corpus partition and the settings that reproduce the broker's rebuild of
them (index interval, rebuild time), for comparing kfmt's index rebuilds with the broker's."""
from __future__ import annotations

import base64
import datetime
import gzip
import json
import re
from pathlib import Path

from support.corpus import REALKAFKA

from kfmt.format.digest import ContentDigest
from kfmt.format.model import make_records

COMPANION = re.compile(r"\.(index|timeindex|txnindex|snapshot)$|^leader-epoch-checkpoint$")


def rebuild_now_ms(name: str) -> int:
    """The wall clock of the broker's rebuild, from the header of rebuilt-report.txt ("... reloaded
    by Kafka 3.6.0 ... (2026-11-22T07:57:58Z)"). The broker read its clock at each snapshot load in
    the seconds after; only producers whose last timestamp lies a day before that, to the second,
    would tell the difference, and the corpus has none (data from 2023, markers minutes old)."""
    header = (REALKAFKA / f"{name}.truth" / "rebuilt-report.txt").read_text().splitlines()[0]
    stamp = re.search(r"\((\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)\)", header)[1]
    return int(datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1000)


def index_interval(name: str) -> int:
    """The topic's index.interval.bytes (topic-configs.txt), else Kafka's default."""
    configs = (REALKAFKA / f"{name}.truth" / "topic-configs.txt").read_text()
    m = re.search(r"index\.interval\.bytes=(\d+)", configs)
    return int(m[1]) if m else 4096


def companions(directory: Path) -> dict[str, bytes]:
    return {f.name: f.read_bytes() for f in directory.iterdir() if COMPANION.search(f.name)}


def truth_digest(name: str) -> tuple[int, str]:
    """(records, content digest) of what the Java consumer read (records.jsonl.gz)."""
    digest = ContentDigest()
    with gzip.open(REALKAFKA / f"{name}.truth" / "records.jsonl.gz", "rt") as f:
        rows = [json.loads(line) for line in f]
    b64 = lambda v: None if v is None else base64.b64decode(v)  # noqa: E731
    digest.update(make_records([r["offset"] for r in rows], [r["timestamp"] for r in rows],
                               [b64(r["key"]) for r in rows], [b64(r["value"]) for r in rows],
                               [[(h["key"].encode(), b64(h["value"])) for h in r["headers"]] for r in rows]))
    return len(rows), digest.hexdigest()


def entries_truth(name: str) -> tuple[int, int, str]:
    """(records the headers count, compressed v0/v1 wrappers, entries digest) of a corpus partition as
    kafka-dump-log listed its entries (dump-log.batches.txt): the records of v2 data batches (their
    count) and of uncompressed v0/v1 messages (one each); the entries digest (kfmt.format.digest.
    EntriesDigest's definition) over each listed entry's bytes, hashed here with the xxhash package."""
    import xxhash
    from support.corpus_truth import kafka_listing

    records = wrappers = total = 0
    for e in kafka_listing(name):
        data = (REALKAFKA / name / Path(e.file).name).read_bytes()
        total += xxhash.xxh3_128_intdigest(data[e.position:e.position + e.size])
        if e.magic == 2:
            records += 0 if e.is_control else e.count
        elif e.codec == "none":
            records += 1
        else:
            wrappers += 1
    return records, wrappers, f"{len(kafka_listing(name))}:{total % (1 << 128):032x}"
