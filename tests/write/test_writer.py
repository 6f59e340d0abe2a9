"""The partition writer (kfmt.write.writer): segments rolled by the broker's rules (docs/format.md §12.2), batches
copied or encoded, companion files from kfmt.partition.companions, the separable plan/write steps.

Independent truth: the realkafka corpus. Where the broker appended one batch at a time (everything but
uncompressed v0/v1 and the compacted logs), writing the same batches with the topic's segment.bytes
must give the broker's own segment files, and companion files byte-identical to the ones the broker
rebuilt in log recovery (`rebuilt/`). Every written directory must read back as the Java consumer saw
it. The roll rules' edges are checked with synthetic batches against expectations derived by hand
from §6.3/§6.4/§12.2, and as properties over random batch sequences (hypothesis).
"""
from __future__ import annotations

import os
import pickle
import re
import struct
import tracemalloc
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.consumer_truth import consumer_truth, records_of
from support.corpus import REAL_DIRS, REALKAFKA

from kfmt.errors import DataError, UsageError
from kfmt.format.model import INT32_MAX, BatchHeader, make_records
from kfmt.partition.layout import find_partitions
from kfmt.partition.reader import PartitionReader
from kfmt.plugin import registry
from kfmt.storage.staging import StagedOutput
from kfmt.storage.store import open_storage
from kfmt.write.planner import (
    FIRST,
    INDEX_FULL,
    OFFSET_OVERFLOW,
    REQUESTED,
    SEGMENT_BYTES,
    SEGMENT_MS,
    RollPolicy,
    SegmentPlanner,
    plan_segments,
)
from kfmt.write.segment_writer import source_entries, write_companions, write_segment
from kfmt.write.writer import PartitionWriter

NOW_MS = 1_795_000_000_000
T0 = 1_700_000_000_000
# Where the broker wrote one batch per append: its segmentation is reproducible from the batches.
UNCOMPRESSED_LEGACY_OR_COMPACTED = {"v0-none-0", "v1-none-0", "compact-v2-none-0", "compact-v1-gzip-0"}


def corpus_policy(name: str) -> RollPolicy:
    """The topic's own configs (topic-configs.txt): segment.bytes=8192 and its index.interval.bytes."""
    configs = (REALKAFKA / f"{name}.truth" / "topic-configs.txt").read_text()
    interval = re.search(r"\bindex\.interval\.bytes=(\d+)", configs)
    segment_bytes = re.search(r"\bsegment\.bytes=(\d+)", configs)
    return RollPolicy(segment_bytes=int(segment_bytes[1]),
                      index_interval_bytes=int(interval[1]) if interval else 4096)


def source(name: str):
    storage, path = open_storage(str(REALKAFKA / name))
    [part] = find_partitions(storage, path)
    return part


def publish(tmp_path, name="out"):
    """A context manager: (StagedOutput, PartitionWriter) writing partition directory tmp_path/name."""
    storage, path = open_storage(str(tmp_path / name))
    return storage, path, StagedOutput(storage, path)


def write_partition(tmp_path, batches, policy: RollPolicy, mode="copy", name="out", **kwargs):
    """Write (header, entry) pairs (mode copy) or decoded batches (mode encode); returns the
    PartitionDir read back and the writer's summary."""
    storage, path, out = publish(tmp_path, name)
    with out:
        with PartitionWriter(out, "", policy, now_ms=NOW_MS, **kwargs) as writer:
            for item in batches:
                if mode == "copy":
                    writer.append(*item)
                else:
                    writer.append_batch(item)
    [part] = find_partitions(storage, path)
    return part, writer.summary


def v2_entry(base_offset: int, count: int = 1, value_size: int = 0, timestamp: int = T0,
             gap: int = 0) -> tuple[BatchHeader, bytes]:
    """A v2 batch of `count` records (the first with a value of `value_size` bytes), all at
    `timestamp`, offsets base..base+count-1 then `gap` more offsets of lastOffsetDelta."""
    offsets = [base_offset + i for i in range(count)]
    records = make_records(offsets, [timestamp] * count, [None] * count,
                           [b"v" * value_size] + [b""] * (count - 1))
    header = BatchHeader(magic=2, base_offset=base_offset, last_offset=offsets[-1] + gap,
                         base_timestamp=timestamp, max_timestamp=timestamp)
    fmt = registry.get().format_for(2)
    entry = fmt.encode(header, records)
    return fmt.read_header(memoryview(entry), 0), entry


