"""kfmt retain (kfmt.transforms.cleanup.retention) against Kafka's own retention.

Independent truth: the realkafka corpus's retention cases (`_retention/CASE/`): a Kafka 3.6 broker
loaded `input/`, applied one retention setting (or DeleteRecords) at `now_ms`, and left `remaining/`.
kfmt given the same input, configs and clock must leave exactly the broker's segments, byte for byte,
and the same log start offset (and log-start-offset-checkpoint entry). The rules' edges (mtimes of
timestamp-less segments, out-of-order timestamps, retention.bytes at a segment boundary, a log start
offset inside a segment, the high watermark, the active segment) are checked on crafted directories
against expectations worked out by hand from docs/format.md §13, and as properties over random segment
lists (hypothesis). Outputs must verify clean, read back as the broker's consumer read the records
that remain, and reindex to the same companion files.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.cli import run_kfmt
from support.corpus import REALKAFKA
from support.corpus_truth import consumer_records

from kfmt.errors import UsageError
from kfmt.format.model import Batch, BatchHeader, TimestampType, make_records
from kfmt.partition.checkpoints import read_offset_checkpoint
from kfmt.storage.staging import StagedOutput
from kfmt.storage.store import open_storage
from kfmt.transforms.cleanup.retention import RetentionOptions, SegmentAge, decide_retention
from kfmt.write.planner import RollPolicy
from kfmt.write.writer import PartitionWriter

RETENTION = REALKAFKA / "_retention"
CASES = sorted(p.name for p in RETENTION.iterdir())
COMPANION_SUFFIXES = (".index", ".timeindex", ".txnindex", ".snapshot")
NOW = 1_795_000_000_000
T0 = 1_700_000_000_000


def truth(case: str) -> dict:
    return json.loads((RETENTION / case / "truth.json").read_text())


def retain(src, dst, *args):
    return run_kfmt("retain", src, dst, "--master", "inprocess", "--no-progress", *args)


def case_arguments(t: dict) -> list:
    """The broker's settings of a case as kfmt arguments."""
    configs = t["configs"]
    args = ["--now", t["now_ms"], "--index-interval-bytes", configs.get("index.interval.bytes", 4096)]
    if "retention.ms" in configs:
        args += ["--retention-ms", configs["retention.ms"]]
    if "retention.bytes" in configs:
        args += ["--retention-bytes", configs["retention.bytes"]]
    if "delete_records_offset" in t["applied"]:
        args += ["--log-start-offset", t["applied"]["delete_records_offset"]]
    return args


def case_log_dir(case: str, tmp_path: Path) -> Path:
    """The case's input as the one partition of a log directory (so that DST gets a
    log-start-offset-checkpoint), with the `.log` modification times the case prescribes (they do
    not survive a copy or a checkout)."""
    t = truth(case)
    log_dir = tmp_path / "logs"
    shutil.copytree(RETENTION / case / "input", log_dir / f"{t['topic']}-{t['partition']}")
    for name, ms in t.get("log_mtimes_ms", {}).items():
        os.utime(log_dir / f"{t['topic']}-{t['partition']}" / name, ns=(ms * 1_000_000, ms * 1_000_000))
    return log_dir


def checkpoint_entries(path: Path) -> dict:
    return read_offset_checkpoint(path.read_text(), str(path)) if path.exists() else {}


def files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in directory.iterdir() if p.is_file()}


