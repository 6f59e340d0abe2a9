"""Seeks: `kfmt cat --from-offset N` / `--from-timestamp MS` return what a full read filtered the same
way returns, and reach their target through the indexes without reading earlier segments.

The full read is the Java consumer's (`records.jsonl.gz`); `--from-offset N` must give its records
with offset >= N, `--from-timestamp MS` its records from the first offset whose timestamp is >= MS
(Kafka's timestamp lookup, FileRecords.searchForTimestamp, also stops at control records, whose
offsets and times come from kafka-dump-log's deep listing).
"""
from __future__ import annotations

import json
import random
import shutil
import struct
import tarfile
from collections import Counter
from pathlib import Path

import pytest
from support.cli import run_kfmt
from support.corpus import REAL_DIRS, REALKAFKA
from support.corpus_truth import consumer_records, control_records, first_offset_at_or_after, kafka_listing

from kfmt.default_plugins.storage.local import LocalStorage
from kfmt.partition.layout import find_partitions
from kfmt.partition.reader import PartitionReader
from kfmt.storage.staging import StagedOutput
from kfmt.storage.store import open_storage
from kfmt.write.planner import RollPolicy
from kfmt.write.segment_writer import source_entries
from kfmt.write.writer import PartitionWriter

WINDOW = 25  # records compared after most seeks (--max-records); some seeks compare everything


def cat_json(path, *args) -> list[dict]:
    result = run_kfmt("cat", path, "--format", "json", *args)
    assert result.code == 0, result.err
    return [json.loads(line) for line in result.lines]


def from_offset(name: str, n: int, kind: str = "records") -> list[dict]:
    return [r for r in consumer_records(name, kind) if r["offset"] >= n]


def from_timestamp(name: str, ms: int, kind: str = "records") -> list[dict]:
    first = first_offset_at_or_after(name, ms)
    return [] if first is None else from_offset(name, first, kind)