def segment_facts(part) -> list[tuple[int, int, list[int]]]:
    """(base offset, .log size, first offsets of its batches) per segment of a written directory
    (a legacy wrapper's first offset is known once decoded)."""
    reader = PartitionReader(part)
    return [(seg.base_offset, seg.size,
             [h.base_offset if h.base_offset is not None else reader.decode(seg, h).header.base_offset
              for h in reader.frames(seg)])
            for seg in part.segments]


# --- the corpus: broker segmentation and companion files reproduced, records preserved ---

@pytest.mark.parametrize("name", REAL_DIRS)
def test_copying_batches_reproduces_the_brokers_directory(tmp_path, name):
    src = source(name)
    reader = PartitionReader(src)
    part, summary = write_partition(tmp_path, ((h, e) for _s, h, e in source_entries(reader)),
                                    corpus_policy(name), source=src)
    assert records_of(part) == consumer_truth(name)
    src_logs = b"".join(bytes(src.storage.read(s.log.path)) for s in src.segments)
    assert b"".join(bytes(part.storage.read(s.log.path)) for s in part.segments) == src_logs
    for base, _size, first_offsets in segment_facts(part):
        assert base <= first_offsets[0] and all(o - base <= INT32_MAX for o in first_offsets)
    assert all(re.fullmatch(r"\d{20}\.log", s.log.name) for s in part.segments)
    assert bytes(part.storage.read(part.files["partition.metadata"].path)) == bytes(
        src.storage.read(src.files["partition.metadata"].path))
    if name in UNCOMPRESSED_LEGACY_OR_COMPACTED:
        return
    # The broker rolled before each batch by the same rules: same segments, and the companion files
    # its log recovery rebuilt (snapshot contents depend on the wall clock: names only; the
    # uncompacted twins have no rebuilt files).
    assert [s.base_offset for s in part.segments] == [s.base_offset for s in src.segments]
    assert sorted(part.files) == sorted(f.name for f in src.files.values())
    rebuilt = REALKAFKA / f"{name}.truth" / "rebuilt"
    for truth in sorted(rebuilt.iterdir()) if rebuilt.is_dir() else []:
        if truth.suffix != ".snapshot":
            assert Path(part.path, truth.name).read_bytes() == truth.read_bytes(), truth.name


@pytest.mark.parametrize("name", REAL_DIRS)
def test_encoding_decoded_batches_round_trips_every_record(tmp_path, name):
    src = source(name)
    decoded = [batch for _seg, batch, _skip in PartitionReader(src).batches()]
    part, _ = write_partition(tmp_path, decoded, corpus_policy(name), mode="encode", source=src)
    assert records_of(part) == consumer_truth(name)
    written = [batch for _seg, batch, _skip in PartitionReader(part).batches()]
    facts = ("magic", "base_offset", "last_offset", "compression", "timestamp_type", "max_timestamp",
             "partition_leader_epoch", "producer_id", "producer_epoch", "base_sequence",
             "is_transactional", "is_control", "records_count")
    assert [[getattr(b.header, f) for f in facts] for b in written] == [
        [getattr(b.header, f) for f in facts] for b in decoded]


@pytest.mark.parametrize("name", ["compact-v2-none-0", "compact-v1-gzip-0"])
def test_a_compacted_log_keeps_its_first_base_below_its_first_record(tmp_path, name):
    src = source(name)
    part, _ = write_partition(tmp_path, ((h, e) for _s, h, e in source_entries(PartitionReader(src))),
                              RollPolicy(segment_bytes=1 << 20), source=src)
    assert part.segments[0].base_offset == src.segments[0].base_offset == 0
    assert records_of(part)[0][0] == {"compact-v2-none-0": 71, "compact-v1-gzip-0": 2}[name]


# --- the roll rules, at their edges ---

