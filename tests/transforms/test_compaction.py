"""kfmt compact (kfmt.transforms.cleanup.compaction) against Kafka's own log cleaner.

Independent truth:
* the realkafka corpus's compaction oracle: the uncompacted twins of the two compacted topics,
  compacted up to the broker cleaner's offset, must give exactly the records the broker's cleaner left
  (`kept.jsonl.gz`: offset, key, value, headers), in the segments it left, batch for batch: the v2
  batches byte for byte (up to the producer id each broker assigned), the v1 wrappers byte for byte
  with --keep-format (Kafka 3.6 kept their magic); the cleaner's own statistics (messages read and
  written, `_cleaner-stats.txt`) must match;
* the broker's consumers: a compacted transactional topic keeps what a read_committed consumer saw
  (the latest record of each key) and nothing of the aborted transactions;
* the reference's worked example of an empty batch header (docs/format.md §4.7), kafka-python as a peer decoder of
  rewritten compressed batches, and a dict as the model of the bounded offset map.
Expectations for the rules' edges (map full, tombstone and marker horizons, legacy tombstones, empty
batches kept for active producers) are derived from docs/format.md §14 / Kafka's cleaner by hand.
"""
from __future__ import annotations

import base64
import gzip
import json
import os
import re
import shutil
import types
from pathlib import Path

import cramjam
import kafka.codec
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.memory_records import MemoryRecords
from support.cli import run_kfmt
from support.corpus import REALKAFKA
from support.corpus_truth import consumer_records

from kfmt.format.model import Batch, BatchHeader, TimestampType, make_records
from kfmt.format.wire import crc32c
from kfmt.partition.layout import find_partitions
from kfmt.partition.reader import PartitionReader
from kfmt.plugin import registry
from kfmt.storage.staging import StagedOutput
from kfmt.storage.store import open_storage
from kfmt.format.offset_map import BYTES_PER_ENTRY, OffsetMap, key_hashes
from kfmt.transforms.cleanup.compaction.rewrite import empty_batch
from kfmt.write.planner import RollPolicy
from kfmt.write.writer import PartitionWriter

DAY = 86_400_000
COMPACTED = ["compact-v2-none", "compact-v1-gzip"]
COMPANION = re.compile(r"\.(index|timeindex|txnindex|snapshot)$|^leader-epoch-checkpoint$")


@pytest.fixture(autouse=True)
def snappy_for_kafka_python(monkeypatch):
    """python-snappy's raw-block API, served by cramjam, so kafka-python can run its xerial code."""
    if not kafka.codec.has_snappy():
        monkeypatch.setattr(kafka.codec, "snappy", types.SimpleNamespace(
            compress=lambda data: bytes(cramjam.snappy.compress_raw(bytes(data))),
            decompress=lambda data: bytes(cramjam.snappy.decompress_raw(bytes(data)))))


def compact(src, dst, *args):
    return run_kfmt("compact", src, dst, "--master", "inprocess", "--no-progress", *args)


def oracle(name: str) -> dict:
    return json.loads((REALKAFKA / f"{name}-0.truth" / "cleaner.json").read_text())


def oracle_arguments(name: str) -> list:
    """The broker cleaner's range and clock, and the topic's segment.bytes."""
    o = oracle(name)
    now = o["cleaner_current_time_ms"][0] if o["cleaner_current_time_ms"] else 1_795_333_586_455
    return ["--clean-until", o["cleaned_until"], "--now", now, "--segment-bytes", 8192,
            "--delete-retention-ms", o["delete_retention_ms"]]


def kept_truth(name: str) -> list[dict]:
    with gzip.open(REALKAFKA / f"{name}-0.truth" / "kept.jsonl.gz", "rt") as f:
        return [json.loads(line) for line in f]


def read_back(directory: Path) -> list[dict]:
    """What a consumer reads, as `kfmt cat --format json` prints it."""
    result = run_kfmt("cat", directory, "--format", "json")
    assert result.code == 0, result.err
    return [json.loads(line) for line in result.lines]


def kept_fields(rows) -> list[tuple]:
    return [(r["offset"], r["key"], r["value"], [(h["key"], h["value"]) for h in r["headers"]]) for r in rows]


def entries(directory: Path) -> list[tuple[int, BatchHeader, bytes]]:
    """(segment base, header, bytes) of every batch of a partition directory."""
    storage, path = open_storage(str(directory))
    [part] = find_partitions(storage, path)
    reader = PartitionReader(part)
    out = []
    for seg in part.segments:
        data = reader.data(seg)
        for header in reader.frames(seg):
            start = header.position - data.base
            out.append((seg.base_offset, header, bytes(data.buf[start:start + header.size])))
    return out