@pytest.mark.parametrize("case", CASES)
def test_retention_leaves_what_the_broker_left(case, tmp_path):
    t = truth(case)
    src, dst = case_log_dir(case, tmp_path), tmp_path / "out"
    result = retain(src, dst, *case_arguments(t))
    assert result.code == 0, result.err
    name = f"{t['topic']}-{t['partition']}"
    got, remaining = files(dst / name), files(RETENTION / case / "remaining")
    # the broker's remaining segments, byte for byte
    assert sorted(n for n in got if n.endswith(".log")) == sorted(n for n in remaining if n.endswith(".log"))
    logs = lambda d: {n: c for n, c in d.items() if n.endswith(".log")}  # noqa: E731
    assert logs(got) == logs(remaining)
    assert sorted(int(n[:20]) for n in got if n.endswith(".log")) == t["remaining_base_offsets"]
    # the log start offset, and the checkpoint entry Kafka writes only above the first base offset
    report = json.loads((dst / "kfmt-report.json").read_text())
    [entry] = report["partitions"]
    assert entry["log_start_offset"] == t["log_start_offset"]
    assert [d["base_offset"] for d in entry["deleted"]] == t["deleted_base_offsets"]
    entries = checkpoint_entries(dst / "log-start-offset-checkpoint")
    assert entries.get((t["topic"], t["partition"])) == t["log_start_offset_checkpoint"]
    # every other file the broker kept is the same, except the snapshot at the first base offset:
    # the broker deletes it at its next start (ProducerStateManager.truncateAndReload removes
    # snapshots at or below the log start offset), and kfmt writes what that start leaves
    first_base = t["remaining_base_offsets"][0]
    for n, content in remaining.items():
        if n == f"{first_base:020d}.snapshot":
            assert n not in got
        else:
            assert got.get(n) == content, n
    assert set(got) - set(remaining) == set()


@pytest.mark.parametrize("case", CASES)
def test_retention_output_verifies_reads_back_and_reindexes_the_same(case, tmp_path):
    t = truth(case)
    src, dst = case_log_dir(case, tmp_path), tmp_path / "out"
    assert retain(src, dst, *case_arguments(t)).code == 0
    verify = run_kfmt("verify", dst, "--deep")
    assert verify.code == 0, verify.out
    # the records a consumer reads are the broker consumer's, from the broker's log start offset on
    # (DeleteRecords leaves it inside the first remaining segment; DST's checkpoint carries it)
    name = f"{t['topic']}-{t['partition']}"
    expected = [(r["offset"], r["key"], r["value"]) for r in consumer_records(t["source"])
                if r["offset"] >= t["log_start_offset"]]
    cat = run_kfmt("cat", dst / name, "--format", "json")
    assert cat.code == 0, cat.err
    assert [(r["offset"], r["key"], r["value"]) for r in map(json.loads, cat.lines)] == expected
    # reindexing the output (with the same clock and interval) regenerates the same companions
    again = tmp_path / "again"
    interval = t["configs"].get("index.interval.bytes", 4096)
    result = run_kfmt("reindex", dst, again, "--no-progress", "--now", t["now_ms"],
                      "--index-interval-bytes", interval)
    assert result.code == 0, result.err
    companions = lambda d: {n: c for n, c in files(d).items()  # noqa: E731
                            if n.endswith(COMPANION_SUFFIXES) or n == "leader-epoch-checkpoint"}
    assert companions(again / name) == companions(dst / name)


def entries_digest_of(logs: list[Path]) -> str:
    """The entries digest (kfmt.format.digest.EntriesDigest's definition) of segments, computed here
    from their [offset][size] framing and the xxhash package."""
    import struct

    import xxhash

    total = entries = 0
    for log in logs:
        data, pos = log.read_bytes(), 0
        while pos + 12 <= len(data):
            end = pos + 12 + struct.unpack_from(">i", data, pos + 8)[0]
            total += xxhash.xxh3_128_intdigest(data[pos:end])
            entries, pos = entries + 1, end
    return f"{entries}:{total % (1 << 128):032x}"


