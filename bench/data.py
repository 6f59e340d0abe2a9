"""The benchmark's input data, built with an independent library (kafka-python's record builders).

Records: 16-byte keys, JSON-like values of about 200 bytes, CreateTime timestamps, no headers; batches
of 500 records (a v0/v1 "batch" of uncompressed messages is 500 consecutive entries). Everything is
deterministic (fixed seeds), so runs on different machines measure the same bytes.

* `codec_inputs(fmt, records)`: one log (the entries back to back) per format, with the per-batch
  columns the encoders start from.
* `log_directory(path, ...)`: a Kafka log directory of about 500 MB (v2 and v1 topics), written once
  and reused (a stamp file records what was built).
"""
from __future__ import annotations

import json
import os
import random
import shutil
import struct
import subprocess
import sys
from dataclasses import dataclass, field

import kafka.codec
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder

BATCH_RECORDS = 500
KEY_BYTES = 16
VALUE_BYTES = 200  # on average; 180..220
BASE_TIMESTAMP = 1_700_000_000_000
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
# (magic, codec) of the codec benchmarks, as the issue lists them
FORMATS = [(2, "none"), (2, "lz4"), (2, "zstd"), (1, "none"), (1, "gzip")]
EVENTS = ["click", "view", "purchase", "signup", "logout", "search", "share"]
WORDS = ("lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut "
         "labore et dolore magna aliqua enim minim veniam quis nostrud exercitation ullamco").split()


def fmt_name(magic: int, codec: str) -> str:
    return f"v{magic} {codec}"


class RecordSource:
    """Deterministic records: key, value and timestamp of record i (values from a pool, so that
    building hundreds of MB stays quick; keys and timestamps are all distinct)."""

    def __init__(self, seed: int = 1, pool: int = 20_000):
        rng = random.Random(seed)
        self.values = [self._value(rng, i) for i in range(pool)]
        self.jitter = [rng.randrange(-50, 50) for _ in range(pool)]

    @staticmethod
    def _value(rng: random.Random, i: int) -> bytes:
        doc = {"id": i, "user": f"user-{rng.randrange(10**6):06d}", "event": rng.choice(EVENTS),
               "amount": round(rng.random() * 1000, 2), "country": rng.choice(["DE", "FR", "US", "JP"]),
               "note": ""}
        target = rng.randrange(VALUE_BYTES - 20, VALUE_BYTES + 21)
        text = json.dumps(doc, separators=(",", ":"))
        note = " ".join(rng.choice(WORDS) for _ in range(40))
        doc["note"] = note[:max(0, target - len(text))]
        return json.dumps(doc, separators=(",", ":")).encode()

    def key(self, i: int) -> bytes:
        return b"key-%012d" % i  # 16 bytes

    def value(self, i: int) -> bytes:
        return self.values[i % len(self.values)]

    def timestamp(self, i: int) -> int:
        return BASE_TIMESTAMP + i * 3 + self.jitter[i % len(self.jitter)]


def build_batch(magic: int, codec: str, src: RecordSource, first: int, n: int, offset: int) -> bytes:
    """Entries for records first..first+n-1 at offsets offset.., by kafka-python's builders, with
    the offsets a broker assigns (producers write relative ones): a v2 batch's base offset, a v1
    wrapper's offset (its last inner offset; inner offsets stay relative, docs/format.md §3.4)."""
    compressed = codec != "none"
    relative = magic == 2 or (magic == 1 and compressed)
    if magic == 2:
        builder = DefaultRecordBatchBuilder(2, CODEC_IDS[codec], 0, -1, -1, -1, 1 << 30)
    else:
        builder = LegacyRecordBatchBuilder(magic, CODEC_IDS[codec], 1 << 30)
    for j in range(n):
        i = first + j
        at = j if relative else offset + j
        if magic == 2:
            builder.append(at, src.timestamp(i), src.key(i), src.value(i), [])
        else:
            builder.append(at, src.timestamp(i) if magic else None, src.key(i), src.value(i))
    entry = bytes(builder.build())
    if magic == 2:  # baseOffset is not under the CRC (docs/format.md §4.1)
        return struct.pack(">q", offset) + entry[8:]
    if compressed:  # nor is a wrapper's offset (it precedes the CRC, §3.1)
        return struct.pack(">q", offset + n - 1) + entry[8:]
    return entry


@dataclass
class CodecInput:
    magic: int
    codec: str
    log: bytes  # all entries back to back
    batches: list[bytes]  # per batch of records (for v0/v1 uncompressed: its 500 entries)
    columns: list[tuple[list, list, list, list]] = field(default_factory=list)  # offsets, ts, keys, values

    @property
    def name(self) -> str:
        return fmt_name(self.magic, self.codec)

    @property
    def records(self) -> int:
        return sum(len(c[0]) for c in self.columns)


def codec_inputs(magic: int, codec: str, records: int, src: RecordSource) -> CodecInput:
    batches, columns = [], []
    for first in range(0, records, BATCH_RECORDS):
        n = min(BATCH_RECORDS, records - first)
        batches.append(build_batch(magic, codec, src, first, n, first))
        columns.append(([first + j for j in range(n)],
                        [src.timestamp(first + j) for j in range(n)],
                        [src.key(first + j) for j in range(n)],
                        [src.value(first + j) for j in range(n)]))
    return CodecInput(magic, codec, b"".join(batches), batches, columns)


