"""The Kafka 4.1 corpus (tests/data/realkafka4, see tests/data/README.md): a KRaft broker's log
directory with transactions under transaction version 2, and readers of its ground truth (what the
Java consumer read, the broker's own companion files, `kafka-topics --describe`). Tests compare kfmt
with these, never with kfmt's own output."""
from __future__ import annotations

import functools
import gzip
import json
import re
from pathlib import Path

from support.corpus import TESTS

REALKAFKA4 = TESTS / "data" / "realkafka4"

# The partitions whose producers wrote transactions (README: scenarios 2, 3 and 5); d4-zstd-0 is an
# idempotent producer's, __consumer_offsets-0 holds transactional offset commits.
TXN4 = ("d4-txa-0", "d4-txa-1", "d4-txb-0", "d4-txabort-0", "d4-txo-out-0", "d4-compact-0")
PARTITIONS4 = TXN4 + ("d4-zstd-0", "__consumer_offsets-0")
# The broker's clock at the end of the run: a minute after the last record the transaction coordinator
# wrote (__transaction_state-0's last batch, CreateTime 1795836547986, 2026-11-28). The producers'
# data carries CreateTime 2025-01-01 (README: scenario 1), so producer expiry differs for every clock
# between the two.
BROKER_CLOCK_MS = 1795836547986 + 60_000


def truth_dir(name: str) -> Path:
    return REALKAFKA4 / f"{name}.truth"


@functools.cache
def consumer_records4(name: str, committed: bool = False) -> tuple[dict, ...]:
    """What kafka-clients 4.1's consumer read, read_uncommitted or read_committed, in offset order."""
    kind = "records.read_committed" if committed else "records"
    with gzip.open(truth_dir(name) / f"{kind}.jsonl.gz", "rt") as f:
        return tuple(json.loads(line) for line in f)


def has_committed_truth(name: str) -> bool:
    return (truth_dir(name) / "records.read_committed.jsonl.gz").exists()


def topic_config(name: str, key: str, default: int) -> int:
    """A topic config the corpus set (topic-configs.txt, kafka-configs --describe; one topic's
    partitions other than 0 have none: d4-txa-1's are d4-txa-0's)."""
    configs = truth_dir(name.rsplit("-", 1)[0] + "-0") / "topic-configs.txt"
    m = re.search(rf"\b{re.escape(key)}=(\d+)", configs.read_text()) if configs.exists() else None
    return int(m[1]) if m else default


def described_topic_ids() -> dict[str, str]:
    """topic name -> topic id, as `kafka-topics --describe` printed them on the running broker."""
    text = (truth_dir("__cluster_metadata-0") / "topics.describe.txt").read_text()
    return dict(re.findall(r"^Topic: (\S+)\tTopicId: (\S+)", text, re.M))


def listing(name: str) -> dict[str, int]:
    """name -> size of every file of the partition directory as copied off the broker (files.txt)."""
    sizes = {}
    for line in (truth_dir(name) / "files.txt").read_text().splitlines():
        size, file = line.split(" ", 1)
        sizes[file] = int(size)
    return sizes