def companions(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in directory.iterdir() if COMPANION.search(p.name)}


def segment_bases(directory: Path) -> list[int]:
    return sorted(int(p.name[:20]) for p in directory.glob("*.log"))


def report_entry(dst: Path) -> dict:
    return json.loads((dst / "kfmt-report.json").read_text())["partitions"][0]


def with_producer(entry: bytes, producer_id: int) -> bytes:
    """A v2 batch with another producer id (bytes 43-50) and its CRC-32C recomputed."""
    data = bytearray(entry)
    data[43:51] = producer_id.to_bytes(8, "big", signed=True)
    data[17:21] = crc32c(bytes(data[21:])).to_bytes(4, "big")
    return bytes(data)


# --- the compaction oracle ---

@pytest.mark.parametrize("name,mode", [("compact-v2-none", ()), ("compact-v1-gzip", ("--keep-format",)),
                                       ("compact-v1-gzip", ())], ids=["v2", "v1-kafka3", "v1-kafka4"])
def test_compacting_the_twin_gives_what_the_brokers_cleaner_left(name, mode, tmp_path):
    dst = tmp_path / "out"
    result = compact(REALKAFKA / f"{name}-twin-0", dst, *oracle_arguments(name), *mode)
    assert result.code == 0, result.err
    assert kept_fields(read_back(dst)) == kept_fields(kept_truth(name))
    # the same segments, empty ones included
    assert segment_bases(dst) == segment_bases(REALKAFKA / f"{name}-0")
    empty = lambda d: sorted(p.name for p in d.glob("*.log") if p.stat().st_size == 0)  # noqa: E731
    assert empty(dst) == empty(REALKAFKA / f"{name}-0")
    # timestamps too (the consumer of the compacted topic read them)
    assert [(r["offset"], r["timestamp"]) for r in read_back(dst)] == \
           [(r["offset"], r["timestamp"]) for r in consumer_records(f"{name}-0")]
    # the cleaner's own count: "Start size: ... (N messages)", "End size: ... (M messages)"
    stats = (REALKAFKA / "_cleaner-stats.txt").read_text()
    section = stats[stats.index(f"cleaned log {name}-0"):]
    start, end = map(int, re.findall(r"\((\d+) messages\)", section)[:2])
    entry = report_entry(dst)
    assert (entry["records_read"], entry["records_written"]) == (start, end)
    assert entry["cleaned_until"] == oracle(name)["cleaned_until"]
    assert entry["removed"]["records"] == start - end


def test_compacted_v2_batches_are_the_brokers_bytes(tmp_path):
    """Batch for batch: base and last offsets kept, sequence numbers, the delete horizon stamped
    into the base timestamp (flag 0x40) of exactly the batches that keep a tombstone. The brokers
    gave the twin's producer another id; with the compacted log's id the bytes are identical."""
    name = "compact-v2-none"
    dst = tmp_path / "out"
    assert compact(REALKAFKA / f"{name}-twin-0", dst, *oracle_arguments(name)).code == 0
    ours, brokers = entries(dst), entries(REALKAFKA / f"{name}-0")
    assert len(ours) == len(brokers) == 29
    for (seg, header, data), (broker_seg, broker_header, broker_data) in zip(ours, brokers):
        assert seg == broker_seg
        assert with_producer(data, broker_header.producer_id) == broker_data, header.base_offset
    horizons = {h.delete_horizon_ms for _, h, _ in ours if h.has_delete_horizon}
    assert horizons == set(oracle(name)["v2_delete_horizon_ms"])
    assert sum(h.has_delete_horizon for _, h, _ in ours) == 5


def test_compacted_v1_log_with_keep_format_is_byte_identical(tmp_path):
    name = "compact-v1-gzip"
    dst = tmp_path / "out"
    assert compact(REALKAFKA / f"{name}-twin-0", dst, *oracle_arguments(name), "--keep-format").code == 0
    for log in (REALKAFKA / f"{name}-0").glob("*.log"):
        assert (dst / log.name).read_bytes() == log.read_bytes(), log.name