@pytest.mark.parametrize("case", CASES)
def test_what_is_kept_is_proven_by_its_bytes_and_what_is_removed_counted(case, tmp_path):
    """The check of a copy (kfmt.format.copied_runs): the entries digest of what is kept is that of
    the broker's remaining segments, and the records removed are counted from the headers (wrappers
    apart); --deep counts every record removed, as the Java consumer read them."""
    t = truth(case)
    src = case_log_dir(case, tmp_path)
    name = f"{t['topic']}-{t['partition']}"
    assert retain(src, tmp_path / "out", *case_arguments(t)).code == 0
    assert retain(src, tmp_path / "deep", *case_arguments(t), "--deep").code == 0
    report = json.loads((tmp_path / "out" / "kfmt-report.json").read_text())
    [kept] = report["outputs"]
    assert kept["entries_digest"] == entries_digest_of(sorted((RETENTION / case / "remaining").glob("*.log")))
    removed, deep = report_entry(tmp_path / "out")["removed"], report_entry(tmp_path / "deep")["removed"]
    first_kept = t["remaining_base_offsets"][0]
    assert deep["records"] == len([r for r in consumer_records(t["source"]) if r["offset"] < first_kept])
    if case.startswith(("v0-", "v1-")) and "-none-" not in case:  # compressed wrappers
        assert removed["records"] == 0 and removed["uncounted_wrappers"] == removed["batches"]
    else:
        assert (removed["records"], removed["uncounted_wrappers"]) == (deep["records"], 0)


# --- crafted directories: the rules' edges ---

def write_partition(path: Path, segments: list[list[tuple]], *, magic: int = 2,
                    mtimes: list[int] | None = None) -> Path:
    """A partition directory whose segments hold the given records: one batch per (offset, timestamp)
    (v0: timestamps ignored, messages have none), each list one segment; `mtimes` for the .log files."""
    storage, root = open_storage(str(path))
    with StagedOutput(storage, root) as out:
        with PartitionWriter(out, "", RollPolicy(), now_ms=NOW) as writer:
            for records in segments:
                writer.roll(records[0][0])
                for offset, timestamp in records:
                    ts = -1 if magic == 0 else timestamp
                    header = BatchHeader(magic=magic, base_offset=offset, last_offset=offset,
                                         timestamp_type=(TimestampType.NO_TIMESTAMP_TYPE if magic == 0
                                                         else TimestampType.CREATE_TIME),
                                         max_timestamp=ts, base_timestamp=ts, records_count=1)
                    writer.append_batch(Batch(header, make_records([offset], [ts], [b"k%d" % offset],
                                                                   [b"value"])))
    for log, ms in zip(sorted(path.glob("*.log")), mtimes or []):
        os.utime(log, ns=(ms * 1_000_000, ms * 1_000_000))
    return path


def remaining_bases(dst: Path) -> list[int]:
    return sorted(int(p.name[:20]) for p in dst.glob("*.log"))


def report_entry(dst: Path) -> dict:
    return json.loads((dst / "kfmt-report.json").read_text())["partitions"][0]


def test_timestamp_less_segments_expire_by_their_log_modification_time(tmp_path):
    minute = 60_000
    src = write_partition(tmp_path / "t-0", [[(0, 0), (1, 0)], [(2, 0)], [(3, 0)], [(4, 0)]], magic=0,
                          mtimes=[NOW - 50 * minute, NOW - 40 * minute, NOW - 5 * minute, NOW - 45 * minute])
    dst = tmp_path / "out"
    assert retain(src, dst, "--now", NOW, "--retention-ms", 30 * minute).code == 0
    # 0 and 2 are older than 30 minutes; 3 is not, so 4 (older again) stays behind it: a prefix goes
    assert remaining_bases(dst) == [3, 4]
    deleted = report_entry(dst)["deleted"]
    assert [d["largest_timestamp"] for d in deleted] == [NOW - 50 * minute, NOW - 40 * minute]
    # the kept segments keep their modification times (time retention of v0 data depends on them)
    assert (dst / f"{3:020d}.log").stat().st_mtime_ns // 1_000_000 == NOW - 5 * minute


def test_time_retention_reads_the_largest_timestamp_not_the_last(tmp_path):
    # segment 0: its first record is the newest; segment 2 ends earlier than segment 1's maximum
    src = write_partition(tmp_path / "t-0", [[(0, T0 + 900), (1, T0 + 100)], [(2, T0 + 500)], [(3, T0 + 200)],
                                             [(4, T0 + 2000)]])
    dst = tmp_path / "out"
    # cutoff between 200 and 500: segment 0 (max 900) is not expired although its last record is
    assert retain(src, dst, "--now", T0 + 1300, "--retention-ms", 1000).code == 0
    assert remaining_bases(dst) == [0, 2, 3, 4]
    dst2 = tmp_path / "out2"
    # cutoff above 900 but at segment 1's 500: 0 goes (900 < 1000 before now), 2 (max 500 -> 1400 old)
    assert retain(src, dst2, "--now", T0 + 1901, "--retention-ms", 1000).code == 0
    assert remaining_bases(dst2) == [4]


