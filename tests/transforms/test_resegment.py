"""kfmt resegment: the same batches in segments cut by other configs, and the parallel writer's split
of companion-file work between tasks and driver (kfmt.partition.segment_recovery.RecoveredSegmentBuilder).

Truth: the corpus (records as the Java consumer read them; the broker's segment bytes for the limit
restated from the output files themselves), `kfmt reindex` for the companion files, and for the
facts path a property: over random producer histories and random segmentations, segment facts
replayed on the driver give byte for byte what the sequential recovery model gives.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.cli import run_kfmt
from support.corpus import REAL_DIRS, REALKAFKA
from support.reindex_truth import entries_truth, truth_digest
from support.transform_runs import (
    SPARK,
    assert_companions_are_reindexs,
    cat_json,
    kfmt_ok,
    log_dir_of,
    transform,
    write_mixed,
)

from kfmt.errors import DataError
from kfmt.format import segment
from kfmt.format.control import ControlType
from kfmt.format.model import BatchHeader
from kfmt.partition.companions import CompanionBuilder
from kfmt.partition.segment_recovery import RecoveredSegmentBuilder
from kfmt.partition.txnindex import write_txn_index

# --- the facts path equals sequential recovery (property) ---


@st.composite
def producer_histories(draw):
    """v2 (and a few legacy) batch headers with producers opening, committing and aborting
    transactions, idempotent producers, epoch bumps and leader epochs, cut into segments."""
    n = draw(st.integers(1, 80))
    open_txn: dict[int, bool] = {}
    epochs = {pid: 0 for pid in (1, 2, 3, 4)}
    offset, leader_epoch = draw(st.integers(0, 1000)), draw(st.integers(-1, 2))
    items = []  # (header, control, coordinator_epoch)
    for _ in range(n):
        offset += draw(st.sampled_from([0, 0, 0, 3]))
        count = draw(st.integers(1, 4))
        leader_epoch = max(leader_epoch, draw(st.sampled_from([leader_epoch] * 4 + [leader_epoch + 1, 0])))
        kind = draw(st.sampled_from(["data", "data", "data", "marker", "legacy", "plain"]))
        pid = draw(st.sampled_from([1, 2, 3, 4]))
        if draw(st.integers(0, 20)) == 0:
            epochs[pid] += 1
        ts = 1_700_000_000_000 + offset * 1000 + draw(st.integers(-5000, 5000))
        common = dict(base_offset=offset, max_timestamp=ts, size=draw(st.integers(61, 900)))
        control, coordinator_epoch = None, -1
        if kind == "legacy":
            header = BatchHeader(magic=1, last_offset=offset, **common)
            count = 1
        elif kind == "plain":
            header = BatchHeader(magic=2, last_offset=offset + count - 1, partition_leader_epoch=leader_epoch,
                                 **common)
        elif kind == "marker":
            count = 1
            control = draw(st.sampled_from([ControlType.COMMIT, ControlType.ABORT, None]))
            coordinator_epoch = draw(st.integers(0, 3))
            header = BatchHeader(magic=2, last_offset=offset, producer_id=pid, producer_epoch=epochs[pid],
                                 is_transactional=True, is_control=True, partition_leader_epoch=leader_epoch,
                                 **common)
            open_txn[pid] = False
        else:
            transactional = open_txn.get(pid) or draw(st.booleans())
            if draw(st.integers(0, 30)) == 0:
                transactional = not transactional  # now and then a history Kafka's loader refuses
            header = BatchHeader(magic=2, last_offset=offset + count - 1, producer_id=pid,
                                 producer_epoch=epochs[pid], base_sequence=draw(st.integers(0, 100)),
                                 is_transactional=transactional, partition_leader_epoch=leader_epoch,
                                 **common)
            open_txn[pid] = open_txn.get(pid) or transactional
        items.append((header, control, coordinator_epoch))
        offset += count
    cuts = sorted(draw(st.sets(st.integers(1, max(1, n - 1)), max_size=6)))
    segments, start = [], 0
    for cut in cuts + [n]:
        if cut > start:
            segments.append(items[start:cut])
            start = cut
    return segments


def _positioned(segment):
    position = 0
    for header, control, epoch in segment:
        yield header.replace(position=position), control, epoch
        position += header.size


def _sequential(segments, **options):
    builder = CompanionBuilder(**options)
    files = {}
    for seg in segments:
        builder.begin_segment(seg[0][0].base_offset)
        for header, control, epoch in _positioned(seg):
            builder.add_batch(header, control, epoch)
        files.update(builder.end_segment().files())
    files.update(builder.finish().files())
    return files


def _facts_path(segments, **options):
    builder = CompanionBuilder(**options)
    files = {}
    for seg in segments:  # the task side, one segment at a time
        base = seg[0][0].base_offset
        task = RecoveredSegmentBuilder(base, options["index_interval_bytes"])
        for header, control, epoch in _positioned(seg):
            task.add(header, control, epoch)
        indexes, facts = task.finish()
        assert len(facts.producer_batches) <= 2 * len(seg)  # and usually far fewer
        files.update(indexes.files())
        aborted = builder.add_segment(facts)  # the driver side
        if aborted:
            files[f"{base:020d}.txnindex"] = write_txn_index(aborted)
    files.update(builder.finish().files())
    return files


def _outcome(fn, segments, **options):
    try:
        return fn(segments, **options)
    except DataError as err:
        return ("error", str(err))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(segments=producer_histories(), interval=st.sampled_from([0, 200, 4096]),
       expiry=st.sampled_from([1, 3_600_000, 10 ** 12]))
def test_segment_facts_replayed_on_the_driver_equal_sequential_recovery(segments, interval, expiry):
    options = dict(index_interval_bytes=interval, now_ms=1_700_000_500_000, producer_expiration_ms=expiry)
    assert _outcome(_facts_path, segments, **options) == _outcome(_sequential, segments, **options)


def test_a_long_run_of_one_producers_batches_reaches_the_driver_as_two():
    task = RecoveredSegmentBuilder(0, 4096)
    for i in range(10_000):
        task.add(BatchHeader(magic=2, base_offset=i, last_offset=i, producer_id=5, producer_epoch=0,
                             base_sequence=i, max_timestamp=i, position=i * 70, size=70))
    _, facts = task.finish()
    assert [b.header.base_offset for b in facts.producer_batches] == [0, 9999]
    assert (facts.batches, facts.last_offset, facts.v2_next_offset) == (10_000, 9999, 10_000)


# --- the corpus ---

def segment_sizes(path: Path) -> list[int]:
    return [p.stat().st_size for p in sorted(path.glob("*.log"))]


def assert_rolls_justified(path: Path, segment_bytes: int, segment_ms: int) -> None:
    """Restated from the output alone (docs/format.md §12.2): no segment exceeds segment.bytes unless it holds a
    single batch, and each segment boundary had a reason: the next batch did not fit, or came more
    than segment.ms (record time) after the segment's first batch."""
    logs = sorted(path.glob("*.log"))
    per_segment = []
    for log in logs:
        per_segment.append([b.header for b in batches_of_file(log)])
    previous_last = -1
    for log, headers in zip(logs, per_segment):
        assert log.stat().st_size <= segment_bytes or len(headers) == 1, log.name
        assert previous_last < int(log.stem) <= headers[0].base_offset, log.name
        previous_last = headers[-1].last_offset
    for (log, headers), following in zip(zip(logs, per_segment), per_segment[1:]):
        nxt = following[0]
        too_big = log.stat().st_size + nxt.size > segment_bytes
        too_late = headers[0].max_timestamp >= 0 and nxt.max_timestamp - headers[0].max_timestamp > segment_ms
        assert too_big or too_late, log.name