def test_kafka4_converts_every_cleaned_legacy_batch_to_v2(tmp_path):
    """Kafka 4.0's cleaner (KAFKA-13093): one v2 batch per cleaned wrapper, offsets of the kept
    records, the wrapper's codec, no producer, leader epoch -1, a delete horizon where a tombstone
    stays; what lies beyond the cleaned range is left as it was."""
    name = "compact-v1-gzip"
    o = oracle(name)
    now = 1_795_333_586_455
    dst = tmp_path / "out"
    assert compact(REALKAFKA / f"{name}-twin-0", dst, *oracle_arguments(name), "--now", now).code == 0
    kept = {r["offset"]: r for r in kept_truth(name)}
    twin_tail = [e for e in entries(REALKAFKA / f"{name}-twin-0") if e[1].last_offset >= o["cleaned_until"]]
    fmt = registry.get().format_for(2)
    for seg, header, data in entries(dst):
        if header.last_offset >= o["cleaned_until"]:
            continue
        assert header.magic == 2 and header.compression == 1
        assert (header.producer_id, header.producer_epoch, header.base_sequence,
                header.partition_leader_epoch) == (-1, -1, -1, -1)
        batch = fmt.decode(memoryview(data), header)
        offsets = batch.records.column(0).to_pylist()
        assert (header.base_offset, header.last_offset) == (offsets[0], offsets[-1])
        assert all(o_ in kept for o_ in offsets)
        has_tombstone = any(v is None for v in batch.records.column(3).to_pylist())
        assert header.has_delete_horizon == has_tombstone
        if has_tombstone:
            assert header.delete_horizon_ms == now + DAY
    assert [e[2] for e in entries(dst) if e[1].last_offset >= o["cleaned_until"]] == [e[2] for e in twin_tail]


@pytest.mark.parametrize("name,mode", [("compact-v2-none", ()), ("compact-v1-gzip", ()),
                                       ("compact-v1-gzip", ("--keep-format",))])
def test_compacted_output_verifies_and_reindexes_the_same(name, mode, tmp_path):
    args = oracle_arguments(name)
    dst = tmp_path / "out"
    assert compact(REALKAFKA / f"{name}-twin-0", dst, *args, *mode).code == 0
    verify = run_kfmt("verify", dst, "--deep")
    assert verify.code == 0, verify.out
    now = args[args.index("--now") + 1]
    again = tmp_path / "again"
    result = run_kfmt("reindex", dst, again, "--no-progress", "--now", now)
    assert result.code == 0, result.err
    assert companions(again) == companions(dst)


def test_kafka_python_reads_rewritten_compressed_batches(tmp_path):
    """Every codec's rewritten batches, read by a peer decoder."""
    for name in ["v2-gzip-0", "v2-snappy-0", "v2-lz4-0", "v2-zstd-0"]:
        dst = tmp_path / name
        assert compact(REALKAFKA / name, dst, "--now", 1_795_000_000_000).code == 0
        ours = [(r["offset"], r["key"], r["value"]) for r in read_back(dst)]
        peer = []
        for log in sorted(dst.glob("*.log")):
            for batch in MemoryRecords(log.read_bytes()):
                assert batch.validate_crc()
                peer += [(r.offset, b64(r.key), b64(r.value)) for r in batch]
        assert peer == ours
        # and the records kept are the latest of each key below the active segment, all at or after it
        active = segment_bases(REALKAFKA / name)[-1]
        truth = consumer_records(name)
        latest = {r["key"]: r["offset"] for r in truth if r["offset"] < active and r["key"] is not None}
        expected = [(r["offset"], r["key"], r["value"]) for r in truth
                    if r["offset"] >= active or (r["key"] is not None and latest[r["key"]] == r["offset"])]
        assert ours == expected, name


@pytest.mark.parametrize("mode", [(), ("--keep-format",)], ids=["kafka4", "kafka3"])
@pytest.mark.parametrize("name", ["v0-none-0", "v0-snappy-0", "v1-lz4-0", "v1-logappendtime-gzip-0"])
def test_legacy_logs_compact_to_the_latest_record_of_each_key(name, mode, tmp_path):
    """v0/v1 logs (uncompressed messages, compressed wrappers, LogAppendTime wrappers): the records
    kept are the broker consumer's latest of each key below the active segment; Kafka 4.0 writes
    every cleaned batch as v2 (v0 as CreateTime -1, LogAppendTime wrappers as LogAppendTime batches
    at the wrapper's time), Kafka 3.x keeps the magic."""
    dst = tmp_path / "out"
    result = compact(REALKAFKA / name, dst, "--now", 1_795_000_000_000, "--segment-bytes", 8192, *mode)
    assert result.code == 0, result.err
    active = segment_bases(REALKAFKA / name)[-1]
    truth = consumer_records(name)
    latest = {r["key"]: r["offset"] for r in truth if r["offset"] < active and r["key"] is not None}
    expected = [r for r in truth if r["offset"] >= active
                or (r["key"] is not None and latest[r["key"]] == r["offset"])]
    got = read_back(dst)
    assert [(r["offset"], r["timestamp"], r["key"], r["value"]) for r in got] == \
           [(r["offset"], r["timestamp"], r["key"], r["value"]) for r in expected]
    source_magic = entries(REALKAFKA / name)[0][1].magic
    for _, header, _ in entries(dst):
        if header.last_offset < active:
            assert header.magic == (source_magic if mode else 2)
    if "logappendtime" in name:
        types = {"LogAppendTime"}
    elif source_magic == 1:
        types = {"CreateTime"}
    else:  # v0 written as v2 is CreateTime -1; the active segment stays v0
        types = {"NoTimestampType"} if mode else {"NoTimestampType", "CreateTime"}
    assert {r["timestampType"] for r in got} == types
    verify = run_kfmt("verify", dst, "--deep")
    assert verify.code == 0, verify.out