def test_retention_ms_compares_strictly(tmp_path):
    src = write_partition(tmp_path / "t-0", [[(0, T0)], [(1, T0 + 10)], [(2, T0 + 20)]])
    dst = tmp_path / "out"
    # now - largest == retention.ms is not a breach (Kafka: now - largestTimestamp > retention.ms)
    assert retain(src, dst, "--now", T0 + 1000, "--retention-ms", 1000).code == 0
    assert remaining_bases(dst) == [0, 1, 2]
    dst2 = tmp_path / "out2"
    assert retain(src, dst2, "--now", T0 + 1001, "--retention-ms", 1000).code == 0
    assert remaining_bases(dst2) == [1, 2]


def test_retention_bytes_at_a_segment_boundary(tmp_path):
    src = write_partition(tmp_path / "t-0", [[(0, T0), (1, T0)], [(2, T0)], [(3, T0), (4, T0)], [(5, T0)]])
    sizes = [p.stat().st_size for p in sorted(src.glob("*.log"))]
    total = sum(sizes)
    cases = {
        total - sizes[0]: [2, 3, 5],  # exactly the size without the first segment: it goes
        total - sizes[0] + 1: [0, 2, 3, 5],  # one byte more: deleting it would leave too little
        total - sizes[0] - sizes[1]: [3, 5],
        sizes[3]: [5],  # down to the last (active) segment, which stays
        0: [5],
        total: [0, 2, 3, 5],
        total + 1: [0, 2, 3, 5],  # the log is below retention.bytes: nothing to do
    }
    for i, (limit, expected) in enumerate(sorted(cases.items())):
        dst = tmp_path / f"out{i}"
        assert retain(src, dst, "--now", NOW, "--retention-bytes", limit).code == 0
        assert remaining_bases(dst) == expected, limit


def test_log_start_offset_inside_a_segment(tmp_path):
    src = write_partition(tmp_path / "t-0", [[(0, T0), (1, T0), (2, T0)], [(3, T0), (4, T0)], [(5, T0)]])
    for start, expected, entry in [(4, [3, 5], 4), (3, [3, 5], None), (2, [0, 3, 5], 2), (5, [5], None),
                                   (0, [0, 3, 5], None)]:
        logs = tmp_path / f"logs{start}"
        shutil.copytree(src, logs / "t-0")
        dst = tmp_path / f"out{start}"
        assert retain(logs, dst, "--now", NOW, "--log-start-offset", start).code == 0
        assert remaining_bases(dst / "t-0") == expected
        assert report_entry(dst)["log_start_offset"] == max(start, expected[0])
        checkpoint = dst / "log-start-offset-checkpoint"
        assert checkpoint_entries(checkpoint).get(("t", 0)) == entry
        # what a consumer reads starts at the log start offset; what lies below it in the
        # segment holding it is there for --include-deleted
        cat = run_kfmt("cat", dst / "t-0", "--format", "json")
        assert [r["offset"] for r in map(json.loads, cat.lines)][0] == max(start, expected[0])
        cat = run_kfmt("cat", dst / "t-0", "--format", "json", "--include-deleted")
        assert [r["offset"] for r in map(json.loads, cat.lines)][0] == expected[0]


def test_a_checkpointed_log_start_offset_is_honoured_and_never_lowered(tmp_path):
    logs = tmp_path / "logs"
    write_partition(logs / "t-0", [[(0, T0), (1, T0)], [(2, T0)], [(3, T0)]])
    (logs / "log-start-offset-checkpoint").write_text("0\n1\nt 0 2\n")
    dst = tmp_path / "out"
    # the requested offset lies below the checkpoint's: the log start offset never moves back
    assert retain(logs, dst, "--now", NOW, "--log-start-offset", 1).code == 0
    assert remaining_bases(dst / "t-0") == [2, 3]
    assert report_entry(dst)["log_start_offset"] == 2


