"""Running kfmt's transforms (upgrade, recompress, resegment) and checking their output against the
corpus truth and the peer libraries."""
from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import struct
import zlib
from functools import cache
from pathlib import Path

from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords
from support.cli import run_kfmt
from support.corpus import REALKAFKA
from support.corpus_truth import consumer_records

from kfmt.format.control import ControlType, control_key, end_txn_marker_value
from kfmt.format.model import BatchHeader, make_records
from kfmt.partition.layout import find_partitions
from kfmt.partition.reader import PartitionReader
from kfmt.plugin import registry
from kfmt.storage.store import open_storage
from kfmt.transforms.report import REPORT_NAME

SPARK = os.environ.get("KFMT_SPARK_MASTER", "local[*]")  # the Spark tests' master: local mode


NOW_MS = 1_795_000_000_000  # the clock producer expiry is judged against, for upgrade and reindex alike


COMPANION = re.compile(r"\.(index|timeindex|txnindex|snapshot)$|^leader-epoch-checkpoint$")


def kfmt_ok(*args) -> str:
    result = run_kfmt(*[str(a) for a in args])
    assert result.code == 0, result.err
    return result.out


def transform(command: str, src, dst, *args, master: str = "inprocess") -> dict:
    """Run a transform; returns its report."""
    kfmt_ok(command, src, dst, "--no-progress", "--now", NOW_MS, "--master", master, *args)
    return json.loads(Path(dst, REPORT_NAME).read_text())


@cache
def corpus_magic(name: str) -> int:
    """The message format of a corpus partition (its first entry's magic byte)."""
    first = next(p for p in sorted((REALKAFKA / name).glob("*.log")) if p.stat().st_size)
    return first.read_bytes()[16]


def log_dir_of(tmp_path: Path, names, name: str = "logs") -> Path:
    """A log directory holding copies of corpus partitions (and the broker's own log-dir files)."""
    root = tmp_path / name
    root.mkdir()
    for n in names:
        shutil.copytree(REALKAFKA / n, root / n)
    shutil.copy(REALKAFKA / "_logdir-root" / "meta.properties", root)
    return root


def companion_files(directory: Path) -> dict[str, bytes]:
    return {f.name: f.read_bytes() for f in directory.iterdir() if COMPANION.search(f.name)}


def assert_companions_are_reindexs(out: Path, tmp_path: Path, *args) -> None:
    """The companion files of every partition of `out` are what `kfmt reindex` writes for it."""
    again = tmp_path / f"reindexed-{out.name}"
    kfmt_ok("reindex", out, again, "--no-progress", "--now", NOW_MS, *args)
    if list(out.glob("*.log")):  # a partition directory
        assert companion_files(out) == companion_files(again)
        return
    for part in (p for p in out.iterdir() if p.is_dir()):
        assert companion_files(part) == companion_files(again / part.name), part.name


def cat_json(path: Path) -> list[dict]:
    return [json.loads(line) for line in kfmt_ok("cat", path, "--format", "json").splitlines()]


def truth_as_v2(name: str) -> list[dict]:
    """What the Java consumer read, as it reads the v2 form: v0's NoTimestampType is CreateTime -1."""
    out = []
    for r in consumer_records(name):
        r = dict(r)
        if r["timestampType"] == "NoTimestampType":
            r["timestampType"] = "CreateTime"
        out.append(r)
    return out


def batches_of(path: Path) -> list:
    [part] = find_partitions(*open_storage(str(path)))
    reader = PartitionReader(part)
    return [reader.decode(seg, h) for seg in part.segments for h in reader.frames(seg)]


def records(path: Path) -> list[tuple]:
    """(offset, timestamp, key, value, [(header key, value)]) of the data records, as kfmt reads them."""
    out = []
    for b in batches_of(path):
        if not b.header.is_control:
            out += [(r["offset"], r["timestamp"], r["key"], r["value"],
                     [(h["key"], h["value"]) for h in r["headers"]]) for r in b.records.to_pylist()]
    return out


ENTRY = re.compile(r"^offset: (\d+) position: \d+ (\w+): (-?\d+) size: \d+ magic: (\d) compresscodec: (\w+)")


INNER = re.compile(r"^\| offset: (\d+) (\w+): (-?\d+) keySize:")


@cache
def expected_v2_batches(name: str) -> list[tuple]:
    """Per source entry of kafka-dump-log's deep listing: (first offset, last offset, records,
    codec, timestamp type, max timestamp) of the v2 batch Kafka 4.0 converts it to (docs/format.md §16.3)."""
    entries = []
    with gzip.open(REALKAFKA / f"{name}.truth" / "dump-log.deep.txt.gz", "rt", errors="replace") as f:
        for line in f:
            if m := ENTRY.match(line):
                entries.append([int(m[1]), m[2], int(m[3]), m[5], []])
            elif m := INNER.match(line):
                entries[-1][4].append((int(m[1]), int(m[3])))
    out = []
    for last, ts_type, ts, codec, inner in entries:
        offsets = [o for o, _ in inner]
        v2_type = "CreateTime" if ts_type == "NoTimestampType" else ts_type
        max_ts = ts if ts_type == "LogAppendTime" else max(t for _, t in inner)
        out.append((min(offsets), last, len(inner), codec, v2_type, max_ts))
    return out