def b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


# --- a bounded offset map ---

@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(0, 40), min_size=0, max_size=30), min_size=1, max_size=8),
       st.integers(2, 60))
def test_offset_map_behaves_like_a_dict_that_stops_at_its_limit(batches, slots):
    """Kafka's rule: a keyed record is mapped while the map holds fewer than slots * load factor
    keys; the first one that finds it full stops the mapping, and the latest offset is the last
    offset mapped."""
    m = OffsetMap(slots * BYTES_PER_ENTRY, 0.9)
    model, limit, latest, offset, stopped = {}, int(slots * 0.9), -1, 0, False
    for keys in batches:
        offsets = np.arange(offset, offset + len(keys), dtype=np.int64)
        offset += len(keys)
        hashes = key_hashes([b"key-%d" % k for k in keys])
        taken = m.put(hashes, offsets)
        expected_taken = 0
        for k, o in zip(keys, offsets.tolist()):
            if stopped or len(model) >= limit:
                stopped = True
                break
            model[k] = o
            latest = o
            expected_taken += 1
        assert taken == expected_taken
        assert m.entries == len(model) and m.latest_offset == latest
    probe = list(range(45))
    assert m.get(key_hashes([b"key-%d" % k for k in probe])).tolist() == [model.get(k, -1) for k in probe]


def test_offset_map_memory_is_fixed_and_checked():
    m = OffsetMap(1000 * BYTES_PER_ENTRY)
    assert m.slots == 1000 and m.max_entries == 900
    assert m._table.nbytes == 1000 * BYTES_PER_ENTRY
    from kfmt.errors import UsageError
    with pytest.raises(UsageError):
        OffsetMap(BYTES_PER_ENTRY)  # one slot: no room for even one key at load factor 0.9


def test_a_full_offset_map_cleans_the_prefix_it_mapped(tmp_path):
    """With room for 45 keys the map fills at the record that would need a 46th: the cleaning ends
    there (its offset is the next first dirty offset), records below it are deduplicated among
    themselves, everything from it on stays."""
    name = "compact-v2-none"
    twin = consumer_records(f"{name}-twin-0")
    seen, end = set(), None
    for r in twin:
        if len(seen) >= 45:
            end = r["offset"]
            break
        seen.add(r["key"])
    latest = {r["key"]: r["offset"] for r in twin if r["offset"] < end}
    expected = [r for r in twin if r["offset"] >= end or latest[r["key"]] == r["offset"]]
    logs = tmp_path / "logs"
    shutil.copytree(REALKAFKA / f"{name}-twin-0", logs / f"{name}-twin-0")
    dst = tmp_path / "out"
    result = compact(logs, dst, *oracle_arguments(name), "--offset-map-bytes", 50 * BYTES_PER_ENTRY)
    assert result.code == 0, result.err
    assert "offset map filled up" in result.out
    entry = report_entry(dst)
    assert entry["offset_map"]["full"] and entry["offset_map"]["keys"] == 45
    assert entry["cleaned_until"] == end and entry["dirty_ratio_after"] > 0
    assert kept_fields(read_back(dst / f"{name}-twin-0")) == kept_fields(expected)
    assert (dst / "cleaner-offset-checkpoint").read_text() == f"0\n1\n{name}-twin 0 {end}\n"
    # --fail-when-map-full refuses instead, and publishes nothing
    failed = compact(logs, tmp_path / "refused", *oracle_arguments(name), "--offset-map-bytes",
                     50 * BYTES_PER_ENTRY, "--fail-when-map-full")
    assert failed.code == 1 and "offset map" in failed.err and len(failed.err.strip().splitlines()) == 1
    assert not (tmp_path / "refused").exists()
    # cleaning the output again goes on from its cleaner checkpoint until the whole range is clean,
    # and then holds what one cleaning with a big enough map leaves
    current = dst
    for i in range(20):
        if report_entry(current)["cleaned_until"] == oracle(name)["cleaned_until"]:
            break
        nxt = tmp_path / f"pass{i}"
        result = compact(current, nxt, *oracle_arguments(name), "--offset-map-bytes", 50 * BYTES_PER_ENTRY)
        assert result.code == 0, result.err
        current = nxt
    assert kept_fields(read_back(current / f"{name}-twin-0")) == kept_fields(kept_truth(name))