def test_nothing_beyond_the_high_watermark_goes(tmp_path):
    logs = tmp_path / "logs"
    write_partition(logs / "t-0", [[(0, T0)], [(1, T0)], [(2, T0)], [(3, T0)]])
    (logs / "replication-offset-checkpoint").write_text("0\n1\nt 0 2\n")
    dst = tmp_path / "out"
    assert retain(logs, dst, "--now", NOW, "--retention-ms", 0).code == 0
    # segment 1 ends at 2 <= hw 2; segment 2 would end at 3 > hw
    assert remaining_bases(dst / "t-0") == [2, 3]
    # and a log start offset above the high watermark is refused, as DeleteRecords refuses it
    result = retain(logs, tmp_path / "out2", "--now", NOW, "--log-start-offset", 3)
    assert result.code == 2 and "high watermark" in result.err


def test_the_active_segment_stays_unless_include_active(tmp_path):
    src = write_partition(tmp_path / "t-0", [[(0, T0)], [(1, T0), (2, T0 + 5)]])
    dst = tmp_path / "out"
    assert retain(src, dst, "--now", NOW, "--retention-ms", 1000).code == 0
    assert remaining_bases(dst) == [1]
    assert any("active segment" in n for n in report_entry(dst)["notes"])
    # with --include-active the broker's behaviour: everything goes, an empty segment at the log end
    dst2 = tmp_path / "out2"
    assert retain(src, dst2, "--now", NOW, "--retention-ms", 1000, "--include-active").code == 0
    assert remaining_bases(dst2) == [3]
    assert (dst2 / f"{3:020d}.log").stat().st_size == 0
    entry = report_entry(dst2)
    assert entry["rolled_empty_segment"] == 3 and entry["log_start_offset"] == 3
    assert run_kfmt("verify", dst2).code == 0
    assert run_kfmt("cat", dst2, "--format", "json").lines == []


def test_dry_run_lists_the_deletions_and_writes_nothing(tmp_path):
    src = write_partition(tmp_path / "t-0", [[(0, T0)], [(1, T0 + 10)], [(2, T0 + 20)]])
    dst = tmp_path / "out"
    result = retain(src, dst, "--now", T0 + 1005, "--retention-ms", 1000, "--dry-run", "--format", "json")
    assert result.code == 0, result.err
    assert not dst.exists()
    report = json.loads(result.out)
    assert report["dry_run"] is True
    assert [d["base_offset"] for d in report["partitions"][0]["deleted"]] == [0]
    text = retain(src, dst, "--now", T0 + 1005, "--retention-ms", 1000, "--dry-run")
    assert "would delete 1 segment(s)" in text.out and not dst.exists()


def test_usage_and_data_errors(tmp_path):
    src = write_partition(tmp_path / "t-0", [[(0, T0)], [(1, T0)]])
    dst = tmp_path / "out"
    dst.mkdir()
    (dst / "x").write_text("taken")
    assert retain(src, dst, "--retention-ms", 0).code == 2
    assert retain(src, tmp_path / "o2", "--retention-bytes", -5).code == 2
    # a corrupt batch in a segment that stays is bad data: exit 65, one line, nothing published
    log = sorted(src.glob("*.log"))[-1]
    data = bytearray(log.read_bytes())
    data[-3] ^= 0xFF
    log.write_bytes(bytes(data))
    result = retain(src, tmp_path / "o3", "--retention-ms", 1)
    assert result.code == 65 and len(result.err.strip().splitlines()) == 1, result.err
    assert not (tmp_path / "o3").exists()


# --- the decision as a property over random segment lists ---

segment_lists = st.lists(st.tuples(st.integers(1, 50), st.integers(0, 1000), st.integers(0, 3000)),
                         min_size=1, max_size=12)


