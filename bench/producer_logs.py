"""Producer-shaped Kafka log directories for the whole-command benchmarks (bench/commands.py), written
with an independent library: aiokafka's record builders (`aiokafka.record`), never kfmt's writer.

    python bench/producer_logs.py DST --size 2G [--mix project|opaque] [--seed 1] [--segment-bytes 64M]
                                  [--partitions 2] [--shapes v1-single,v1-gzip,...] [--reindex]
                                  [--span-ms 604800000]

One topic per shape, each with `--partitions` partitions, the bytes split between the shapes of a mix
(`--mix`, MIXES) by their shares:

| topic | what wrote it |
| --- | --- |
| v1-single | an old (0.10-era) producer, message format v1, no compression: every message its own entry |
| v1-gzip | the same with gzip: one wrapper message per producer batch of 1..100 messages |
| v1-gzip-opaque | the same, but 90 % of the values are random bytes (encrypted or already compressed payloads), which gzip cannot shrink |
| v2-lz4 | a current idempotent producer with lz4: batches of 1..400 records |
| v2-lz4-opaque | the same, 90 % of the values random bytes (about 500 bytes a record on disk) |
| v2-tiny | an idempotent producer with linger.ms=0 under light load: uncompressed batches of 1..5 records |
| v2-large | a bulk loader with a big batch.size: uncompressed batches of 500..2500 records (< 1 MB) |

| mix | shares of bytes |
| --- | --- |
| project | v1-single 25 %, v1-gzip 15 %, v2-lz4 25 %, v2-tiny 10 %, v2-large 25 % (the project's benchmark input) |
| opaque | v1-single 40 %, v1-gzip-opaque 10 %, v2-lz4-opaque 50 % (issue 25's input: 1 GB of old-producer data, 1 GB of v2 lz4 with headers per 2 GB) |

Records look like a producer's: values are JSON-ish text of log-normal length (median 300 bytes), keys
are user ids drawn with a skew (so compaction has superseded records to drop), about 10 % of keys are
null, most v2 records carry one or two headers. Batch sizes are skewed to small. Timestamps (CreateTime)
run over SPAN_MS (`--span-ms`) of record time per partition, with about 1 % of records and 0.5 % of batches stamped
earlier than their predecessors, as producers with skewed clocks do.

What a broker changes on append is applied as the broker does it: absolute offsets (a v2 batch's base
offset, a v1 wrapper's offset = its last inner offset, LogValidator's in-place assignment), a v1
wrapper's timestamp = the largest inner timestamp (the CRC recomputed, as LogValidator does), the
partition leader epoch (one leader change half way through). Segments roll as the broker's do: before an
append that would take the segment past `--segment-bytes`, named by the first offset of that append.
No index files; `--reindex` adds them with `bin/kfmt reindex` (as Kafka's log recovery would write them).

Deterministic: the bytes depend only on the arguments (each partition seeds its own generator from the
seed, topic and partition). Partitions are written in parallel, one process per core.
"""
from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import random
import re
import resource
import shutil
import struct
import subprocess
import sys
import time
import zlib
from dataclasses import dataclass

BASE_TIMESTAMP = 1_700_000_000_000  # 2023-11-14T22:13:20Z
SPAN_MS = 7 * 86_400_000  # each partition's records span a week of record time
KEY_SPACE = 200_000  # distinct user ids
NULL_KEY_SHARE = 0.10
VALUE_MEDIAN = 300
VALUE_SIGMA = 0.6  # of the log-normal value length
CORPUS_BYTES = 4 << 20
MAX_BATCH_BYTES = 1 << 30  # the builders' own limit; the shapes keep batches under Kafka's 1 MB
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


@dataclass(frozen=True)
class Shape:
    magic: int
    codec: str
    smallest: int  # records per producer batch
    largest: int
    skew: float  # batch size = smallest + (largest - smallest) * random() ** skew (1: uniform)
    headers: bool = False
    idempotent: bool = False
    opaque: float = 0.0  # the share of values that are random bytes (incompressible)


SHAPES = {
    "v1-single": Shape(1, "none", 1, 400, 3.0),
    "v1-gzip": Shape(1, "gzip", 1, 100, 2.0),
    "v1-gzip-opaque": Shape(1, "gzip", 1, 100, 2.0, opaque=0.9),
    "v2-lz4": Shape(2, "lz4", 1, 400, 3.0, headers=True, idempotent=True),
    "v2-lz4-opaque": Shape(2, "lz4", 1, 400, 3.0, headers=True, idempotent=True, opaque=0.9),
    "v2-tiny": Shape(2, "none", 1, 5, 1.0, headers=True, idempotent=True),
    "v2-large": Shape(2, "none", 500, 2500, 1.0, headers=True),
}
# the shapes of each mix and their shares of the directory's bytes
MIXES = {
    "project": {"v1-single": 0.25, "v1-gzip": 0.15, "v2-lz4": 0.25, "v2-tiny": 0.10, "v2-large": 0.25},
    "opaque": {"v1-single": 0.40, "v1-gzip-opaque": 0.10, "v2-lz4-opaque": 0.50},
}