# --- transactions ---

def test_compacted_transactional_topic_keeps_only_committed_latest_records(tmp_path):
    """Aborted transactions go whatever their keys (and are never mapped), keyless records go, the
    latest committed record of each key stays; the active segment is left as it was."""
    name = "txn-v2-none-0"
    dst = tmp_path / "out"
    result = compact(REALKAFKA / name, dst, "--now", 1_795_340_000_000)
    assert result.code == 0, result.err
    active = segment_bases(REALKAFKA / name)[-1]
    committed, everything = consumer_records(name, "records.read_committed"), consumer_records(name)
    latest = {r["key"]: r["offset"] for r in committed if r["offset"] < active and r["key"] is not None}
    expected = [r for r in committed if r["offset"] < active and r["key"] is not None
                and latest[r["key"]] == r["offset"]] + [r for r in everything if r["offset"] >= active]
    assert kept_fields(read_back(dst)) == kept_fields(expected)
    entry = report_entry(dst)
    aborted = {r["offset"] for r in everything} - {r["offset"] for r in committed}
    assert entry["removed"]["aborted_transaction_records"] == len([o for o in aborted if o < active])
    # every marker stays in this first cleaning: each transaction still had batches when it was read
    markers = [h for _, h, _ in entries(dst) if h.is_control]
    assert len(markers) == 6 and not any(h.has_delete_horizon for h in markers)
    assert run_kfmt("verify", dst, "--deep").code == 0
    # read_committed readers still see no aborted data
    cat = run_kfmt("cat", dst, "--format", "json", "--isolation", "read_committed")
    assert not {json.loads(line)["offset"] for line in cat.lines} & aborted


def test_markers_of_emptied_transactions_get_a_horizon_then_go(tmp_path):
    """Second cleaning: a marker whose transaction has no batch left may go, so it gets a delete
    horizon (clean time + delete.retention.ms); a third cleaning after the horizon removes it."""
    name = "txn-v2-none-0"
    first, second, third = tmp_path / "first", tmp_path / "second", tmp_path / "third"
    t1 = 1_795_340_000_000
    assert compact(REALKAFKA / name, first, "--now", t1).code == 0
    # which markers' transactions kept a data batch: the producer's transactional batches between
    # its previous marker and this one
    batches = [h for _, h, _ in entries(first)]
    alive, last_marker = set(), {}
    for h in batches:
        if h.is_control:
            if any(b.producer_id == h.producer_id and b.is_transactional and not b.is_control
                   and last_marker.get(h.producer_id, -1) < b.base_offset < h.base_offset for b in batches):
                alive.add(h.base_offset)
            last_marker[h.producer_id] = h.base_offset
    active = segment_bases(REALKAFKA / name)[-1]
    emptied = {h.base_offset for h in batches if h.is_control and h.base_offset not in alive
               and h.base_offset < active}
    assert emptied  # the aborted transactions' markers at least
    t2 = t1 + 1000
    assert compact(first, second, "--now", t2).code == 0
    horizons = {h.base_offset: h.delete_horizon_ms for _, h, _ in entries(second) if h.is_control}
    assert {o for o, d in horizons.items() if d is not None} == emptied
    assert all(horizons[o] == t2 + DAY for o in emptied)
    # producers idle for a day have expired by then, so nothing keeps an emptied marker's batch
    assert compact(second, third, "--now", t2 + DAY + 1).code == 0
    remaining = {h.base_offset for _, h, _ in entries(third) if h.is_control}
    assert remaining == set(horizons) - emptied
    assert run_kfmt("verify", third, "--deep").code == 0


# --- tombstones ---

def test_v2_tombstones_go_once_their_horizon_has_passed(tmp_path):
    name = "compact-v2-none"
    args = oracle_arguments(name)
    now = args[args.index("--now") + 1]
    first, later = tmp_path / "first", tmp_path / "later"
    assert compact(REALKAFKA / f"{name}-twin-0", first, *args).code == 0
    # still inside the horizon: nothing changes
    same = tmp_path / "same"
    assert compact(first, same, "--now", now + DAY - 1, "--segment-bytes", 8192).code == 0
    assert kept_fields(read_back(same)) == kept_fields(kept_truth(name))
    # past it: the tombstones of the cleaned range go, nothing else
    assert compact(first, later, "--now", now + DAY, "--segment-bytes", 8192).code == 0
    cleaned_until = oracle(name)["cleaned_until"]
    expected = [r for r in kept_truth(name) if r["value"] is not None or r["offset"] >= cleaned_until]
    assert kept_fields(read_back(later)) == kept_fields(expected)
    assert report_entry(later)["removed"]["expired_tombstones"] == 11