def v2_layout(path: Path) -> list[tuple]:
    codecs = registry.get().compressions
    out = []
    for b in batches_of(path):
        h = b.header
        assert (h.magic, h.producer_id, h.producer_epoch, h.base_sequence, h.partition_leader_epoch,
                h.is_transactional, h.is_control) == (2, -1, -1, -1, -1, False, False)
        assert h.base_timestamp == b.records.column(1)[0].as_py()  # the first record's time
        out.append((h.base_offset, h.last_offset, h.records_count, codecs[h.compression].name,
                    h.timestamp_type.java_name, h.max_timestamp))
    return out


T0 = 1_700_000_000_000


def peer_legacy(magic: int, codec: int, first: int, count: int, *,
                log_append_time: int | None = None) -> bytes:
    """Legacy entries as a producer of that era sent them, with the offsets a broker assigns."""
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    for i in range(count):
        inner = (i if magic == 1 else first + i) if codec else first + i
        builder.append(inner, timestamp=T0 + first + i, key=b"k%d" % (first + i),
                       value=None if i == 1 else b"v" * (first + i))
    data = bytes(builder.build())
    if not codec:
        return data
    data = struct.pack(">q", first + count - 1) + data[8:]  # the wrapper carries the last offset
    if log_append_time is not None:  # the broker's in-place LogAppendTime path (docs/format.md §3.5)
        body = bytearray(data[16:])
        body[1] |= 0x08
        struct.pack_into(">q", body, 2, log_append_time)
        data = data[:12] + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF) + bytes(body)
    return data


def peer_v2(first: int, count: int, *, pid=-1, epoch=-1, seq=-1, transactional=False, codec=0,
            leader_epoch=0) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=transactional,
                                        producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                                        batch_size=1 << 20)
    for i in range(count):
        builder.append(i, timestamp=T0 + first + i, key=b"k%d" % (first + i), value=b"x" * (40 * i),
                       headers=[("h", b"%d" % i)] if i % 2 else [])
    data = bytes(builder.build())
    return struct.pack(">q", first) + data[8:12] + struct.pack(">i", leader_epoch) + data[16:]


def kfmt_marker(offset: int, pid: int, epoch: int, kind: ControlType, leader_epoch: int = 0) -> bytes:
    """A transaction marker (kafka-python cannot build control batches)."""
    header = BatchHeader(magic=2, base_offset=offset, last_offset=offset, max_timestamp=T0 + offset,
                         base_timestamp=T0 + offset, producer_id=pid, producer_epoch=epoch,
                         is_transactional=True, is_control=True, partition_leader_epoch=leader_epoch)
    return registry.get().format_for(2).encode(header, make_records(
        [offset], [T0 + offset], [control_key(kind)], [end_txn_marker_value(3)]))


GZIP, LZ4 = 1, 3


MIXED = [  # (segment base, entries): v2, then v1 and v0 (message format downgraded), then v2 again
    (0, [peer_v2(0, 3, pid=7, epoch=0, seq=0), peer_v2(3, 2, pid=7, epoch=0, seq=3)]),
    (5, [peer_legacy(1, GZIP, 5, 4), peer_legacy(1, 0, 9, 3), peer_legacy(0, GZIP, 12, 3),
         peer_legacy(1, LZ4, 15, 2, log_append_time=T0 + 999_999)]),
    (17, [peer_legacy(0, 0, 17, 2),
          peer_v2(19, 2, pid=9, epoch=1, seq=0, transactional=True, leader_epoch=1),
          peer_v2(21, 1, pid=7, epoch=0, seq=5, leader_epoch=1),
          kfmt_marker(22, 9, 1, ControlType.ABORT, 1),
          peer_v2(23, 3, pid=9, epoch=1, seq=2, transactional=True, codec=GZIP, leader_epoch=2),
          kfmt_marker(26, 9, 1, ControlType.COMMIT, 2)]),
]


def write_mixed(path: Path) -> Path:
    path.mkdir(parents=True)
    for base, entries in MIXED:
        (path / f"{base:020d}.log").write_bytes(b"".join(entries))
    (path / "partition.metadata").write_bytes(b"version: 0\ntopic_id: q4Ft5cS2R8KbU1oQ3v9xZw")
    return path


def peer_records(path: Path) -> list[tuple]:
    """(offset, timestamp, key, value, headers) as kafka-python reads the segments (data only)."""
    out = []
    for log in sorted(path.glob("*.log")):
        for batch in MemoryRecords(log.read_bytes()):
            if getattr(batch, "is_control_batch", False):
                continue
            out += [(r.offset, r.timestamp, r.key, r.value, [(k.encode(), v) for k, v in r.headers])
                    for r in batch]
    return out