def test_segment_bytes_is_a_limit_that_may_be_reached_exactly(tmp_path):
    batches = [v2_entry(i, value_size=100) for i in range(7)]
    size = batches[0][0].size
    assert all(h.size == size for h, _ in batches)
    part, summary = write_partition(tmp_path, batches, RollPolicy(segment_bytes=3 * size), name="exact")
    assert [(base, s) for base, s, _ in segment_facts(part)] == [(0, 3 * size), (3, 3 * size), (6, size)]
    assert [s.reason for s in summary.segments] == [FIRST, SEGMENT_BYTES, SEGMENT_BYTES]
    part, _ = write_partition(tmp_path, batches, RollPolicy(segment_bytes=3 * size - 1), name="less")
    assert [b for _, _, b in segment_facts(part)] == [[0, 1], [2, 3], [4, 5], [6]]


def test_a_batch_larger_than_segment_bytes_gets_a_segment_of_its_own(tmp_path):
    small = [v2_entry(0, value_size=10), v2_entry(1, value_size=10)]
    big = v2_entry(2, value_size=5000)
    after = [v2_entry(3, value_size=10), v2_entry(4, value_size=10)]
    policy = RollPolicy(segment_bytes=1000)
    part, _ = write_partition(tmp_path, small + [big] + after, policy, name="middle")
    assert [(base, batches) for base, _, batches in segment_facts(part)] == [
        (0, [0, 1]), (2, [2]), (3, [3, 4])]
    assert segment_facts(part)[1][1] == big[0].size > 1000
    part, _ = write_partition(tmp_path, [big] + after, policy, name="first")
    assert [batches for _, _, batches in segment_facts(part)] == [[2], [3, 4]]


