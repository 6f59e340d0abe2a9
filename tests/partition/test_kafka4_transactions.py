"""Transactions written by a real Kafka 4.1 broker under transaction version 2 (KIP-890: the epoch is
bumped at every transaction end and the marker carries the bumped epoch; docs/format.md §7.1), read,
rebuilt, verified and compacted by kfmt, against the broker's truth: what kafka-clients 4.1's
consumer read in both isolation levels, and the `.txnindex` and producer snapshot files the broker
wrote itself (tests/data/realkafka4, see tests/data/README.md)."""
from __future__ import annotations

import json
import shutil

import pytest
from support.cli import run_kfmt
from support.corpus4 import (
    BROKER_CLOCK_MS,
    PARTITIONS4,
    REALKAFKA4,
    TXN4,
    consumer_records4,
    has_committed_truth,
    listing,
    topic_config,
)
from support.export_truth import as_consumer_records, export, read_dataset
from support.spark_session import read_all

import kfmt
from kfmt.partition.snapshots import read_snapshot

COMMITTED = [n for n in TXN4 if has_committed_truth(n)]
ISOLATIONS = [(n, False) for n in TXN4] + [(n, True) for n in COMMITTED]


def copy_alone(name: str, tmp_path):
    """The partition directory on its own (no log-directory checkpoints beside it)."""
    shutil.copytree(REALKAFKA4 / name, tmp_path / "src" / name)
    return tmp_path / "src" / name


@pytest.mark.parametrize("name", PARTITIONS4 + ("__cluster_metadata-0",))
def test_partition_directory_is_as_the_broker_left_it(name):
    on_disk = {p.name: p.stat().st_size for p in (REALKAFKA4 / name).iterdir() if p.is_file()}
    assert on_disk == listing(name)


@pytest.mark.parametrize("name,committed", ISOLATIONS)
def test_cat_equals_the_java_consumer(name, committed):
    isolation = "read_committed" if committed else "read_uncommitted"
    result = run_kfmt("cat", REALKAFKA4 / name, "--format", "json", "--isolation", isolation)
    assert result.code == 0, result.err
    assert [json.loads(line) for line in result.lines] == list(consumer_records4(name, committed))


@pytest.mark.parametrize("name", COMMITTED)
def test_read_data_source_and_export_equal_the_committed_consumer(name, tmp_path):
    truth = list(consumer_records4(name, committed=True))
    table = kfmt.read(REALKAFKA4 / name, isolation="read_committed").read_all()
    assert as_consumer_records(table) == truth
    rows, _ = read_all(REALKAFKA4 / name, **{"kafka.isolation.level": "read_committed",
                                             "maxBytesPerSplit": 2048})
    assert as_consumer_records(rows) == truth
    assert export(REALKAFKA4 / name, tmp_path / "out", "--isolation", "read_committed").code == 0
    if truth:
        assert as_consumer_records(read_dataset(tmp_path / "out")) == truth
    else:  # d4-txabort-0: every transaction aborted, no data file
        assert not list((tmp_path / "out").rglob("*.parquet"))


def rebuilt_files(name: str, tmp_path, now_ms: int) -> dict[str, bytes]:
    out = tmp_path / f"rebuilt-{now_ms}"
    kfmt.reindex(copy_alone(name, tmp_path / str(now_ms)), out, now_ms=now_ms,
                 index_interval_bytes=topic_config(name, "index.interval.bytes", 4096))
    return {p.name: p.read_bytes() for p in out.iterdir() if p.suffix in (".txnindex", ".snapshot")}


def broker_files(name: str) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in (REALKAFKA4 / name).iterdir()
            if p.suffix in (".txnindex", ".snapshot")}


@pytest.mark.parametrize("name", [n for n in PARTITIONS4 if n != "d4-compact-0"])
def test_reindex_rebuilds_the_brokers_txnindex_and_snapshots(name, tmp_path):
    """Byte for byte, at the broker's clock: aborted transactions whose marker carries the bumped
    epoch are indexed, the producers' epochs are the markers', fenced producers included."""
    assert rebuilt_files(name, tmp_path, BROKER_CLOCK_MS) == broker_files(name)


