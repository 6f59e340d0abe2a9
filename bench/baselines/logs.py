"""What the baseline scripts share: finding partition directories and walking a segment's entries with
aiokafka's record readers, as a user scripting without kfmt would (and as aiokafka's MemoryRecords does
internally: [offset int64][size int32] framing, magic at byte 16)."""
from __future__ import annotations

import os
import re
import struct

from aiokafka.record.default_records import DefaultRecordBatch
from aiokafka.record.legacy_records import LegacyRecordBatch

PARTITION_DIR = re.compile(r"(.+)-(\d+)$")


def partitions(logdir: str, topic_prefix: str = "") -> list[tuple[str, int, str]]:
    """(topic, partition, path) of every partition directory under `logdir` (or `logdir` itself),
    in name order."""
    found = []
    for name in sorted(os.listdir(logdir)):
        path = os.path.join(logdir, name)
        m = PARTITION_DIR.fullmatch(name)
        if m and os.path.isdir(path) and name.startswith(topic_prefix):
            found.append((m.group(1), int(m.group(2)), path))
    if not found:
        m = PARTITION_DIR.fullmatch(os.path.basename(os.path.normpath(logdir)))
        if m:
            found.append((m.group(1), int(m.group(2)), logdir))
    return found


def segments(partition_path: str) -> list[str]:
    return [os.path.join(partition_path, n) for n in sorted(os.listdir(partition_path)) if n.endswith(".log")]


def entries(data: bytes):
    """(position, end, magic) of each whole entry in a segment's bytes."""
    pos, size = 0, len(data)
    while pos + 17 <= size:
        length = struct.unpack_from(">i", data, pos + 8)[0]
        end = pos + 12 + length
        if end > size:
            break
        yield pos, end, data[pos + 16]
        pos = end


def batches(data: bytes):
    """(batch, leader epoch or None) of each entry, as aiokafka's reader objects."""
    view = memoryview(data)
    for pos, end, magic in entries(data):
        if magic == 2:
            yield DefaultRecordBatch(view[pos:end]), struct.unpack_from(">i", data, pos + 12)[0]
        else:
            yield LegacyRecordBatch(view[pos:end], magic), None
