"""The `kfmt cat --format json` baseline: aiokafka's record readers and json.dumps per record, printing
the same JSON lines (offset, timestamp, timestampType, base64 key and value, headers, leaderEpoch, topic,
partition) in offset order, partition after partition, in one process as `kfmt cat` prints one stream.

    python bench/baselines/cat_json.py SRC [--topic-prefix P] > /dev/null
"""
from __future__ import annotations

import argparse
import base64
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import logs  # noqa: E402

TYPES = {None: "NoTimestampType", 0: "CreateTime", 1: "LogAppendTime"}


def b64(data):
    return None if data is None else base64.b64encode(data).decode("ascii")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("src")
    p.add_argument("--topic-prefix", default="")
    args = p.parse_args(argv)
    write = sys.stdout.write
    for topic, partition, path in logs.partitions(args.src, args.topic_prefix):
        for segment in logs.segments(path):
            with open(segment, "rb") as f:
                data = f.read()
            for batch, epoch in logs.batches(data):
                if not batch.validate_crc():
                    raise SystemExit(f"{segment}: CRC mismatch")
                if getattr(batch, "is_control_batch", False):
                    continue
                lines = [json.dumps({
                    "offset": r.offset, "timestamp": r.timestamp if r.timestamp is not None else -1,
                    "timestampType": TYPES[r.timestamp_type], "key": b64(r.key), "value": b64(r.value),
                    "headers": [{"key": k, "value": b64(v)} for k, v in r.headers],
                    "leaderEpoch": epoch, "topic": topic, "partition": partition},
                    separators=(",", ":")) for r in batch]
                write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
