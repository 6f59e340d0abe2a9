"""CompanionBuilder (kfmt.partition.companions) against independent truth.

* The broker that wrote the corpus ran for minutes, so it never expired a producer: with expiry out of
  the picture the builder must reproduce the snapshots it wrote, byte for byte, for every topic the
  log cleaner never touched (the rebuild against Kafka's own recovery, expiry included, is
  tests/transforms/test_reindex.py).
* Producers appear in a snapshot in the iteration order of Java's HashMap: checked against a real
  JVM when one is installed.
* The transaction index's last stable offsets, worked out by hand from docs/format.md §7 for two
  producers with interleaved transactions, one of them spanning segments.
* The builder fed batches encoded in memory (the partition writer's way) gives the same files as
  `kfmt reindex` of the log those batches make.
"""
from __future__ import annotations

import random
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import tools
from support.cli import run_kfmt
from support.corpus import REAL_DIRS, REALKAFKA

from kfmt.errors import DataError
from kfmt.format.control import ControlType, control_key, end_txn_marker_value
from kfmt.format.model import BatchHeader, TimestampType, make_records
from kfmt.partition.companions import CompanionBuilder, build_for_partition
from kfmt.partition.layout import find_partitions, segment_file_name
from kfmt.partition.producer_state import JavaHashMapOrder
from kfmt.partition.reader import PartitionReader
from kfmt.partition.snapshots import read_snapshot
from kfmt.partition.txnindex import AbortedTxn, read_txn_index
from kfmt.plugin import registry
from kfmt.storage.store import open_storage


def never_compacted(name: str) -> bool:
    configs = REALKAFKA / f"{name}.truth" / "topic-configs.txt"
    return configs.exists() and "cleanup.policy=compact" not in configs.read_text()


def companions_of(path: Path, **options):
    storage, p = open_storage(str(path))
    return build_for_partition(PartitionReader(find_partitions(storage, p)[0]), **options)


@pytest.mark.parametrize("name", [d for d in REAL_DIRS if never_compacted(d)])
def test_without_expiry_snapshots_equal_the_writing_brokers(name):
    # An expiration longer than the data's age keeps every producer, as the writing broker did.
    built = companions_of(REALKAFKA / name, producer_expiration_ms=2**62).files()
    original = {f.name: f.read_bytes() for f in (REALKAFKA / name).glob("*.snapshot")}
    assert original, "every corpus partition has snapshots"
    assert {n: d for n, d in built.items() if n.endswith(".snapshot")} == original


# --- Java's HashMap order ---------------------------------------------------------------------

JAVA_HASH_ORDER = """
import java.util.*;
public class HashOrder {
    public static void main(String[] args) {
        Scanner in = new Scanner(System.in);
        while (in.hasNextLine()) {
            HashMap<Long, Long> map = new HashMap<>();
            for (String t : in.nextLine().trim().split(" ")) if (!t.isEmpty()) map.put(Long.parseLong(t), 0L);
            StringBuilder out = new StringBuilder();
            for (Long k : map.keySet()) out.append(k).append(' ');
            System.out.println(out.toString().trim());
        }
    }
}
"""


def key_sequences(rng: random.Random) -> list[list[int]]:
    seqs = [list(range(40)), list(range(39, -1, -1)), [16 * i for i in range(12)],
            [64 * i + 3 for i in range(8)], [2**32 * i for i in range(20)]]
    for _ in range(150):
        n = rng.randint(0, 120)
        pick = rng.choice([lambda: rng.randint(0, 200), lambda: rng.randint(0, 2**20),
                           lambda: rng.randint(-2**63, 2**63 - 1)])
        seqs.append([pick() for _ in range(n)])
    return seqs


@pytest.mark.needs("java")
def test_snapshot_order_is_java_hashmaps(tmp_path):
    java = tools.java()
    source = tmp_path / "HashOrder.java"
    source.write_text(JAVA_HASH_ORDER)
    seqs = key_sequences(random.Random(7))
    result = subprocess.run([java, str(source)], input="\n".join(" ".join(map(str, s)) for s in seqs) + "\n",
                            capture_output=True, text=True, timeout=120, check=True)
    java_orders = [[int(t) for t in line.split()] for line in result.stdout.splitlines()]
    assert len(java_orders) == len(seqs)
    compared = 0
    for seq, expected in zip(seqs, java_orders):
        model = JavaHashMapOrder()
        for key in seq:
            model.put(key)
        if model.exact:  # buckets Java turned into trees are documented as not modelled
            assert model.ordered() == expected, seq
            compared += 1
    assert compared > len(seqs) * 0.9


# --- transactions by hand ---------------------------------------------------------------------

def v2_header(base: int, last: int | None = None, *, pid: int = -1, txn: bool = False,
              control: bool = False, ts: int = 1_700_000_000_000, epoch: int = 0, ple: int = 0,
              seq: int = 0) -> BatchHeader:
    return BatchHeader(magic=2, base_offset=base, last_offset=base if last is None else last,
                       max_timestamp=ts, base_timestamp=ts, partition_leader_epoch=ple, producer_id=pid,
                       producer_epoch=epoch if pid >= 0 else -1,
                       base_sequence=-1 if pid < 0 or control else seq,
                       is_transactional=txn, is_control=control)