# --- the log directory ---

DIR_TOPICS = [("events-v2", 2, "none"), ("events-v1", 1, "none")]
DIR_PARTITIONS = 2
STAMP = ".kfmt-bench-stamp"


def log_directory(root: str, total_bytes: int, segment_bytes: int) -> str:
    """A broker-like log directory of about `total_bytes` under `root` (built once, then reused):
    its topics (DIR_TOPICS) have DIR_PARTITIONS partitions each, segments rolled at about
    `segment_bytes`, companion files made by `kfmt reindex` (so they are what Kafka's recovery
    would write)."""
    logdir = os.path.join(root, "logdir")
    want = json.dumps({"topics": DIR_TOPICS, "partitions": DIR_PARTITIONS, "bytes": total_bytes,
                       "segment_bytes": segment_bytes, "batch": BATCH_RECORDS, "version": 2})
    stamp = os.path.join(logdir, STAMP)
    if os.path.exists(stamp) and open(stamp).read() == want:
        return logdir
    raw = os.path.join(root, "raw")
    shutil.rmtree(raw, ignore_errors=True)
    shutil.rmtree(logdir, ignore_errors=True)
    per_partition = total_bytes // (len(DIR_TOPICS) * DIR_PARTITIONS)
    src = RecordSource(seed=2)
    for topic, magic, codec in DIR_TOPICS:
        for partition in range(DIR_PARTITIONS):
            print(f"bench: writing {topic}-{partition} ({per_partition >> 20} MB) with kafka-python",
                  file=sys.stderr)
            _write_partition(os.path.join(raw, f"{topic}-{partition}"), magic, codec, src,
                             per_partition, segment_bytes)
    # kfmt reindex writes the companion files; the stamp goes in last (a half-built dir is redone)
    subprocess.run([sys.executable, "-m", "kfmt", "reindex", raw, logdir, "--no-progress"], check=True,
                   stdout=subprocess.DEVNULL)
    shutil.rmtree(raw)
    with open(stamp, "w") as f:
        f.write(want)
    return logdir


def _write_partition(path: str, magic: int, codec: str, src: RecordSource, size: int,
                     segment_bytes: int) -> None:
    os.makedirs(path)
    offset, written, out, segment_size = 0, 0, None, 0
    while written < size:
        if out is None or segment_size >= segment_bytes:
            if out is not None:
                out.close()
            out = open(os.path.join(path, f"{offset:020d}.log"), "wb")
            segment_size = 0
        entry = build_batch(magic, codec, src, offset, BATCH_RECORDS, offset)
        out.write(entry)
        offset += BATCH_RECORDS
        written += len(entry)
        segment_size += len(entry)
    out.close()


COMPACT_TOPIC = "events-compact"
COMPACT_KEYS = 200_000  # distinct keys among the records: most records are superseded


def compact_directory(root: str, records: int = 1_000_000, segment_bytes: int = 32 << 20) -> str:
    """A log directory with one v2 partition of `records` records whose keys repeat (record i has
    key i * 7919 mod COMPACT_KEYS, about 1 in 20 a tombstone), in segments of about `segment_bytes`:
    the input of `kfmt compact` (built once, then reused)."""
    logdir = os.path.join(root, "compactdir")
    want = json.dumps({"records": records, "keys": COMPACT_KEYS, "segment_bytes": segment_bytes,
                       "batch": BATCH_RECORDS, "version": 1})
    stamp = os.path.join(logdir, STAMP)
    if os.path.exists(stamp) and open(stamp).read() == want:
        return logdir
    raw = os.path.join(root, "compactraw")
    shutil.rmtree(raw, ignore_errors=True)
    shutil.rmtree(logdir, ignore_errors=True)
    path = os.path.join(raw, f"{COMPACT_TOPIC}-0")
    os.makedirs(path)
    print(f"bench: writing {COMPACT_TOPIC}-0 ({records} records) with kafka-python", file=sys.stderr)
    src = RecordSource(seed=3)
    out, segment_size = None, 0
    for first in range(0, records, BATCH_RECORDS):
        if out is None or segment_size >= segment_bytes:
            if out is not None:
                out.close()
            out = open(os.path.join(path, f"{first:020d}.log"), "wb")
            segment_size = 0
        builder = DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, 1 << 30)
        for j in range(min(BATCH_RECORDS, records - first)):
            i = first + j
            value = None if i % 20 == 19 else src.value(i)
            builder.append(j, src.timestamp(i), src.key(i * 7919 % COMPACT_KEYS), value, [])
        entry = struct.pack(">q", first) + bytes(builder.build())[8:]
        out.write(entry)
        segment_size += len(entry)
    out.close()
    subprocess.run([sys.executable, "-m", "kfmt", "reindex", raw, logdir, "--no-progress"], check=True,
                   stdout=subprocess.DEVNULL)
    shutil.rmtree(raw)
    with open(stamp, "w") as f:
        f.write(want)
    return logdir


def codec_available(codec: str) -> bool:
    return {"none": True, "gzip": True, "lz4": kafka.codec.has_lz4(), "zstd": kafka.codec.has_zstd(),
            "snappy": kafka.codec.has_snappy()}[codec]