EVENTS = ["page_view", "click", "add_to_cart", "purchase", "search", "login", "logout", "share"]
PATHS = ["/", "/search", "/cart", "/checkout", "/product/{}", "/category/{}", "/account", "/help"]
AGENTS = ["Mozilla/5.0 (X11; Linux x86_64)", "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_1)",
          "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X)", "okhttp/4.12.0", "curl/8.4.0"]


def parse_size(text: str) -> int:
    """'200M', '2G', '64MiB', '10MB', '1500000' -> bytes (K, M, G, T are binary multiples)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b)?\s*", text, re.IGNORECASE)
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (try 200M, 2G, 64MiB)")
    return int(float(m.group(1)) * 1024 ** " kmgt".index((m.group(2) or " ").lower()))


def size_name(size: int) -> str:
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale}{unit}"
    return str(size)


class Producer:
    """The records of one partition, drawn from a seeded generator."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        docs, starts, length = [], [], 0
        while length < CORPUS_BYTES:
            starts.append(length)
            doc = self._document(rng).encode()
            docs.append(doc)
            length += len(doc)
        self.corpus = b"".join(docs)
        self.starts = starts
        self.keys = [b"user-%07d" % i for i in range(KEY_SPACE)]
        self.header_sets = [self._headers(rng, i) for i in range(256)]

    @staticmethod
    def _document(rng: random.Random) -> str:
        path = rng.choice(PATHS).format(rng.randrange(100_000))
        doc = {"event": rng.choice(EVENTS), "user": f"user-{rng.randrange(KEY_SPACE):07d}",
               "session": f"{rng.getrandbits(64):016x}", "path": path, "agent": rng.choice(AGENTS),
               "amount": round(rng.lognormvariate(3, 1), 2), "items": rng.randrange(12),
               "ok": rng.random() < 0.97, "tags": rng.sample(EVENTS, rng.randrange(4))}
        return json.dumps(doc, separators=(",", ":")) + "\n"

    @staticmethod
    def _headers(rng: random.Random, i: int) -> list:
        if i % 5 == 0:
            return []
        headers = [("traceparent", b"00-%032x-%016x-01" % (rng.getrandbits(128), rng.getrandbits(64)))]
        if i % 2:
            headers.append(("content-type", b"application/json"))
        return headers

    def key(self) -> bytes | None:
        rng = self.rng
        if rng.random() < NULL_KEY_SHARE:
            return None
        return self.keys[int(KEY_SPACE * rng.random() ** 2)]  # skewed: a few users are busy

    def value(self, opaque: float = 0.0) -> bytes:
        """A JSON-ish document, or with probability `opaque` as many random bytes."""
        rng = self.rng
        n = min(max(8, int(rng.lognormvariate(math.log(VALUE_MEDIAN), VALUE_SIGMA))), 16384)
        if opaque and rng.random() < opaque:
            return rng.randbytes(n)
        start = self.starts[rng.randrange(len(self.starts))]
        if start + n > len(self.corpus):
            start = len(self.corpus) - n
        return self.corpus[start:start + n]

    def headers(self) -> list:
        return self.header_sets[self.rng.randrange(len(self.header_sets))]