def feed(builder: CompanionBuilder, segments: dict[int, list]):
    """segments: base offset -> [(header, control type or None)]; positions and sizes made up
    (the transaction index does not depend on them)."""
    out = []
    for base, batches in segments.items():
        builder.begin_segment(base)
        for position, (header, control) in enumerate(batches):
            builder.add_batch(header.replace(position=100 * position, size=100), control,
                              3 if control is not None else -1)
        out.append(builder.end_segment())
    return out, builder.finish()


def test_last_stable_offsets_of_interleaved_transactions():
    abort, commit = ControlType.ABORT, ControlType.COMMIT
    marker = dict(txn=True, control=True)
    segments, partition = feed(CompanionBuilder(now_ms=1_700_000_000_000), {
        0: [(v2_header(0, pid=100, txn=True), None),      # producer 100 opens a transaction at 0
            (v2_header(1, pid=200, txn=True), None),      # producer 200 opens one at 1
            (v2_header(2, pid=100, **marker), abort),     # 100 aborts: 200's open one bounds the LSO
            (v2_header(3, pid=200, **marker), abort)],    # 200 aborts: nothing else is open
        4: [(v2_header(4, pid=300, txn=True), None),
            (v2_header(5, 6, pid=100, txn=True, seq=1), None),  # 100's next transaction, at 5
            (v2_header(7, pid=300, **marker), commit)],   # commits are not indexed
        8: [(v2_header(8, pid=100, **marker), abort),     # aborts the transaction begun in segment 4
            (v2_header(9, pid=400, **marker), abort)],    # a marker of an empty transaction: no entry
    })
    assert [s.aborted for s in segments] == [
        [AbortedTxn(100, 0, 2, 1), AbortedTxn(200, 1, 3, 4)], [], [AbortedTxn(100, 5, 8, 9)]]
    assert [s.txnindex is None for s in segments] == [False, True, False]
    assert read_txn_index(segments[2].txnindex) == [AbortedTxn(100, 5, 8, 9)]
    # Snapshots at the bases of segments 4 and 8 and at the log end (10); within the day nobody expires.
    assert sorted(partition.snapshots) == [4, 8, 10]
    at_8 = {e.producer_id: e for e in read_snapshot(partition.snapshots[8])}
    assert at_8[100].current_txn_first_offset == 5 and at_8[100].last_offset == 6
    assert at_8[300].current_txn_first_offset == -1 and at_8[300].coordinator_epoch == 3
    assert [e.start_offset for e in partition.leader_epochs] == [0]


def test_non_transactional_write_inside_a_transaction_is_bad_data():
    builder = CompanionBuilder()
    builder.begin_segment(0)
    builder.add_batch(v2_header(0, pid=5, txn=True).replace(position=0, size=100))
    with pytest.raises(DataError, match="InvalidTxnStateException") as err:
        builder.add_batch(v2_header(1, pid=5, seq=1).replace(position=100, size=100))
    assert err.value.offset == 1


# --- the builder fed in memory equals reindex of the same log ----------------------------------

NOW_MS = 1_700_300_000_000
DAY_MS = 86_400_000


@dataclass
class EncodedBatch:
    header: BatchHeader
    data: bytes
    control: ControlType | None = None
    coordinator_epoch: int = -1
    marker_timestamp: int | None = None


def encode(header: BatchHeader, offsets, timestamps, keys, values, headers=None) -> bytes:
    records = make_records(offsets, timestamps, keys, values, headers)
    return registry.get().format_for(header.magic).encode(header, records)