def test_segment_ms_is_measured_from_the_first_batch_by_record_time(tmp_path):
    ms = 60_000
    stamps = [T0, T0 + ms // 2, T0 - 5_000, T0 + ms, T0 + ms + 1, T0 + ms + 2, T0 + 3 * ms + 1]
    batches = [v2_entry(i, timestamp=t) for i, t in enumerate(stamps)]
    part, summary = write_partition(tmp_path, batches, RollPolicy(segment_ms=ms))
    # exactly segment.ms after the first batch stays; one ms more rolls; an earlier timestamp never does
    assert [b for _, _, b in segment_facts(part)] == [[0, 1, 2, 3], [4, 5], [6]]
    assert [s.reason for s in summary.segments] == [FIRST, SEGMENT_MS, SEGMENT_MS]


def test_segment_ms_never_rolls_a_segment_whose_first_batch_has_no_timestamp(tmp_path):
    batches = [v2_entry(0, timestamp=-1), v2_entry(1, timestamp=T0), v2_entry(2, timestamp=T0 + 10 ** 9)]
    part, _ = write_partition(tmp_path, batches, RollPolicy(segment_ms=1))
    assert [b for _, _, b in segment_facts(part)] == [[0, 1, 2]]


def test_offsets_that_overflow_the_int32_relative_offset_start_a_segment(tmp_path):
    batches = [v2_entry(0), v2_entry(INT32_MAX), v2_entry(INT32_MAX + 1), v2_entry(3 * INT32_MAX, 2, gap=5)]
    part, summary = write_partition(tmp_path, batches, RollPolicy())
    assert [(base, b) for base, _, b in segment_facts(part)] == [
        (0, [0, INT32_MAX]), (INT32_MAX + 1, [INT32_MAX + 1]), (3 * INT32_MAX, [3 * INT32_MAX])]
    assert [s.log.name for s in part.segments] == [
        "00000000000000000000.log", "00000000002147483648.log", "00000000006442450941.log"]
    assert [s.reason for s in summary.segments] == [FIRST, OFFSET_OVERFLOW, OFFSET_OVERFLOW]
    assert records_of(part) == [(o, T0, None, b"", []) for o in
                                (0, INT32_MAX, INT32_MAX + 1, 3 * INT32_MAX, 3 * INT32_MAX + 1)]


@pytest.mark.parametrize("max_index_bytes, stamps, per_segment", [
    # 24 bytes: 3 offset entries, 2 time entries (full at 1: the last slot is the closing entry).
    # With index.interval.bytes 0 every batch after the first is indexed (docs/format.md §6.3), so with rising
    # timestamps the second batch fills the time index.
    (24, "rising", 2),
    (24, "equal", 2),  # the first time entry needs only a timestamp above -1
    (24, "none", 4),  # no timestamps, no time entries: 3 offset entries, then full
    (36, "rising", 3),  # 4 offset entries, 3 time entries (full at 2)
    (36, "none", 5),
])
def test_a_full_index_starts_a_segment(tmp_path, max_index_bytes, stamps, per_segment):
    ts = {"rising": lambda i: T0 + i, "equal": lambda i: T0, "none": lambda i: -1}[stamps]
    batches = [v2_entry(i, timestamp=ts(i)) for i in range(13)]
    policy = RollPolicy(index_interval_bytes=0, max_index_bytes=max_index_bytes)
    part, summary = write_partition(tmp_path, batches, policy)
    expected = [list(range(i, min(i + per_segment, 13))) for i in range(0, 13, per_segment)]
    assert [b for _, _, b in segment_facts(part)] == expected
    assert {s.reason for s in summary.segments[1:]} == {INDEX_FULL}
    reader = PartitionReader(part)
    for seg in part.segments:  # what CompanionBuilder wrote fits the index sizes
        assert len(reader.offset_index(seg)) <= policy.max_offset_entries
        assert len(reader.time_index(seg)) <= policy.max_time_entries


# --- the roll rules as properties ---

@st.composite
def batch_sequences(draw):
    n = draw(st.integers(1, 60))
    offset, headers = draw(st.integers(0, 2 ** 40)), []
    ts = draw(st.integers(-1, 2 ** 41))
    for _ in range(n):
        offset += draw(st.sampled_from([1, 1, 1, 7, 2 ** 20, INT32_MAX, INT32_MAX + 1]))
        delta = draw(st.sampled_from([0, 0, 3, 100]))
        ts = draw(st.sampled_from([ts, ts + 1, ts + 999, ts - 50, -1, ts + 10 ** 6]))
        size = draw(st.integers(61, 3000))
        headers.append(BatchHeader(magic=2, base_offset=offset, last_offset=offset + delta,
                                   max_timestamp=ts, size=size))
        offset += delta
    return headers


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(headers=batch_sequences(), segment_bytes=st.integers(14, 8000), segment_ms=st.integers(1, 10 ** 6))
def test_plans_obey_the_roll_rules(headers, segment_bytes, segment_ms):
    """Kafka's conditions restated per segment (docs/format.md §12.2, the index never full at the default size):
    within a segment no batch met a roll condition, and every segment boundary had one."""
    policy = RollPolicy(segment_bytes=segment_bytes, segment_ms=segment_ms)
    plans = plan_segments(iter(headers), policy)
    assert [p.first for p in plans] == [0] + [p.stop for p in plans[:-1]] and plans[-1].stop == len(headers)

    def rolls(seg_headers, base, nxt):
        size = sum(h.size for h in seg_headers)
        first_ts = seg_headers[0].max_timestamp
        return (size + nxt.size > segment_bytes or (first_ts >= 0 and nxt.max_timestamp - first_ts > segment_ms)
                or nxt.last_offset - base > INT32_MAX)

    for k, plan in enumerate(plans):
        seg = headers[plan.first:plan.stop]
        assert plan.base_offset == seg[0].base_offset  # base = first offset: <= it, and fits int32
        assert all(h.last_offset - plan.base_offset <= INT32_MAX for h in seg)
        assert plan.size == sum(h.size for h in seg) and plan.last_offset == seg[-1].last_offset
        assert plan.size <= segment_bytes or plan.count == 1
        assert not any(rolls(seg[:j], plan.base_offset, seg[j]) for j in range(1, len(seg)))
        if k + 1 < len(plans):
            assert rolls(seg, plan.base_offset, headers[plan.stop])


def test_offsets_must_increase_and_headers_must_describe_their_bytes(tmp_path):
    planner = SegmentPlanner()
    planner.place(v2_entry(10)[0])
    with pytest.raises(DataError) as err:
        planner.place(v2_entry(10)[0])
    assert err.value.offset == 10 and "must increase" in str(err.value)
    header, entry = v2_entry(5)
    storage, path, out = publish(tmp_path)
    with out:
        writer = PartitionWriter(out, "", now_ms=NOW_MS)
        for wrong in (header.replace(base_offset=6), header.replace(size=len(entry) + 1),
                      header.replace(magic=1)):
            with pytest.raises(UsageError, match="does not describe the entry"):
                writer.append(wrong, entry)
        writer.close()


def test_a_start_offset_above_the_first_batch_is_refused():
    with pytest.raises(DataError, match="offset 10 lies below the start offset 11"):
        SegmentPlanner(start_offset=11).place(v2_entry(10)[0])


def test_a_start_offset_inside_the_first_batch_names_the_segment():
    """A log start offset inside the first batch (docs/format.md §12.1): Kafka's loading checks a
    batch's last offset against the segment's base offset, so the segment may begin there."""
    planner = SegmentPlanner(start_offset=11)
    planner.place(v2_entry(10, count=3)[0])
    assert planner.base_offset == 11


def test_a_partition_without_batches_gets_one_empty_segment(tmp_path):
    part, summary = write_partition(tmp_path, [], RollPolicy(), start_offset=500)
    assert sorted(part.files) == ["00000000000000000500.index", "00000000000000000500.log",
                                  "00000000000000000500.timeindex"]
    assert [s.size for s in part.segments] == [0]
    assert summary.log_end_offset == 500


# --- boundaries a transform asks for ---

def test_requested_rolls_keep_given_boundaries_and_empty_segments(tmp_path):
    """As the log cleaner writes (docs/format.md §14, corpus compact-*): a group's segment keeps the base
    offset of its first input segment, below its first record, and may stay empty."""
    storage, path, out = publish(tmp_path)
    size = v2_entry(0)[0].size
    with out:
        with PartitionWriter(out, "", RollPolicy(segment_bytes=3 * size), now_ms=NOW_MS) as writer:
            writer.append(*v2_entry(5))
            writer.roll()  # before the next batch, at its base offset
            writer.append(*v2_entry(8))
            writer.roll(20)  # stays empty
            writer.roll(30)
            for offset in range(34, 39):  # the roll rules still apply after a requested roll
                writer.append(*v2_entry(offset))
            with pytest.raises(UsageError, match="above the last offset written, 38"):
                writer.roll(38)
    [part] = find_partitions(storage, path)
    assert [(base, size_, batches) for base, size_, batches in segment_facts(part)] == [
        (5, size, [5]), (8, size, [8]), (20, 0, []), (30, 3 * size, [34, 35, 36]), (37, 2 * size, [37, 38])]
    assert [s.reason for s in writer.summary.segments] == [FIRST, REQUESTED, REQUESTED, REQUESTED,
                                                           SEGMENT_BYTES]
    assert part.files["00000000000000000020.index"].size == part.files["00000000000000000020.timeindex"].size == 0
    assert [r[0] for r in records_of(part)] == [5, 8, 34, 35, 36, 37, 38]


def test_a_requested_base_must_fit_the_next_batch(tmp_path):
    storage, path, out = publish(tmp_path)
    with out:
        writer = PartitionWriter(out, "", now_ms=NOW_MS)
        writer.append(*v2_entry(1))
        writer.roll(10)
        with pytest.raises(UsageError, match="cannot open the segment requested at base offset 10"):
            writer.append(*v2_entry(9))
        writer.roll(11)
        with pytest.raises(UsageError, match="above the current segment's, 11"):
            writer.roll(11)
        writer.close()


# --- modification times ---

def test_a_segment_takes_the_newest_mtime_of_its_batches(tmp_path):
    storage, path, out = publish(tmp_path)
    with out:
        with PartitionWriter(out, "", RollPolicy(segment_bytes=2 * v2_entry(0)[0].size), now_ms=NOW_MS) as w:
            for i, mtime in enumerate([T0 + 5, T0 + 9, T0 + 1, None]):
                w.append(*v2_entry(i), mtime_ms=mtime)
    [part] = find_partitions(storage, path)
    assert [s.log.mtime_ms for s in part.segments] == [T0 + 9, T0 + 1]
    assert [part.files[f"{s.base_offset:020d}.{k}"].mtime_ms for s in part.segments
            for k in ("index", "timeindex")] == [T0 + 9, T0 + 9, T0 + 1, T0 + 1]


# --- memory stays bounded ---

def test_memory_stays_bounded_while_writing_far_more_than_it(tmp_path):
    header, template = v2_entry(0, value_size=256 * 1024)
    total = 0
    storage, path, out = publish(tmp_path)
    tracemalloc.start()
    try:
        with out:
            with PartitionWriter(out, "", RollPolicy(segment_bytes=4 << 20), now_ms=NOW_MS) as writer:
                for i in range(160):  # 40 MiB; baseOffset is not covered by the CRC
                    entry = struct.pack(">q", i) + template[8:]
                    writer.append(header.replace(base_offset=i, last_offset=i), entry)
                    total += len(entry)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert sum(f.size for f in storage.walk(path) if f.name.endswith(".log")) == total
    assert peak < 4 << 20 < total / 10


# --- planning and writing are separable (parallel writers) ---

def _write_planned(target, plan, src_url, entries_of_plan):
    storage, _ = open_storage(src_url)
    files = target.files()
    entries = [(h, bytes(storage.read(path, h.position, h.position + h.size)))
               for path, h in entries_of_plan]
    return write_segment(files, "", plan, entries), files.records


@pytest.mark.parametrize("name", ["txn-v2-none-0", "v1-gzip-0"])
def test_plan_then_write_segments_in_parallel_equals_the_sequential_writer(tmp_path, name):
    src = source(name)
    located = [(seg.log.path, h) for seg, h, _e in source_entries(PartitionReader(src))]
    policy = RollPolicy(segment_bytes=20_000, index_interval_bytes=1024)
    plans = pickle.loads(pickle.dumps(plan_segments([h for _, h in located], policy, 0)))
    storage, path = open_storage(str(tmp_path / "parallel"))
    with StagedOutput(storage, path) as out:
        target = out.target()
        with ProcessPoolExecutor(2) as pool:
            results = list(pool.map(_write_planned, [target] * len(plans), plans,
                                    [str(REALKAFKA / name)] * len(plans),
                                    [located[p.first:p.stop] for p in plans]))
        for _segment, records in results:
            out.adopt(records.values())
        write_companions(out.staged, "", [s for s, _ in results], policy, source=src, now_ms=NOW_MS)
    sequential, _ = write_partition(tmp_path, ((h, e) for _s, h, e in source_entries(PartitionReader(src))),
                                    policy, name="sequential", source=src, start_offset=0)
    files = sorted(os.listdir(path))
    assert files == sorted(os.listdir(sequential.path)) and len(files) > 10
    for f in files:
        assert Path(path, f).read_bytes() == Path(sequential.path, f).read_bytes(), f


def test_write_segment_refuses_batches_other_than_planned(tmp_path):
    assert plan_segments([]) == []
    batches = [v2_entry(i) for i in range(3)]
    [plan] = plan_segments([h for h, _ in batches])
    storage, path, out = publish(tmp_path)
    with pytest.raises(UsageError, match="planned with 3 batches"):
        with out:
            write_segment(out.staged, "", plan, batches[:2])
    assert not os.path.exists(path)


def test_bad_data_part_way_publishes_nothing(tmp_path):
    """A DataError in the middle of a partition (here: offsets going backwards after a few
    segments) stops the run with exit 65 and leaves no destination and no staging behind."""
    batches = [v2_entry(i, value_size=200) for i in range(10)] + [v2_entry(3)]
    storage, path, out = publish(tmp_path)
    with pytest.raises(DataError) as err:
        with out:
            with PartitionWriter(out, "", RollPolicy(segment_bytes=600), now_ms=NOW_MS) as writer:
                for header, entry in batches:
                    writer.append(header, entry)
    assert err.value.exit_code == 65 and err.value.offset == 3
    assert os.listdir(tmp_path) == []