@pytest.mark.parametrize("mode", [(), ("--keep-format",)], ids=["kafka4", "kafka3"])
def test_legacy_tombstones_follow_segment_modification_times(mode, tmp_path):
    """v0/v1 tombstones carry no horizon: they stay while their segment's modification time lies
    after the last clean segment's minus delete.retention.ms. With a cleaner checkpoint at a segment
    base, ascending mtimes and delete.retention.ms 0, the clean section's tombstones go (unless a
    dirty record of their key supersedes them anyway), the dirty section's stay; records of the clean
    section whose keys the dirty section does not hold are not deduplicated (the section is clean)."""
    name = "compact-v1-gzip-twin-0"
    logs = tmp_path / "logs"
    shutil.copytree(REALKAFKA / name, logs / name)
    bases = segment_bases(logs / name)
    for i, base in enumerate(bases):
        ms = 1_795_000_000_000 + i * 60_000
        os.utime(logs / name / f"{base:020d}.log", ns=(ms * 1_000_000, ms * 1_000_000))
    checkpoint = bases[len(bases) // 2]
    (logs / "cleaner-offset-checkpoint").write_text(f"0\n1\ncompact-v1-gzip-twin 0 {checkpoint}\n")
    dst = tmp_path / "out"
    assert compact(logs, dst, "--now", 1_795_100_000_000, "--delete-retention-ms", 0, *mode).code == 0
    active = bases[-1]
    records = consumer_records(name)
    dirty_latest = {r["key"]: r["offset"] for r in records if checkpoint <= r["offset"] < active}
    expected = []
    for r in records:
        if r["offset"] >= active:
            expected.append(r)
        elif r["offset"] >= checkpoint:
            if dirty_latest[r["key"]] == r["offset"]:
                expected.append(r)  # the dirty section's segments are newer: tombstones stay
        elif r["key"] not in dirty_latest and r["value"] is not None:
            expected.append(r)
    assert kept_fields(read_back(dst / name)) == kept_fields(expected)
    assert report_entry(dst)["first_dirty_offset"] == checkpoint


# --- empty batches ---

def test_empty_batch_header_is_the_references_example():
    """Reference §4.7's computed example: base 20, last 24, producer 1000 epoch 0 base sequence 5,
    CreateTime, max timestamp 1700000000000, leader epoch 0."""
    expected = bytes.fromhex(
        "00000000000000140000003100000000021f209c90000000000004"
        "ffffffffffffffff0000018bcfe5680000000000000003e80000"
        "0000000500000000")
    original = BatchHeader(magic=2, base_offset=20, last_offset=24, compression=4,
                           timestamp_type=TimestampType.CREATE_TIME, max_timestamp=1_700_000_000_000,
                           base_timestamp=1_699_999_999_000, partition_leader_epoch=0, producer_id=1000,
                           producer_epoch=0, base_sequence=5, records_count=5, has_delete_horizon=True)
    batch = empty_batch(original)
    assert registry.get().format_for(2).encode(batch.header, batch.records) == expected


T0 = 1_700_000_000_000


def write_idempotent_partition(path: Path) -> None:
    """Segment 0: producer 7's only batch (keys a, b) at 0-1; segment 2: producer 9 overwrites a and b
    (2-3) and ends with a batch of keyless records (4-5); segment 6: active (producer 9 again)."""
    def batch(base, keys, pid, seq, ts):
        n = len(keys)
        header = BatchHeader(magic=2, base_offset=base, last_offset=base + n - 1, max_timestamp=ts + n - 1,
                             base_timestamp=ts, producer_id=pid, producer_epoch=0, base_sequence=seq,
                             records_count=n, partition_leader_epoch=0)
        return Batch(header, make_records(list(range(base, base + n)), [ts + i for i in range(n)], keys,
                                          [b"v%d" % (base + i) for i in range(n)]))
    storage, root = open_storage(str(path))
    with StagedOutput(storage, root) as out:
        with PartitionWriter(out, "", RollPolicy(), now_ms=T0) as writer:
            writer.roll(0)
            writer.append_batch(batch(0, [b"a", b"b"], 7, 0, T0))
            writer.roll(2)
            writer.append_batch(batch(2, [b"a", b"b"], 9, 0, T0 + 10))
            writer.append_batch(batch(4, [None, None], 9, 2, T0 + 20))
            writer.roll(6)
            writer.append_batch(batch(6, [b"c"], 9, 4, T0 + 30))


def test_an_active_producers_last_batch_and_the_rounds_last_batch_stay_empty(tmp_path):
    src = tmp_path / "t-0"
    write_idempotent_partition(src)
    dst = tmp_path / "out"
    # producer 7 is still active (its last batch is minutes old): its emptied batch stays as a header
    assert compact(src, dst, "--now", T0 + 60_000).code == 0
    kept = [(h.base_offset, h.last_offset, h.records_count, h.producer_id, h.base_sequence, h.base_timestamp,
             h.max_timestamp, h.compression) for _, h, _ in entries(dst)]
    assert kept == [
        (0, 1, 0, 7, 0, -1, T0 + 1, 0),  # producer 7's last batch, emptied
        (2, 3, 2, 9, 0, T0 + 10, T0 + 11, 0),
        (4, 5, 0, 9, 2, -1, T0 + 21, 0),  # keyless records go, but it ends the cleaning round
        (6, 6, 1, 9, 4, T0 + 30, T0 + 30, 0),
    ]
    assert run_kfmt("verify", dst, "--deep").code == 0
    # a day later producer 7 has expired: its batch goes; the round's last batch still stays
    later = tmp_path / "later"
    assert compact(src, later, "--now", T0 + DAY + 60_000).code == 0
    assert [(h.base_offset, h.records_count) for _, h, _ in entries(later)] == [(2, 2), (4, 0), (6, 1)]
    # both cleaned segments fit one group of segment.bytes: one segment, named after the first
    assert segment_bases(later) == segment_bases(dst) == [0, 6]


def test_the_cleanable_range_stops_where_a_brokers_would(tmp_path):
    """The dirty section ends at the least of the active segment, the high watermark (the
    replication-offset-checkpoint beside the partition) and min.compaction.lag.ms, rounded down to a
    segment base; it starts at the cleaner checkpoint unless that lies beyond the log."""
    logs = tmp_path / "logs"
    write_idempotent_partition(logs / "t-0")
    now = T0 + 60_000
    cases = [
        ({}, [], 6, "the active segment"),
        ({"replication-offset-checkpoint": "t 0 3"}, [], 2, "the last stable offset"),
        ({}, ["--min-compaction-lag-ms", 60_000 - 5], 2, "min.compaction.lag.ms"),
        ({}, ["--clean-until", 1], 0, "--clean-until"),
    ]
    for i, (checkpoints, args, first_uncleanable, bounded_by) in enumerate(cases):
        for name in ("replication-offset-checkpoint", "cleaner-offset-checkpoint"):
            (logs / name).unlink(missing_ok=True)
        for name, line in checkpoints.items():
            (logs / name).write_text(f"0\n1\n{line}\n")
        dst = tmp_path / f"out{i}"
        assert compact(logs, dst, "--now", now, *args).code == 0
        entry = report_entry(dst)
        assert (entry["first_uncleanable_offset"], entry["first_uncleanable_is"]) == (first_uncleanable,
                                                                                    bounded_by)
        assert entry["cleanable"] == (first_uncleanable > 0)
    # a cleaner checkpoint beyond the log end is not trusted: the whole log is dirty again
    (logs / "cleaner-offset-checkpoint").write_text("0\n1\nt 0 1000\n")
    dst = tmp_path / "reset"
    assert compact(logs, dst, "--now", now).code == 0
    entry = report_entry(dst)
    assert entry["first_dirty_offset"] == 0 and "beyond the log end offset" in entry["checkpoint_note"]
    assert (dst / "cleaner-offset-checkpoint").read_text() == "0\n1\nt 0 6\n"


# --- the command ---

def test_dry_run_reports_and_writes_nothing(tmp_path):
    name = "compact-v2-none"
    dst = tmp_path / "out"
    result = compact(REALKAFKA / f"{name}-twin-0", dst, *oracle_arguments(name), "--dry-run",
                     "--format", "json")
    assert result.code == 0, result.err
    assert not dst.exists()
    [entry] = json.loads(result.out)["partitions"]
    assert (entry["records_read"], entry["records_written"]) == (489, 119)
    assert entry["dirty_ratio_before"] == 1.0 and entry["dirty_ratio_after"] == 0.0


def test_usage_errors(tmp_path):
    src = tmp_path / "t-0"
    write_idempotent_partition(src)
    assert compact(src, tmp_path / "o", "--segment-bytes", 5).code == 2
    assert compact(src, tmp_path / "o", "--offset-map-bytes", 10).code == 2
    assert compact(src, tmp_path / "o", "--delete-retention-ms", -1).code == 2
    assert compact(tmp_path / "missing", tmp_path / "o").code == 2


@pytest.mark.parametrize("master", [pytest.param(None, marks=pytest.mark.spark), "local-pool[2]"])
def test_spark_and_pool_runs_of_a_log_directory_equal_the_in_process_run(master, tmp_path):
    # (None: a Spark session, the engine chosen for a log directory; a pool's tasks are pickled)
    logs = tmp_path / "logs"
    for name in ["compact-v2-none-twin-0", "txn-v2-none-0", "v1-gzip-0"]:
        shutil.copytree(REALKAFKA / name, logs / name)
    engine, local = tmp_path / "engine", tmp_path / "local"
    args = ["--now", 1_795_340_000_000, "--segment-bytes", 8192]
    result = run_kfmt("compact", logs, engine, "--no-progress", *args, *(["--master", master] if master else []))
    assert result.code == 0, result.err
    assert compact(logs, local, *args).code == 0
    tree = lambda d: {str(p.relative_to(d)): p.read_bytes() for p in d.rglob("*")  # noqa: E731
                      if p.is_file() and p.name != "kfmt-report.json"}
    assert tree(engine) == tree(local)


# --- a property over random partitions ---

def _random_partition(path: Path, layout: list[list[list[tuple]]], codec: int) -> None:
    """Segments of batches of (key, value) records, offsets from 0 with a gap after every batch."""
    storage, root = open_storage(str(path))
    offset = 0
    with StagedOutput(storage, root) as out:
        with PartitionWriter(out, "", RollPolicy(), now_ms=T0) as writer:
            for segment in layout:
                writer.roll(offset)
                for records in segment:
                    n = len(records)
                    offsets = list(range(offset, offset + n))
                    header = BatchHeader(magic=2, base_offset=offset, last_offset=offset + n - 1,
                                         compression=codec, max_timestamp=T0 + offset + n - 1,
                                         base_timestamp=T0 + offset, records_count=n)
                    writer.append_batch(Batch(header, make_records(
                        offsets, [T0 + o for o in offsets], [k for k, _ in records], [v for _, v in records])))
                    offset += n + 1


records_strategy = st.tuples(st.sampled_from([None, b"", b"a", b"b", b"c", b"d", b"e"]),
                             st.sampled_from([None, b"", b"x", b"y" * 20]))
layouts = st.lists(st.lists(st.lists(records_strategy, min_size=1, max_size=6), min_size=1, max_size=4),
                   min_size=1, max_size=5)


@settings(max_examples=40, deadline=None)
@given(layouts, st.sampled_from([0, 1, 2, 3, 4]), st.integers(2, 12))
def test_random_partitions_compact_to_the_latest_record_of_each_key(tmp_path_factory, layout, codec, map_keys):
    """Whatever the batches, segments, codec and map size: records beyond the cleaned range stay,
    below it the latest record of each key stays (tombstones too, on a first cleaning), keyless ones
    go; every output batch keeps the offsets of an input batch; the map never holds more keys than
    it admits."""
    from kfmt.transforms.cleanup.compaction import CompactOptions, compact_partition
    from kfmt.transforms.cleanup.plan import plan_cleanup

    tmp = tmp_path_factory.mktemp("random")
    src, dst = tmp / "t-0", tmp / "out"
    _random_partition(src, layout, codec)
    storage, path = open_storage(str(src))
    dst_storage, dst_path = open_storage(str(dst))
    plan = plan_cleanup(storage, path, dst_storage, dst_path)
    slots = int(map_keys / 0.9) + 1
    options = CompactOptions(now_ms=T0 + 10_000, offset_map_bytes=slots * BYTES_PER_ENTRY)
    with StagedOutput(dst_storage, dst_path) as out:
        result = compact_partition(plan.jobs[0], out.staged, options)
    details = result.details
    source = [(h, r) for _, h, r in _decoded(src)]
    active = segment_bases(src)[-1]
    end = details["cleaned_until"] if details["cleanable"] else 0
    latest = {}
    for _, records in source:
        for o, k in zip(records.column(0).to_pylist(), records.column(2).to_pylist()):
            if o < end and k is not None:
                latest[k] = o
    expected = []
    for _, records in source:
        for o, k, v in zip(*(records.column(i).to_pylist() for i in (0, 2, 3))):
            if o >= end or (k is not None and latest[k] == o):
                expected.append((o, k, v))
    got = [(o, k, v) for _, _, records in _decoded(dst)
           for o, k, v in zip(*(records.column(i).to_pylist() for i in (0, 2, 3)))]
    assert got == expected
    assert details["offset_map"]["keys"] <= details["offset_map"]["max_keys"]
    assert end <= active
    spans = {(h.base_offset, h.last_offset) for h, _ in source}
    assert all((h.base_offset, h.last_offset) in spans for _, h, _ in _decoded(dst))


def _decoded(directory: Path):
    fmt = registry.get().format_for(2)
    return [(seg, header, fmt.decode(memoryview(data), header).records) for seg, header, data in entries(directory)]
