"""The codec's own time in a rewrite: what recompress, compact and the other re-encoding commands cannot
avoid however fast the rest is. Every compressed entry's payload is decompressed with its codec (a v2
batch's records section, a v0/v1 wrapper's value) and compressed again, with the same codec
(`--to same`) or with one codec (`--to lz4`, where every entry's records, compressed or not, are
compressed separately as recompress re-encodes each batch); one process per core, over every segment.
The codecs are the libraries a user would call (zlib, lz4.frame with Kafka's 64 KiB independent
blocks, zstandard), at their default levels; `--gzip isal` inflates and deflates gzip with ISA-L
(the isal package) at `--gzip-level` (1), as kfmt's gzip plugin does by default.

    python bench/baselines/codec.py SRC [--to same|gzip|lz4|zstd] [--topic-prefix P] [--gzip zlib|isal]
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import struct
import sys
import zlib

import lz4.frame
import zstandard
from isal import isal_zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import logs  # noqa: E402

CODECS = {1: "gzip", 3: "lz4", 4: "zstd"}  # snappy does not occur in the generated logs


GZIP = {"zlib": (zlib, 6), "isal": (isal_zlib, 1)}  # library, level (--gzip, --gzip-level)
gzip_library, gzip_level = GZIP["zlib"]


def decompress(codec: str, payload: bytes) -> bytes:
    if codec == "gzip":
        return gzip_library.decompress(payload, 31)
    if codec == "lz4":
        return lz4.frame.decompress(payload)
    return zstandard.ZstdDecompressor().decompressobj().decompress(payload)


def compress(codec: str, payload: bytes) -> bytes:
    if codec == "gzip":
        c = gzip_library.compressobj(gzip_level, zlib.DEFLATED, 31)
        return c.compress(payload) + c.flush()
    if codec == "lz4":
        return lz4.frame.compress(payload, block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=False)
    return zstandard.ZstdCompressor(level=3).compress(payload)


def legacy_value(data: bytes, pos: int, magic: int) -> bytes:
    at = pos + 12 + 4 + 2 + (8 if magic == 1 else 0)  # crc, magic, attributes, timestamp
    key_length = struct.unpack_from(">i", data, at)[0]
    at += 4 + max(key_length, 0)
    value_length = struct.unpack_from(">i", data, at)[0]
    return data[at + 4:at + 4 + value_length]


def recode_segment(task: tuple) -> int:
    global gzip_library, gzip_level
    segment, to, (library, gzip_level) = task
    gzip_library = GZIP[library][0]
    with open(segment, "rb") as f:
        data = f.read()
    out = 0
    for pos, end, magic in logs.entries(data):
        if magic == 2:
            codec = CODECS.get(data[pos + 22] & 7)
            payload = data[pos + 61:end]
        else:
            codec = CODECS.get(data[pos + 17] & 7)
            payload = legacy_value(data, pos, magic) if codec else data[pos:end]
        if codec:
            payload = decompress(codec, payload)
        target = codec if to == "same" else to
        if target:
            out += len(compress(target, payload))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("src")
    p.add_argument("--to", default="same", choices=["same", "gzip", "lz4", "zstd"])
    p.add_argument("--topic-prefix", default="")
    p.add_argument("--processes", type=int, default=os.cpu_count())
    p.add_argument("--gzip", choices=sorted(GZIP), default="zlib", help="the gzip library (zlib)")
    p.add_argument("--gzip-level", type=int, help="its level (zlib 6, isal 1)")
    args = p.parse_args(argv)
    gzip = (args.gzip, GZIP[args.gzip][1] if args.gzip_level is None else args.gzip_level)
    tasks = [(seg, args.to, gzip) for _, _, path in logs.partitions(args.src, args.topic_prefix)
             for seg in logs.segments(path)]
    tasks.sort(key=lambda t: -os.path.getsize(t[0]))
    with multiprocessing.get_context("fork").Pool(args.processes) as pool:
        written = sum(pool.imap_unordered(recode_segment, tasks))
    print(f"compressed {written} bytes from {len(tasks)} segments")
    return 0


if __name__ == "__main__":
    sys.exit(main())