def interesting_offsets(name: str) -> list[int]:
    """First and last, the log start and end and beyond, segment base offsets, offsets inside
    compressed batches (legacy wrappers and v2) and multi-record batches, offsets in compaction
    gaps, a random sample."""
    rng = random.Random(name)
    records = consumer_records(name)
    present = [r["offset"] for r in records]
    listing = kafka_listing(name)
    end = listing[-1].last_offset + 1
    picks = {present[0], present[-1], present[0] - 1, 0, end, end + 1000}
    bases = sorted(int(p.name.split(".")[0]) for p in (REALKAFKA / name).glob("*.log"))
    picks |= set(rng.sample(bases, min(6, len(bases))))
    inside, previous_last = [], -1
    for e in listing:
        first = previous_last + 1 if e.count is None else e.offset  # a wrapper's first is implied
        if e.last_offset - first >= 2:  # a batch of several records: an offset strictly inside
            inside.append((first + e.last_offset) // 2)
        previous_last = e.last_offset
    picks |= set(rng.sample(inside, min(6, len(inside))))
    gaps = sorted(set(range(present[0], present[-1])) - set(present))
    picks |= set(rng.sample(gaps, min(6, len(gaps))))  # offsets compaction removed (compact-* only)
    picks |= set(rng.sample(present, min(6, len(present))))
    return sorted(picks)


def interesting_timestamps(name: str) -> list[int]:
    """First, last, smallest and largest record timestamps, their neighbours, out-of-order ones (earlier
    than a predecessor), values between records, before everything and after everything."""
    ts = [r["timestamp"] for r in consumer_records(name)]
    picks = {ts[0], ts[-1], min(ts), max(ts), max(ts) + 1, min(ts) - 1, 0}
    running = -1
    out_of_order = []
    for t in ts:
        if t < running:
            out_of_order.append(t)
        running = max(running, t)
    picks |= set(out_of_order[:6]) | {t + 1 for t in out_of_order[:3]}
    picks |= {t for t, _ in control_records(name)}
    picks |= set(random.Random(name).sample(ts, min(6, len(ts))))
    return sorted(picks)


# --- the same records as a filtered full read ------------------------------------------------------

@pytest.mark.parametrize("name", REAL_DIRS)
def test_from_offset_equals_filtered_full_read(name):
    for i, n in enumerate(interesting_offsets(name)):
        expected = from_offset(name, n)
        if i % 4 == 0:  # every record from the target to the end
            assert cat_json(REALKAFKA / name, "--from-offset", n) == expected, n
        else:
            assert cat_json(REALKAFKA / name, "--from-offset", n, "--max-records", WINDOW) == expected[:WINDOW], n


@pytest.mark.parametrize("name", REAL_DIRS)
def test_from_timestamp_equals_filtered_full_read(name):
    for i, ms in enumerate(interesting_timestamps(name)):
        expected = from_timestamp(name, ms)
        if i % 4 == 0:
            assert cat_json(REALKAFKA / name, "--from-timestamp", ms) == expected, ms
        else:
            assert cat_json(REALKAFKA / name, "--from-timestamp", ms, "--max-records", WINDOW) == \
                expected[:WINDOW], ms


@pytest.mark.parametrize("name", ["v1-logappendtime-gzip-0", "v2-logappendtime-none-0"])
def test_log_append_time_seeks_use_the_append_time(name):
    records = consumer_records(name)
    assert all(r["timestampType"] == "LogAppendTime" for r in records)
    for r in records[::37]:
        assert cat_json(REALKAFKA / name, "--from-timestamp", r["timestamp"], "--max-records", 3) == \
            from_timestamp(name, r["timestamp"])[:3]


@pytest.mark.parametrize("k", [0, 1, 7, 1000])
def test_max_records_after_a_seek(k):
    assert cat_json(REALKAFKA / "v1-snappy-0", "--from-offset", 123, "--max-records", k) == \
        from_offset("v1-snappy-0", 123)[:k]
    ms = consumer_records("v2-gzip-0")[250]["timestamp"]
    assert cat_json(REALKAFKA / "v2-gzip-0", "--from-timestamp", ms, "--max-records", k) == \
        from_timestamp("v2-gzip-0", ms)[:k]


def test_read_committed_with_seeks():
    name = "txn-v2-none-0"
    committed = consumer_records(name, "records.read_committed")
    markers = [o for o, _ in control_records(name)]
    offsets = sorted({0, 1, 61, 62, 63, 101, 102, 103, 150, 175, 176, 177, 217, 218, 500}
                     | {m + d for m in markers for d in (-1, 0, 1)})
    for n in offsets:
        assert cat_json(REALKAFKA / name, "--isolation", "read_committed", "--from-offset", n) == \
            from_offset(name, n, "records.read_committed"), n
    for ms in interesting_timestamps(name):
        assert cat_json(REALKAFKA / name, "--isolation", "read_committed", "--from-timestamp", ms) == \
            from_timestamp(name, ms, "records.read_committed"), ms
    assert committed  # the corpus has committed records to compare


def test_seek_in_a_log_directory_applies_to_every_partition(tmp_path):
    logdir = tmp_path / "logdir"
    logdir.mkdir()
    for name in ("v2-zstd-0", "v1-gzip-0"):
        shutil.copytree(REALKAFKA / name, logdir / name)
    got = cat_json(logdir, "--from-offset", 300, "--max-records", 5)
    expected = []
    for name, topic in (("v1-gzip-0", "v1-gzip"), ("v2-zstd-0", "v2-zstd")):
        expected += [{**r, "topic": topic, "partition": 0} for r in from_offset(name, 300)[:5]]
    assert got == expected


# --- seeks do not read earlier segments ------------------------------------------------------------

class RecordingStorage(LocalStorage):
    """Local storage that remembers how many bytes of each file it handed out."""

    def __init__(self):
        super().__init__()
        self.by_path: Counter = Counter()

    def _read(self, path, start, end):
        data = super()._read(path, start, end)
        self.by_path[path] += len(data)
        return data

    def _map(self, path):
        data = super()._map(path)
        self.by_path[path] += len(data)
        return data


def open_reader(path: Path) -> tuple[PartitionReader, RecordingStorage]:
    storage = RecordingStorage()
    (part,) = find_partitions(storage, str(path))
    return PartitionReader(part), storage


def read_offsets(reader: PartitionReader, **seek) -> list[int]:
    out = []
    for _seg, batch, skip in reader.batches(**seek):
        if not batch.header.is_control:
            out += batch.records.column(0).to_pylist()[skip:]
    return out


def logs_before(path: Path, offset: int) -> list[Path]:
    """The .log files of the segments that lie wholly before `offset` (by their file names)."""
    logs = sorted(path.glob("*.log"))
    bases = [int(p.name.split(".")[0]) for p in logs]
    return [log for log, following in zip(logs, bases[1:]) if following <= offset]


def index_position(path: Path, segment_base: int, target: int) -> int:
    """Kafka's offset-index lookup (docs/format.md §6.5) done independently: the largest entry <= target."""
    index = path / f"{segment_base:020d}.index"
    data = index.read_bytes() if index.exists() else b""
    best = 0
    for slot, (rel, pos) in enumerate(struct.iter_unpack(">ii", data[:len(data) // 8 * 8])):
        if slot and rel == 0:  # a preallocated tail
            break
        if segment_base + rel <= target:
            best = pos
    return best


def assert_untouched(storage: RecordingStorage, logs: list[Path]) -> None:
    assert sum(storage.by_path.values()) == storage.bytes_read
    touched = {p: storage.by_path[str(p)] for p in logs if storage.by_path[str(p)]}
    assert not touched, f"read earlier segments: {touched}"


@pytest.mark.parametrize("name", REAL_DIRS)
def test_offset_seek_reads_no_earlier_segment(name):
    path = REALKAFKA / name
    present = [r["offset"] for r in consumer_records(name)]
    log_end = kafka_listing(name)[-1].last_offset + 1
    for n in (present[len(present) // 2], present[-1], present[-1] - 3, log_end):
        reader, storage = open_reader(path)
        assert read_offsets(reader, from_offset=n) == [o for o in present if o >= n]
        assert_untouched(storage, logs_before(path, n))
        # and in the target segment only the bytes from the index's position on
        logs = sorted(path.glob("*.log"))
        target = [p for p in logs if int(p.name.split(".")[0]) <= n][-1]
        start = index_position(path, int(target.name.split(".")[0]), n)
        assert storage.by_path[str(target)] <= target.stat().st_size - start + 17


TIMESTAMPED = [d for d in REAL_DIRS if not d.startswith("v0-")]  # v0 has no timestamps to seek to


@pytest.mark.parametrize("name", TIMESTAMPED)
def test_timestamp_seek_reads_no_earlier_segment(name):
    path = REALKAFKA / name
    records = consumer_records(name)
    for r in (records[len(records) // 2], records[-1], records[len(records) * 3 // 4]):
        first = first_offset_at_or_after(name, r["timestamp"])
        reader, storage = open_reader(path)
        assert read_offsets(reader, from_timestamp=r["timestamp"]) == \
            [x["offset"] for x in records if x["offset"] >= first]
        assert_untouched(storage, logs_before(path, first))


def test_v0_has_nothing_at_any_timestamp():
    for name in (d for d in REAL_DIRS if d.startswith("v0-")):
        assert cat_json(REALKAFKA / name, "--from-timestamp", 0) == []
        assert len(cat_json(REALKAFKA / name, "--from-timestamp", -1)) == len(consumer_records(name))


# --- missing, corrupt and stale indexes ------------------------------------------------------------

def damaged_copy(tmp_path: Path, name: str, segment_base: int, how: str) -> Path:
    """A copy of a partition with one segment's index files damaged."""
    dst = tmp_path / name
    shutil.copytree(REALKAFKA / name, dst, copy_function=shutil.copyfile)
    index = dst / f"{segment_base:020d}.index"
    timeindex = dst / f"{segment_base:020d}.timeindex"
    later = sorted(dst.glob("*.index"))[-1]  # the last segment's, stale for any other segment
    rng = random.Random(how)
    if how == "delete-index":
        index.unlink()
    elif how == "delete-timeindex":
        timeindex.unlink()
    elif how == "delete-both":
        index.unlink()
        timeindex.unlink()
    elif how == "garbage":
        index.write_bytes(rng.randbytes(64))
        timeindex.write_bytes(rng.randbytes(96))
    elif how == "zeroed":
        index.write_bytes(bytes(index.stat().st_size or 80))
        timeindex.write_bytes(bytes(timeindex.stat().st_size or 120))
    elif how == "partial-entries":
        index.write_bytes(index.read_bytes() + b"\x00\x00\x00")
        timeindex.write_bytes(timeindex.read_bytes()[:-5])
    elif how == "past-the-end":  # positions beyond the .log, offsets beyond the segment
        index.write_bytes(b"".join((i + 1).to_bytes(4, "big") + (10**6 + i).to_bytes(4, "big") for i in range(5)))
        timeindex.write_bytes(b"".join((1700000000000 + i).to_bytes(8, "big") + (2**30 + i).to_bytes(4, "big")
                                       for i in range(5)))
    elif how == "decreasing":
        entries = [(1800000000000 - i, i) for i in range(4)]
        timeindex.write_bytes(b"".join(t.to_bytes(8, "big") + o.to_bytes(4, "big") for t, o in entries))
    elif how == "stale-from-another-segment":
        index.write_bytes(later.read_bytes() if later != index else rng.randbytes(64))
        timeindex.write_bytes(later.with_suffix(".timeindex").read_bytes())
    else:
        raise AssertionError(how)
    return dst


DAMAGE = ["delete-index", "delete-timeindex", "delete-both", "garbage", "zeroed", "partial-entries",
          "past-the-end", "decreasing", "stale-from-another-segment"]


def middle_segment(name: str) -> tuple[int, list[dict]]:
    """A segment in the middle of a partition and the consumer's records in it."""
    bases = sorted(int(p.name.split(".")[0]) for p in (REALKAFKA / name).glob("*.log"))
    base, following = bases[len(bases) // 2], bases[len(bases) // 2 + 1]
    inside = [r for r in consumer_records(name) if base <= r["offset"] < following]
    return base, inside


@pytest.mark.parametrize("how", DAMAGE)
@pytest.mark.parametrize("name", ["v2-none-0", "v1-none-0", "v1-gzip-0", "v2-lz4-0",
                                  "compact-v2-none-0"])
def test_damaged_indexes_cost_one_segment_scan_and_change_nothing(tmp_path, name, how):
    base, inside = middle_segment(name)
    path = damaged_copy(tmp_path, name, base, how)
    targets = [inside[len(inside) // 2], inside[-1]]
    for r in targets:
        n = r["offset"]
        assert cat_json(path, "--from-offset", n) == from_offset(name, n)
        reader, storage = open_reader(path)
        read_offsets(reader, from_offset=n)
        assert_untouched(storage, logs_before(path, n))
    for r in targets:
        ms = r["timestamp"]
        assert cat_json(path, "--from-timestamp", ms) == from_timestamp(name, ms)
        reader, storage = open_reader(path)
        read_offsets(reader, from_timestamp=ms)
        # only the damaged segment may be scanned besides the target's
        first = first_offset_at_or_after(name, ms)
        assert_untouched(storage, [p for p in logs_before(path, first)
                                   if int(p.name.split(".")[0]) != base])


def test_damaged_index_of_an_earlier_segment_is_scanned_only_there(tmp_path):
    name = "v2-zstd-0"
    base, inside = middle_segment(name)
    path = damaged_copy(tmp_path, name, base, "garbage")
    last = consumer_records(name)[-1]
    reader, storage = open_reader(path)
    assert read_offsets(reader, from_timestamp=last["timestamp"])[0] == \
        first_offset_at_or_after(name, last["timestamp"])
    earlier = logs_before(path, first_offset_at_or_after(name, last["timestamp"]))
    damaged = path / f"{base:020d}.log"
    assert damaged in earlier and storage.by_path[str(damaged)] > 0  # the one segment scanned
    assert_untouched(storage, [p for p in earlier if p != damaged])


# --- a copy of a running broker's partition ------------------------------------------------------

@pytest.fixture(scope="module")
def running_copy(tmp_path_factory) -> Path:
    archive = REALKAFKA / "_running-copies" / "v2-zstd-0.running.tar.gz"
    dst = tmp_path_factory.mktemp("running")
    with tarfile.open(archive) as tar:
        tar.extractall(dst, filter="data")
    return dst / "v2-zstd-0"


def test_running_copy_active_segment_is_searched_past_its_last_index_entry(running_copy):
    # The active segment's .index/.timeindex are preallocated (zero-filled) and its time index has
    # no final entry yet: records newer than its last entry must still be found (docs/format.md §6.3, §6.4).
    name = "v2-zstd-0"
    records = consumer_records(name)
    for r in records[-12:] + records[::50]:
        assert cat_json(running_copy, "--from-timestamp", r["timestamp"]) == from_timestamp(name, r["timestamp"])
        assert cat_json(running_copy, "--from-offset", r["offset"]) == from_offset(name, r["offset"])
    assert cat_json(running_copy, "--from-timestamp", max(r["timestamp"] for r in records) + 1) == []


# --- directories kfmt wrote ----------------------------------------------------------------------

WRITTEN = ["v2-none-0", "v1-gzip-0", "v0-lz4-0", "v1-logappendtime-gzip-0", "compact-v2-none-0",
           "txn-v2-none-0", "v2-zstd-0"]


def rewritten(tmp_path: Path, name: str, policy: RollPolicy) -> Path:
    """The corpus partition's batches, as stored, written again by kfmt's PartitionWriter with
    another segmentation: new segment files and kfmt-built indexes."""
    src_storage, src_path = open_storage(str(REALKAFKA / name))
    (src,) = find_partitions(src_storage, src_path)
    storage, path = open_storage(str(tmp_path / name))
    with StagedOutput(storage, path) as out:
        with PartitionWriter(out, "", policy, source=src, now_ms=1_795_000_000_000) as writer:
            for _seg, header, entry in source_entries(PartitionReader(src)):
                writer.append(header, entry)
    return tmp_path / name


def check_seeks(path: Path, name: str) -> None:
    records = consumer_records(name)
    for r in records[::41] + records[-3:]:
        n, ms = r["offset"], r["timestamp"]
        assert cat_json(path, "--from-offset", n, "--max-records", WINDOW) == from_offset(name, n)[:WINDOW]
        assert cat_json(path, "--from-timestamp", ms, "--max-records", WINDOW) == \
            from_timestamp(name, ms)[:WINDOW]
        reader, storage = open_reader(path)
        assert read_offsets(reader, from_offset=n) == [x["offset"] for x in records if x["offset"] >= n]
        assert_untouched(storage, logs_before(path, n))
        if not name.startswith("v0-"):
            first = first_offset_at_or_after(name, ms)
            reader, storage = open_reader(path)
            assert read_offsets(reader, from_timestamp=ms) == [x["offset"] for x in records if x["offset"] >= first]
            assert_untouched(storage, logs_before(path, first))


@pytest.mark.parametrize("name", WRITTEN)
def test_seeks_in_a_partition_kfmt_resegmented(tmp_path, name):
    path = rewritten(tmp_path, name, RollPolicy(segment_bytes=3000, index_interval_bytes=300))
    written, original = ({p.name for p in d.glob("*.log")} for d in (path, REALKAFKA / name))
    assert len(written) > 3 and written != original  # other segments than the broker's
    assert any(p.stat().st_size for p in path.glob("*.index"))  # the seeks have indexes to use
    check_seeks(path, name)


@pytest.mark.parametrize("name", WRITTEN)
def test_seeks_in_a_partition_kfmt_reindexed(tmp_path, name):
    result = run_kfmt("reindex", REALKAFKA / name, tmp_path / name, "--index-interval-bytes", 256,
                      "--no-progress")
    assert result.code == 0, result.err
    check_seeks(tmp_path / name, name)