def batches_of_file(log: Path):
    data = log.read_bytes()
    return [segment.decode(data, h, str(log)) for h in segment.scan(data, str(log))]


@pytest.mark.parametrize("name", REAL_DIRS)
@pytest.mark.parametrize("segment_bytes", [3000, 50_000])
def test_every_corpus_partition_resegmented(tmp_path, name, segment_bytes):
    src, out = REALKAFKA / name, tmp_path / "out"
    report = transform("resegment", src, out, "--segment-bytes", segment_bytes, "--kafka-version", "3.9")
    assert cat_json(out) == cat_json(src)
    assert_rolls_justified(out, segment_bytes, 7 * 24 * 3600 * 1000)
    # the batches, byte for byte, in order
    src_bytes = b"".join(p.read_bytes() for p in sorted(src.glob("*.log")))
    assert b"".join(p.read_bytes() for p in sorted(out.glob("*.log"))) == src_bytes
    assert sorted(out.glob("*.log"))[0].name == sorted(src.glob("*.log"))[0].name  # the first base kept
    assert report["outputs"][0]["segments"] == len(segment_sizes(out))
    # the check of a copy: the entries kafka-dump-log lists, digested by their bytes, before and after
    truth = entries_truth(name)
    for summary in report["inputs"] + report["outputs"]:
        assert (summary["records"], summary["uncounted_wrappers"], summary["entries_digest"]) == truth
    kfmt_ok("verify", out, "--deep")
    assert_companions_are_reindexs(out, tmp_path)
    if segment_bytes == 3000:  # --deep: every record, as the Java consumer read them
        report = transform("resegment", src, tmp_path / "deep", "--segment-bytes", segment_bytes,
                           "--kafka-version", "3.9", "--deep")
        assert report["inputs"][0]["content_digest"] == report["outputs"][0]["content_digest"] \
            == truth_digest(name)[1]