def synthetic_log(rng: random.Random) -> list[list[EncodedBatch]]:
    """Segments of batches as a broker could have written them: legacy messages first (an upgraded
    topic), then v2 batches of idempotent and transactional producers with leader epoch changes,
    offset gaps, markers, and the odd empty control batch (what compaction leaves)."""
    codecs = {n: registry.get().compression_named(n).id for n in ("none", "gzip", "lz4", "zstd")}
    offset = rng.choice([0, rng.randint(1, 10**9)])
    ts = lambda: NOW_MS - rng.choice([3 * DAY_MS, DAY_MS // 2, 1000]) + rng.randint(-5000, 5000)  # noqa: E731
    pids = rng.sample([0, 1, 17, 33, 1000, 2**40 + 3, 2**63 - 1], rng.randint(1, 5))
    transactional = {p for p in pids if rng.random() < 0.6}
    open_txn: dict[int, bool] = {p: False for p in pids}
    sequence = {p: 0 for p in pids}
    ple = 0
    batches: list[EncodedBatch] = []
    for _ in range(rng.randint(0, 6)):  # legacy data before the upgrade to v2
        magic, codec = rng.choice([0, 1]), rng.choice(["none", "gzip"])
        n = 1 if codec == "none" else rng.randint(1, 4)
        offsets = list(range(offset, offset + n))
        stamps = [-1] * n if magic == 0 else [ts() for _ in offsets]
        header = BatchHeader(magic=magic, base_offset=offsets[0], last_offset=offsets[-1],
                             compression=codecs[codec], max_timestamp=max(stamps),
                             timestamp_type=TimestampType.NO_TIMESTAMP_TYPE if magic == 0
                             else TimestampType.CREATE_TIME)
        data = encode(header, offsets, stamps, [b"k"] * n, [b"v" * rng.randint(0, 300)] * n)
        if codec != "none":
            header = header.replace(base_offset=None)  # a wrapper's header knows only its last offset
        batches.append(EncodedBatch(header, data))
        offset += n
    for _ in range(rng.randint(1, 40)):
        offset += rng.choice([0, 0, 0, 1, 7])
        ple += rng.random() < 0.1
        pid = rng.choice(pids + [-1])
        stamp = NOW_MS - rng.choice([2 * DAY_MS, 60_000])
        marker = v2_header(offset, pid=pid, txn=True, control=True, ts=stamp, ple=ple)
        if pid in transactional and open_txn[pid] and rng.random() < 0.35:
            kind = rng.choice([ControlType.ABORT, ControlType.COMMIT])
            data = encode(marker, [offset], [stamp], [control_key(kind)], [end_txn_marker_value(2)])
            batches.append(EncodedBatch(marker, data, kind, 2, stamp))
            open_txn[pid] = False
            offset += 1
            continue
        if pid in transactional and not open_txn[pid] and rng.random() < 0.1:
            # the marker of a transaction whose data the cleaner removed: an empty control batch
            marker = marker.replace(base_timestamp=-1)
            batches.append(EncodedBatch(marker, encode(marker, [], [], [], [])))
            offset += 1
            continue
        n = rng.randint(1, 6)
        offsets = list(range(offset, offset + n))
        stamps = [ts() for _ in offsets]
        txn = pid in transactional and (open_txn[pid] or rng.random() < 0.7)
        header = v2_header(offset, offsets[-1], pid=pid, txn=txn, ts=max(stamps), ple=ple,
                           seq=sequence.get(pid, 0)).replace(
            base_timestamp=stamps[0], compression=codecs[rng.choice(list(codecs))])
        data = encode(header, offsets, stamps, [b"key%d" % o for o in offsets],
                      [bytes(rng.randint(0, 400)) for _ in offsets], [[(b"h", b"x")]] * n)
        batches.append(EncodedBatch(header, data))
        if pid >= 0:
            sequence[pid] += n
            open_txn[pid] = open_txn[pid] or txn
        offset += n
    # Cut into segments; a segment's base may lie below its first offset, and some are empty.
    segments: list[list[EncodedBatch]] = []
    cuts = sorted(rng.sample(range(1, len(batches)), min(len(batches) - 1, rng.randint(0, 6))))
    for start, end in zip([0] + cuts, cuts + [len(batches)]):
        segments.append(batches[start:end])
        if rng.random() < 0.1:
            segments.append([])
    return segments


def first_offset(seg: list[EncodedBatch]) -> int | None:
    if not seg:
        return None
    h = seg[0].header
    return h.last_offset if h.base_offset is None else h.base_offset  # legacy wrappers: a bound


def with_bases(segments: list[list[EncodedBatch]], rng: random.Random) -> list[tuple[int, list]]:
    """Each segment with a base offset: at most its first offset, above the previous segment's
    offsets; an empty segment needs an offset gap to sit in, else it is dropped."""
    out, floor = [], 0
    for i, seg in enumerate(segments):
        ahead = next((first_offset(s) for s in segments[i:] if s), None)
        if ahead is not None and ahead < floor + (0 if seg else 1):
            continue
        base = rng.randint(floor, ahead if seg else ahead - 1) if ahead is not None else floor
        out.append((base, seg))
        floor = seg[-1].header.last_offset + 1 if seg else base + 1
    return out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32), interval=st.sampled_from([0, 1, 150, 1024, 4096]))
def test_builder_fed_in_memory_equals_reindex_of_the_log(tmp_path_factory, seed, interval):
    rng = random.Random(seed)
    segments = with_bases(synthetic_log(rng), rng)
    src = tmp_path_factory.mktemp("src") / "synthetic-0"
    src.mkdir()
    builder = CompanionBuilder(index_interval_bytes=interval, now_ms=NOW_MS)
    expected: dict[str, bytes] = {}
    for base, seg in segments:
        builder.begin_segment(base)
        position = 0
        for b in seg:
            builder.add_batch(b.header.replace(position=position, size=len(b.data)), b.control,
                              b.coordinator_epoch, marker_timestamp=b.marker_timestamp)
            position += len(b.data)
        expected.update(builder.end_segment().files())
        (src / segment_file_name(base, "log")).write_bytes(b"".join(b.data for b in seg))
    expected.update(builder.finish().files())

    dst = tmp_path_factory.mktemp("dst") / "out"
    result = run_kfmt("reindex", src, dst, "--now", NOW_MS, "--index-interval-bytes", interval)
    assert result.code == 0, result.err
    written = {f.name: f.read_bytes() for f in dst.iterdir()
               if re.search(r"\.(index|timeindex|txnindex|snapshot)$|^leader-epoch-checkpoint$", f.name)}
    assert written == expected