def _wrapper_stamped(entry: bytes, last_offset: int, timestamp: int) -> bytes:
    """A v1 wrapper as the broker stores it: its offset the last inner offset and its timestamp the
    largest inner one (aiokafka, like Kafka's producer, leaves both for the broker), CRC recomputed
    (CRC-32 over magic..end; the offset and size precede it). A gzip value's header time (MTIME, bytes
    4..7 of the stream), which the gzip module sets from the clock, becomes the batch's time in seconds,
    so that the bytes depend on the seed only."""
    body = bytearray(entry[16:])  # magic, attributes, timestamp, key, value
    struct.pack_into(">q", body, 2, timestamp)
    key_length = struct.unpack_from(">i", body, 10)[0]
    value_at = 10 + 4 + max(key_length, 0) + 4
    if body[value_at:value_at + 2] == b"\x1f\x8b":
        struct.pack_into("<I", body, value_at + 4, timestamp // 1000)
    return struct.pack(">qiI", last_offset, len(body) + 4, zlib.crc32(body)) + bytes(body)


def write_partition(task: tuple) -> dict:
    """Write one partition directory; returns its facts (records, entries, bytes, segments)."""
    # imported here so that bench/commands.py can use this module's helpers without aiokafka loaded
    from aiokafka.record.default_records import DefaultRecordBatchBuilder
    from aiokafka.record.legacy_records import LegacyRecordBatchBuilder

    root, topic, partition, size, segment_bytes, seed, span_ms, *custom = task
    # custom: (Shape, a Producer-like class) for a topic of other values (bench/typed_avro.py)
    shape, producer = custom if custom else (SHAPES[topic], Producer)
    rng = random.Random(f"{seed}/{topic}/{partition}")
    source = producer(rng)
    path = os.path.join(root, f"{topic}-{partition}")
    os.makedirs(path)
    producers = [(rng.randrange(1000, 1 << 40), rng.randrange(3)) for _ in range(3)]
    sequences = [0] * len(producers)
    offset = written = entries = segments = 0
    out, segment_size = None, 0
    skew_clock = 0
    while written < size:
        n = shape.smallest + int((shape.largest - shape.smallest + 1) * rng.random() ** shape.skew)
        n = min(n, shape.largest)
        now = BASE_TIMESTAMP + int(span_ms * written / size)
        if rng.random() < 0.005:  # a producer whose clock is behind
            skew_clock = rng.randrange(1_000, 300_000)
        elif skew_clock and rng.random() < 0.2:
            skew_clock = 0
        stamps = [now - skew_clock + j - (rng.randrange(2_000) if rng.random() < 0.01 else 0)
                  for j in range(n)]
        epoch = 0 if written < size // 2 else 1
        if shape.magic == 2:
            who = rng.randrange(len(producers)) if shape.idempotent else -1
            pid, pepoch = producers[who] if who >= 0 else (-1, -1)
            builder = DefaultRecordBatchBuilder(2, CODECS[shape.codec], 0, pid, pepoch,
                                                sequences[who] if who >= 0 else -1, MAX_BATCH_BYTES)
            for j in range(n):
                builder.append(j, stamps[j], source.key(), source.value(shape.opaque),
                               source.headers() if shape.headers else [])
            if who >= 0:
                sequences[who] += n
            built = builder.build()
            # baseOffset and partitionLeaderEpoch are not under the CRC (KIP-98's batch layout)
            struct.pack_into(">q", built, 0, offset)
            struct.pack_into(">i", built, 12, epoch)
            data, count = bytes(built), 1
        elif shape.codec == "none":
            builder = LegacyRecordBatchBuilder(1, 0, MAX_BATCH_BYTES)
            for j in range(n):  # one entry per message, at its absolute offset
                builder.append(offset + j, stamps[j], source.key(), source.value(shape.opaque))
            data, count = bytes(builder.build()), n
        else:
            builder = LegacyRecordBatchBuilder(1, CODECS[shape.codec], MAX_BATCH_BYTES)
            for j in range(n):  # inner offsets relative (KIP-31), the wrapper's absolute
                builder.append(j, stamps[j], source.key(), source.value(shape.opaque))
            data, count = _wrapper_stamped(bytes(builder.build()), offset + n - 1, max(stamps)), 1
        if out is None or (segment_size and segment_size + len(data) > segment_bytes):
            if out is not None:
                out.close()
            out = open(os.path.join(path, f"{offset:020d}.log"), "wb")
            segment_size, segments = 0, segments + 1
        out.write(data)
        segment_size += len(data)
        written += len(data)
        offset += n
        entries += count
    out.close()
    return {"partition": f"{topic}-{partition}", "records": offset, "entries": entries, "bytes": written,
            "segments": segments}


def generate(dst: str, size: int, seed: int = 1, segment_bytes: int = 64 << 20, partitions: int = 2,
             shapes: list[str] | None = None, reindex: bool = False, processes: int | None = None,
             span_ms: int = SPAN_MS, mix: str = "project") -> dict:
    """Write the log directory `dst` (which must not exist); returns what was written."""
    if mix not in MIXES:
        raise SystemExit(f"producer_logs: unknown mix {mix!r} (known: {', '.join(MIXES)})")
    shares = MIXES[mix]
    shapes = shapes or list(shares)
    unknown = [s for s in shapes if s not in shares]
    if unknown:
        raise SystemExit(f"producer_logs: shape(s) {', '.join(unknown)} not in the {mix} mix "
                         f"({', '.join(shares)})")
    if os.path.exists(dst):
        raise SystemExit(f"producer_logs: {dst} exists")
    total_share = sum(shares[s] for s in shapes)
    raw = dst + ".partial"
    shutil.rmtree(raw, ignore_errors=True)
    os.makedirs(raw)
    tasks = [(raw, topic, p, int(size * shares[topic] / total_share / partitions), segment_bytes, seed,
              span_ms)
             for topic in shapes for p in range(partitions)]
    tasks.sort(key=lambda t: -t[3])  # the biggest first, so the pool finishes together
    started = time.perf_counter()
    with multiprocessing.get_context("fork").Pool(processes or os.cpu_count()) as pool:
        facts = sorted(pool.imap_unordered(write_partition, tasks), key=lambda f: f["partition"])
    seconds = time.perf_counter() - started
    # CPU seconds of the writer processes: on a shared machine the wall time also counts others' work
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    reindex_seconds = None
    if reindex:
        t = time.perf_counter()
        kfmt = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bin", "kfmt")
        subprocess.run([kfmt, "reindex", raw, dst, "--no-progress"], check=True, stdout=subprocess.DEVNULL)
        shutil.rmtree(raw)
        reindex_seconds = time.perf_counter() - t
    else:
        os.rename(raw, dst)
    return {"path": dst, "size": size, "seed": seed, "segment_bytes": segment_bytes, "partitions": facts,
            "mix": mix, "shapes": shapes, "indexed": reindex, "generate_seconds": seconds,
            "generate_cpu_seconds": usage.ru_utime + usage.ru_stime,
            "reindex_seconds": reindex_seconds, "span_ms": span_ms, "bytes": sum(f["bytes"] for f in facts),
            "records": sum(f["records"] for f in facts)}


def dir_name(size: int, seed: int, segment_bytes: int, partitions: int, reindex: bool = False,
             mix: str = "project") -> str:
    return (f"producer-{size_name(size)}-seed{seed}-seg{size_name(segment_bytes)}-p{partitions}"
            + ("" if mix == "project" else f"-{mix}") + ("-indexed" if reindex else ""))


def cached(root: str, size: int, seed: int = 1, segment_bytes: int = 64 << 20, partitions: int = 2,
           reindex: bool = False, mix: str = "project") -> dict:
    """The directory for these arguments under `root`, generated on first use and reused after (a
    JSON file beside it, written last, records what it holds; a half-written one is redone)."""
    dst = os.path.join(root, dir_name(size, seed, segment_bytes, partitions, reindex, mix))
    facts_path = dst + ".json"
    if os.path.exists(facts_path) and os.path.isdir(dst):
        with open(facts_path) as f:
            return json.load(f)
    shutil.rmtree(dst, ignore_errors=True)
    os.makedirs(root, exist_ok=True)
    print(f"bench: generating {dst} ({size_name(size)}) with aiokafka's builders", file=sys.stderr, flush=True)
    facts = generate(dst, size, seed, segment_bytes, partitions, reindex=reindex, mix=mix)
    print(f"bench: generated {facts['bytes'] / 1e6:.0f} MB, {facts['records']} records in "
          f"{facts['generate_seconds']:.1f} s ({facts['generate_cpu_seconds']:.1f} s of CPU)", file=sys.stderr,
          flush=True)
    with open(facts_path, "w") as f:
        json.dump(facts, f, indent=1)
    return facts


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dst", help="the log directory to write (must not exist)")
    p.add_argument("--size", type=parse_size, default=parse_size("200M"), help="total bytes (200M; 10M..8G)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--segment-bytes", type=parse_size, default=64 << 20, help="segment.bytes (64M)")
    p.add_argument("--partitions", type=int, default=2, help="partitions per topic (2)")
    p.add_argument("--mix", default="project", choices=sorted(MIXES), help="which shapes, in which shares (project)")
    p.add_argument("--shapes", help="comma-separated topics of the mix to write (all of it)")
    p.add_argument("--reindex", action="store_true", help="add index files with kfmt reindex")
    p.add_argument("--processes", type=int, help="writer processes (one per core)")
    p.add_argument("--span-ms", type=int, default=SPAN_MS,
                   help=f"record time each partition spans, in ms ({SPAN_MS}: a week; 86400000: a day)")
    args = p.parse_args(argv)
    facts = generate(args.dst, args.size, args.seed, args.segment_bytes, args.partitions,
                     args.shapes.split(",") if args.shapes else None, args.reindex, args.processes, args.span_ms,
                     args.mix)
    for f in facts["partitions"]:
        print(f"{f['partition']:12} {f['bytes'] / 1e6:8.1f} MB {f['records']:10} records "
              f"{f['entries']:10} entries {f['segments']:4} segments")
    print(f"total {facts['bytes'] / 1e6:.1f} MB, {facts['records']} records, written in "
          f"{facts['generate_seconds']:.1f} s ({facts['generate_cpu_seconds']:.1f} s of CPU)" +
          (f", indexed in {facts['reindex_seconds']:.1f} s" if facts["reindex_seconds"] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
