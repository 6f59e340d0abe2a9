"""Deflate speed and size of gzip's levels on a producer's payloads, compressible and not: what kfmt's
default gzip level was chosen from (docs/performance.md, "Re-encoding at codec speed").

    .venv/bin/python bench/gzip_levels.py [--blocks 200] [--block-bytes 60000] [--reps 3]

Payloads are batch-sized blocks of bench/producer_logs.py's JSON-ish values (compressible) and of
random bytes (encrypted or already compressed values); each is deflated raw, as a gzip member's body,
by zlib at levels 1, 6 (Kafka's default) and 9, and by ISA-L (the isal package) at levels 0 to 3.
Speeds are MB of input per CPU second (best of --reps), sizes the output over the input.
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import time
import zlib

from isal import isal_zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import producer_logs  # noqa: E402

LEVELS = [("zlib", zlib, level) for level in (1, 6, 9)] + [("isal", isal_zlib, level) for level in range(4)]


def payloads(kind: str, blocks: int, size: int, seed: int = 1) -> list[bytes]:
    rng = random.Random(seed)
    if kind == "random":
        return [rng.randbytes(size) for _ in range(blocks)]
    producer = producer_logs.Producer(rng)
    out = []
    for _ in range(blocks):
        block = bytearray()
        while len(block) < size:
            block += producer.value()
        out.append(bytes(block[:size]))
    return out


def measure(library, level: int, data: list[bytes], reps: int) -> tuple[float, float]:
    """(MB per CPU second, output size over input size)."""
    best = None
    for _ in range(reps):
        t = time.process_time()
        out = sum(len(library.compress(block, level, -15)) for block in data)
        spent = time.process_time() - t
        best = spent if best is None else min(best, spent)
    size = sum(map(len, data))
    return size / best / 1e6, out / size


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--blocks", type=int, default=200)
    p.add_argument("--block-bytes", type=int, default=60000)
    p.add_argument("--reps", type=int, default=3)
    args = p.parse_args(argv)
    print("| payload | library | level | MB/s (CPU) | size / input | speed vs zlib 6 | size vs zlib 6 |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for kind in ("JSON-ish values", "random bytes"):
        data = payloads("random" if kind == "random bytes" else "json", args.blocks, args.block_bytes)
        results = {(name, level): measure(lib, level, data, args.reps) for name, lib, level in LEVELS}
        kafka_speed, kafka_size = results[("zlib", 6)]
        for (name, level), (speed, ratio) in results.items():
            print(f"| {kind} | {name} | {level} | {speed:.0f} | {ratio:.3f} | {speed / kafka_speed:.1f}x | "
                  f"{ratio / kafka_size - 1:+.0%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