@pytest.mark.parametrize("name", ["v2-none-0", "v1-none-0", "txn-v2-none-0"])
def test_segment_ms_rolls_by_record_time(tmp_path, name):
    out = tmp_path / "out"
    transform("resegment", REALKAFKA / name, out, "--segment-bytes", 1 << 30, "--segment-ms", 60_000,
              "--index-interval-bytes", 1024)
    # (the transaction markers carry the coordinator's 2026 clock: a segment opened by one never
    # rolls on time while 2023 data follows, as on the broker)
    assert len(segment_sizes(out)) > (1 if name.startswith("txn") else 3)
    assert_rolls_justified(out, 1 << 30, 60_000)
    for log in sorted(out.glob("*.log")):  # within a segment, no batch lies too far after the first
        headers = [b.header for b in batches_of_file(log)]
        assert all(h.max_timestamp - headers[0].max_timestamp <= 60_000 for h in headers[1:])
    assert cat_json(out) == cat_json(REALKAFKA / name)
    assert_companions_are_reindexs(out, tmp_path, "--index-interval-bytes", 1024)


def test_a_partition_without_batches_keeps_one_empty_segment(tmp_path):
    src = tmp_path / "empty-0"
    src.mkdir()
    for base in (0, 40):
        (src / f"{base:020d}.log").write_bytes(b"")
    transform("resegment", src, tmp_path / "out", "--segment-bytes", 1000, "--kafka-version", "3.9")
    assert sorted(os.listdir(tmp_path / "out")) == [
        "00000000000000000000.index", "00000000000000000000.log", "00000000000000000000.timeindex",
        "kfmt-report.json"]


def test_dry_run_plans_from_headers_and_writes_nothing(tmp_path):
    src = write_mixed(tmp_path / "mixed-0")
    size = (src / f"{5:020d}.log").stat().st_size
    out = kfmt_ok("resegment", src, tmp_path / "out", "--segment-bytes", size, "--dry-run",
                  "--master", "inprocess", "--kafka-version", "3.9")
    assert not (tmp_path / "out").exists()
    lines = out.splitlines()
    assert lines[0].startswith("resegment ") and "(partition directory, 1 partition(s))" in lines[0]
    planned = [line.strip() for line in lines if line.strip().startswith("000")]
    assert planned and planned[0].startswith("00000000000000000000.log: ")
    assert all("bytes" in line and "starts:" in line for line in planned)
    plan = json.loads(kfmt_ok("resegment", src, tmp_path / "out", "--segment-bytes", size, "--dry-run",
                              "--master", "inprocess", "--format", "json", "--kafka-version", "3.9"))
    assert plan["options"]["segment_bytes"] == size


def test_usage_errors_exit_2(tmp_path):
    src = write_mixed(tmp_path / "mixed-0")
    for args in (["--segment-bytes", "13"], ["--segment-bytes", "1000", "--segment-ms", "0"],
                 ["--segment-bytes", "1000", "--index-interval-bytes", "-1"], []):
        result = run_kfmt("resegment", src, tmp_path / "out", "--master", "inprocess", "--kafka-version", "3.9",
                          *args)
        assert result.code == 2, args
    assert sorted(os.listdir(tmp_path)) == ["mixed-0"]


@pytest.mark.spark
def test_a_log_directory_resegmented_on_spark(tmp_path):
    names = ["txn-v2-none-0", "compact-v2-none-0", "v1-gzip-0", "v2-lz4-0"]
    src = log_dir_of(tmp_path, names)
    out = tmp_path / "out"
    report = transform("resegment", src, out, "--segment-bytes", 20_000, "--kafka-version", "3.9", "--index-interval-bytes", 1024,
                       master=SPARK)
    assert report["totals"]["content_unchanged"]
    for name in names:
        assert sum(segment_sizes(out / name)) == sum(segment_sizes(src / name))
        assert len(segment_sizes(out / name)) < len(segment_sizes(src / name))
        assert_rolls_justified(out / name, 20_000, 7 * 24 * 3600 * 1000)
    assert cat_json(out) == cat_json(src)
    kfmt_ok("verify", out, "--deep")
    assert_companions_are_reindexs(out, tmp_path, "--index-interval-bytes", 1024)
    assert (out / "meta.properties").exists()