def test_compacted_topic_snapshots_differ_only_by_the_producer_the_broker_had_not_yet_expired(tmp_path):
    """d4-compact-0 (docs/format.md §8.1): producer 13 wrote its last batch at CreateTime 2025-01-01
    and never again. Recovery at the broker's clock (2026) drops it whenever it reloads a snapshot
    (`ProducerStateManager.loadFromSnapshot`: idle longer than producer.id.expiration.ms, no open
    transaction), so the snapshots after the first one reloaded lack it; the running broker still held
    it because it expires producers only on a timer. At a clock within a day of the data, the rebuild
    is the broker's file byte for byte."""
    name = "d4-compact-0"
    broker = broker_files(name)
    assert rebuilt_files(name, tmp_path, 1735690049000 + 3_600_000) == broker
    rebuilt = rebuilt_files(name, tmp_path, BROKER_CLOCK_MS)
    assert rebuilt.keys() == broker.keys()
    for file, data in broker.items():
        expected = read_snapshot(data)
        if file != "00000000000000000696.snapshot":  # the first one: taken while replaying, not reloaded
            expected = [e for e in expected if e.producer_id != 13]
        assert read_snapshot(rebuilt[file]) == expected, file
    assert len(broker["00000000000000000727.snapshot"]) == 148 and len(rebuilt["00000000000000000727.snapshot"]) == 102


def test_verify_finds_nothing_wrong(tmp_path):
    logdir = tmp_path / "logdir"
    shutil.copytree(REALKAFKA4, logdir, ignore=shutil.ignore_patterns("*.truth"))
    outcome = kfmt.verify(logdir)
    report = outcome.detail
    assert report.ok and not [p for p in report.problems if p.is_error], [p.text() for p in report.problems]


def batches_of(path, producer_id: int) -> list[tuple]:
    """(base offset, records, producer epoch, control) of one producer's batches, from kfmt dump's text."""
    out = []
    for seg in sorted(path.glob("*.log")):
        result = run_kfmt("dump", seg)
        assert result.code == 0, result.err
        for line in result.lines:
            if f" producerId: {producer_id} " in line:
                f = dict(zip(line.split()[::2], line.split()[1::2]))
                out.append((int(f["baseOffset:"]), int(f["count:"]), int(f["producerEpoch:"]),
                            f["isControl:"] == "true"))
    return out


@pytest.mark.parametrize("expiration_ms,kept_marker", [(7 * 86_400_000, True), (86_400_000, False)])
def test_compaction_keeps_the_bumped_epoch_marker_of_an_active_producer(tmp_path, expiration_ms, kept_marker):
    """Under transaction version 2 a producer's last batch is its marker, with an epoch its data never
    had: its entry has no batch metadata, so the cleaner keeps that marker (emptied once its delete
    horizon passed) to preserve the epoch (Cleaner's `isBatchLastRecordOfProducer`, docs/format.md §14).
    Producer 14 (d4-tid-compact) committed, aborted, committed: markers at 460 (epoch 1), 474 (2),
    501 (3); the aborted data is gone, 474's and 501's horizons (set by the broker's cleaner) passed.
    Once the producer expired, nothing keeps 501."""
    src = copy_alone("d4-compact-0", tmp_path)
    after_horizons = 1795922954296 + 1
    kfmt.compact(src, tmp_path / "out" / "d4-compact-0", now_ms=after_horizons, producer_expiration_ms=expiration_ms)
    batches = batches_of(tmp_path / "out" / "d4-compact-0", 14)
    assert (450, 1, 0, False) in batches and (460, 1, 1, True) in batches  # data of the commit kept
    assert not [b for b in batches if b[0] == 474]
    assert ((501, 0, 3, True) in batches) == kept_marker
    committed = kfmt.read(src, isolation="read_committed").read_all()
    after = kfmt.read(tmp_path / "out" / "d4-compact-0", isolation="read_committed").read_all()
    assert set(after.column("offset").to_pylist()) <= set(committed.column("offset").to_pylist())


@pytest.mark.parametrize("command", [("upgrade",), ("recompress", "--compression", "zstd")], ids=lambda c: c[0])
@pytest.mark.parametrize("name", ["d4-txa-0", "d4-txb-0", "d4-txabort-0"])
def test_rewrites_give_the_brokers_txnindex_and_snapshots(name, command, tmp_path):
    """A rewrite keeps the segments where they were (docs/transforms.md), so its companion files are
    the broker's: the same rule, through the rewrite's own path (kfmt.write.segment_writer)."""
    src = copy_alone(name, tmp_path)
    result = run_kfmt(*command[:1], src, tmp_path / "out", *command[1:], "--now", BROKER_CLOCK_MS,
                      "--master", "inprocess", "--no-progress")
    assert result.code == 0, result.err
    written = {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()
               if p.suffix in (".txnindex", ".snapshot")}
    assert written == broker_files(name)