@settings(max_examples=300, deadline=None)
@given(segment_lists, st.integers(-1, 400), st.integers(-1, 1500), st.integers(0, 200),
       st.booleans(), st.integers(0, 3000))
def test_decision_properties(raw, retention_bytes, retention_ms, requested_start, include_active, now):
    segments, base = [], 0
    for gap, size, largest in raw:
        segments.append(SegmentAge(base, size, largest, False))
        base += gap
    leo = base
    options = RetentionOptions(retention_ms=retention_ms, retention_bytes=retention_bytes,
                               log_start_offset=requested_start, now_ms=now, include_active=include_active)
    if requested_start > leo:
        with pytest.raises(UsageError):
            decide_retention(segments, log_end_offset=leo, log_start_offset=0, high_watermark=None,
                             options=options)
        return
    d = decide_retention(segments, log_end_offset=leo, log_start_offset=0, high_watermark=None,
                         options=options)
    deleted = [x.base_offset for x in d.deleted]
    # a prefix goes, in order, and what stays is the rest
    assert deleted == [s.base_offset for s in segments[:len(deleted)]]
    assert d.kept == [s.base_offset for s in segments[len(deleted):]]
    if not include_active:
        assert segments[-1].base_offset in d.kept
    # the log start offset: at least the request and the first remaining base, never beyond the end
    first = d.kept[0] if d.kept else d.rolled
    assert d.log_start_offset == max(requested_start, first)
    assert d.rolled is None or (d.rolled == leo and not d.kept and include_active)
    by_base = {s.base_offset: s for s in segments}
    following = {s.base_offset: (segments[i + 1].base_offset if i + 1 < len(segments) else leo)
                 for i, s in enumerate(segments)}
    for x in d.deleted:
        seg = by_base[x.base_offset]
        if x.rule == "log start offset":
            assert following[x.base_offset] <= requested_start
        elif x.rule == "retention.ms":
            assert now - seg.largest_timestamp > retention_ms >= 0
        else:
            assert x.rule == "retention.bytes" and retention_bytes >= 0
    # retention.bytes never leaves the log smaller than the limit through its own deletions
    by_size = [x for x in d.deleted if x.rule == "retention.bytes"]
    if by_size:
        after_size_rule = sum(s.size for s in segments) - sum(
            x.size for x in d.deleted if x.rule in ("log start offset", "retention.bytes"))
        assert after_size_rule >= retention_bytes
    # the first segment that stays breaks every active rule (unless it is the protected active one)
    if d.kept and not (d.kept[0] == segments[-1].base_offset):
        stay = by_base[d.kept[0]]
        assert following[stay.base_offset] > d.log_start_offset or stay is segments[-1]
        assert retention_ms < 0 or now - stay.largest_timestamp <= retention_ms
        if retention_bytes >= 0:
            remaining = sum(by_base[b].size for b in d.kept)
            assert remaining - stay.size < retention_bytes


@pytest.mark.spark
def test_spark_run_of_a_log_directory_equals_the_in_process_run(tmp_path):
    logs = tmp_path / "logs"
    for i in range(3):
        write_partition(logs / f"t-{i}", [[(0, T0)], [(1, T0 + 20 * i)], [(2, T0 + 20)], [(3, T0 + 30)]])
    (logs / "log-start-offset-checkpoint").write_text("0\n1\nt 2 2\n")
    args = ["--now", T0 + 1015, "--retention-ms", 1000]
    spark, local = tmp_path / "spark", tmp_path / "local"
    result = run_kfmt("retain", logs, spark, "--no-progress", *args)
    assert result.code == 0, result.err
    assert retain(logs, local, *args).code == 0
    tree = lambda d: {str(p.relative_to(d)): p.read_bytes() for p in d.rglob("*")  # noqa: E731
                      if p.is_file() and p.name != "kfmt-report.json"}
    assert tree(spark) == tree(local)
    # t-1's second segment is recent; t-2's too, but its checkpointed log start offset is 2
    assert [remaining_bases(spark / f"t-{i}") for i in range(3)] == [[2, 3], [1, 2, 3], [2, 3]]
