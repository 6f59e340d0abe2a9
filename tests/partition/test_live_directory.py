"""kfmt on the log directory of a running broker (docs/operations.md, "Reading a running broker's
disk"): the read-only commands and `export --append`, run again and again while a separate process
(support.live_writer: appends, rolls, retention through `.deleted`, the cleaner's `.cleaned`/`.swap`
sequence) changes the directory, checked against what that process wrote, record by record."""
from __future__ import annotations

import base64
import hashlib
import json
import shutil
import time
from pathlib import Path

import pyarrow.dataset as ds
import pytest
from support.cli import run_kfmt
from support.live_writer import LiveWriter

PLAIN = [("live", 0), ("live", 1)]
COMPACTED = [("live-cmp", 0)]
RUN_SECONDS = 12  # of reading while the writer writes (each test stays well under 30 s)
# What a reader of a running broker's directory may say on stderr (one line each)
EXPECTED_WARNINGS = ("a batch a running broker is still appending",  # the active segment's torn tail
                     "while being read (the broker deleted or replaced it")  # a segment that went


def sha(b64: str | None) -> str | None:
    return None if b64 is None else hashlib.sha256(base64.b64decode(b64)).hexdigest()


def check_stderr(err: str, expected=EXPECTED_WARNINGS) -> None:
    assert "Traceback" not in err, err
    for line in err.splitlines():
        assert line.startswith("kfmt: warning: ") and any(w in line for w in expected), err


def cat_records(log_dir: Path) -> tuple[dict, str]:
    result = run_kfmt("cat", log_dir, "--format", "json")
    assert result.code == 0, result.err
    check_stderr(result.err)
    out: dict = {}
    for line in result.lines:
        r = json.loads(line)
        out.setdefault((r["topic"], r["partition"]), []).append(r)
    return out, result.err


def check_against_truth(records: dict, truth) -> None:
    """Each record is the one the writer wrote at its offset; offsets increase, without a gap where
    nothing is compacted."""
    for tp, rs in records.items():
        offsets = [r["offset"] for r in rs]
        assert offsets == sorted(set(offsets)), tp
        if tp not in COMPACTED:
            assert offsets == list(range(offsets[0], offsets[0] + len(offsets))), tp
        for r in rs:
            t = truth[tp].records[r["offset"]]
            assert (r["timestamp"], sha(r["key"]), sha(r["value"])) == (t.timestamp, t.key, t.value), r


def check_dump(part: Path) -> None:
    """kafka-dump-log's view of the active segment and its preallocated indexes: the batches and
    entries written so far. A file retention removed after it was listed is a one-line error."""
    log = sorted(part.glob("*.log"))[-1]
    for name in (log.name, log.stem + ".index", log.stem + ".timeindex"):
        result = run_kfmt("dump", part / name, "--deep-iteration")
        assert "Traceback" not in result.err
        if result.code != 0:
            assert not (part / name).exists() and len(result.err.splitlines()) == 1, result.err
            continue
        # a preallocated index without an entry yet: kafka-dump-log takes slot 0, (base, 0), for
        # an entry and reports that the batch there ends elsewhere; nothing else is a mismatch
        base = int(log.stem)
        allowed = {f"Mismatches in :{part / name}", f"  Index offset: {base}, log offset: ",
                   "The following indexed offsets are not found in the log.",
                   f"Indexed offset: {base}, found log offset: "}
        assert all(any(line.startswith(a) for a in allowed) for line in result.err.splitlines()), \
            result.err
        assert result.lines[0] == f"Dumping {part / name}", result.lines[:2]
        if name.endswith(".log"):  # the batches so far, then at most a torn one being appended
            tails = [line for line in result.lines if line.startswith("Found ")]
            assert len(tails) <= 1 and result.lines[-1] == (tails or result.lines)[-1], result.out[-500:]


def test_cat_info_verify_dump_while_a_broker_writes(tmp_path):
    logs = tmp_path / "logs"
    seen, runs, warned = [], 0, 0
    with LiveWriter(logs, PLAIN, COMPACTED, seed=1) as writer:
        writer.wait_for(rolls=4)
        deadline = time.monotonic() + RUN_SECONDS
        while time.monotonic() < deadline:
            records, err = cat_records(logs)
            seen.append(records)
            warned += bool(err)
            info = run_kfmt("info", logs, "--format", "json")
            assert info.code == 0, info.err
            check_stderr(info.err)
            by_tp = {(i["topic"], i["partition"]): i for i in map(json.loads, info.lines)}
            assert set(by_tp) == set(PLAIN + COMPACTED)
            for tp in PLAIN:  # counted as one listing holds them: contiguous from the log start
                i = by_tp[tp]
                assert i["records"] == i["log_end_offset"] - i["log_start_offset"], i
            check_dump(logs / "live-0")
            verify = run_kfmt("verify", logs, "--format", "json")
            check_stderr(verify.err)
            report = json.loads(verify.out)
            assert verify.code == 0 and report["summary"]["ok"], [
                p for p in report["problems"] if p["severity"] == "error"]
            runs += 1
        stats = writer.stats
    truth = writer.truth()
    assert stats["rolls"] >= 8 and stats["deleted"] >= 2 and stats["cleaned"] >= 1, stats
    assert runs >= 3
    for records in seen:
        check_against_truth(records, truth)
    # stopped: the whole log, exactly as written
    final, err = cat_records(logs)
    assert err == ""
    check_against_truth(final, truth)
    for tp in PLAIN:
        t = truth[tp]
        assert [r["offset"] for r in final[tp]] == list(range(t.log_start, t.next_offset))
    for tp in COMPACTED:
        assert [r["offset"] for r in final[tp]] == sorted(truth[tp].present)
    verify = run_kfmt("verify", logs)
    assert verify.code == 0, verify.out


def exported(dst: Path) -> dict:
    table = ds.dataset(dst, partitioning="hive", format="parquet").to_table(
        columns=["topic", "partition", "offset", "timestamp_ms", "key", "value"])
    out: dict = {}
    for row in table.to_pylist():
        out.setdefault((row["topic"], row["partition"]), []).append(row)
    return out


def test_export_append_while_a_broker_writes(tmp_path):
    logs, dst = tmp_path / "logs", tmp_path / "export"
    lost: dict = {}
    runs = 0

    def export_append():
        result = run_kfmt("export", logs, dst, "--append", "--master", "inprocess", "--no-progress")
        assert result.code == 0, result.err
        check_stderr(result.err, EXPECTED_WARNINGS + ("were deleted from the log (retention",))
        # the report of the last run that wrote (a run with nothing new leaves it as it was)
        for p in json.loads((dst / "_kfmt-report.json").read_text()).get("append", []):
            if p["lost"] is not None:
                lost.setdefault((p["topic"], p["partition"]), set()).add(
                    (p["lost"]["from"], p["lost"]["to"]))
        return result

    with LiveWriter(logs, PLAIN, COMPACTED, seed=2) as writer:
        writer.wait_for(rolls=3)
        deadline = time.monotonic() + RUN_SECONDS
        while time.monotonic() < deadline:
            export_append()
            runs += 1
        stats = writer.stats
    truth = writer.truth()
    export_append()  # everything the writer wrote until it stopped
    report = (dst / "_kfmt-report.json").read_bytes()
    export_append()  # nothing new: writes nothing
    assert (dst / "_kfmt-report.json").read_bytes() == report
    assert runs >= 3 and stats["deleted"] >= 2 and stats["cleaned"] >= 1, (runs, stats)

    state = json.loads(next(dst.glob("_kfmt-export-state.json")).read_text())
    marks = {(m["topic"], m["partition"]): m["next_offset"] for m in state["partitions"]} \
        if isinstance(state.get("partitions"), list) else None
    rows = exported(dst)
    for tp in PLAIN + COMPACTED:
        t = truth[tp]
        offsets = [r["offset"] for r in rows[tp]]
        assert len(offsets) == len(set(offsets)), f"{tp}: exported twice"
        for r in rows[tp]:
            w = t.records[r["offset"]]
            assert (r["timestamp_ms"], hashlib.sha256(r["key"]).hexdigest() if r["key"] is not None
                    else None, hashlib.sha256(r["value"]).hexdigest() if r["value"] is not None
                    else None) == (w.timestamp, w.key, w.value), r
        start, end = min(offsets), t.next_offset
        if tp in PLAIN:
            # every offset from where the export began, except what retention took before a run
            # read it, which the run reported
            missing = set(range(start, end)) - set(offsets)
            reported = {o for a, b in lost.get(tp, []) for o in range(a, b)}
            assert missing == reported, (tp, sorted(missing)[:10], lost.get(tp))
        else:  # what the log still holds from the export's start was exported
            assert {o for o in t.present if o >= start} <= set(offsets), tp
        if marks is not None:
            assert marks[tp] == end


def test_what_a_restarted_broker_would_load(tmp_path):
    """Files and directories in transit are read as LogLoader would load them: `.deleted` and
    `.cleaned` files ignored, a `.swap` log in place of the segments it covers, `-delete` and
    `-future` partition directories skipped."""
    logs = tmp_path / "logs"
    with LiveWriter(logs, [("live", 0)], COMPACTED, seed=3) as writer:
        writer.wait_for(rolls=12, deleted=1)
    truth = writer.truth()
    before, _ = cat_records(logs)
    part = logs / "live-0"
    segs = sorted(part.glob("*.log"))
    assert len(segs) >= 3
    # a cleaning in the middle of LocalLog.replaceSegments: the first two segments' bytes as one
    # swap log named after the first, both originals still there, and the next one's .cleaned output
    (part / (segs[0].name + ".swap")).write_bytes(segs[0].read_bytes() + segs[1].read_bytes())
    (part / (segs[2].name + ".cleaned")).write_bytes(b"\x00" * 100)
    (part / (segs[0].stem + ".index.swap")).write_bytes(b"")
    (part / "00000000000000000000.log.deleted").write_bytes(b"garbage")
    shutil.copytree(part, logs / ("live-0." + "ab" * 16 + "-delete"))
    shutil.copytree(part, logs / ("live-0." + "cd" * 16 + "-future"))
    after, err = cat_records(logs)
    assert err == ""
    assert after == before
    check_against_truth(after, truth)
    info = run_kfmt("info", part, "--format", "json")
    assert json.loads(info.out)["segments"] == len(segs) - 1
    verify = run_kfmt("verify", logs)
    assert verify.code == 0, verify.out


def stopped_log(tmp_path) -> tuple[Path, dict]:
    logs = tmp_path / "logs"
    with LiveWriter(logs, [("live", 0)], seed=4, retain_segments=100) as writer:
        writer.wait_for(rolls=4)
    return logs, writer.truth()


def test_a_segment_deleted_after_the_listing_ends_cat_there(tmp_path):
    """Retention renames the second segment `.deleted` between cat's listing and its reading: the
    first segment's records, then one warning naming the file and the last offset given."""
    import argparse
    import warnings

    from kfmt.cli.cat import live_partition_lines
    from kfmt.errors import KfmtWarning
    from kfmt.partition.layout import find_partitions
    from kfmt.storage.store import open_storage

    logs, truth = stopped_log(tmp_path)
    storage, path = open_storage(str(logs / "live-0"))
    [part] = find_partitions(storage, path)
    second = Path(part.segments[1].log.path)
    second.rename(second.with_name(second.name + ".deleted"))
    args = argparse.Namespace(include_deleted=False, from_offset=None, from_timestamp=None,
                              isolation="read_uncommitted", max_records=None, include_control=False,
                              format="json")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lines = list(live_partition_lines(part, args, {}))
    offsets = [r["offset"] for block in lines for r in map(json.loads, block.splitlines())]
    assert offsets == list(range(0, part.segments[1].base_offset))
    messages = [str(w.message) for w in caught if issubclass(w.category, KfmtWarning)]
    assert len(messages) == 1 and str(second) in messages[0], messages
    assert f"up to offset {part.segments[1].base_offset - 1}" in messages[0]
    assert all(truth[("live", 0)].records[o] for o in offsets)


def test_a_segment_deleted_after_the_plan_ends_the_export_there(tmp_path):
    """An export whose second segment goes after the plan: the tasks after it are not published,
    and the partition's high-water mark is where the records written end."""
    import warnings

    from kfmt.errors import KfmtWarning
    from kfmt.storage.staging import StagedOutput
    from kfmt.storage.store import open_storage
    from kfmt.transforms.export_job import ExportOptions, plan_export, run_export_job

    logs, truth = stopped_log(tmp_path)
    src, src_path = open_storage(str(logs))
    dst, dst_path = open_storage(str(tmp_path / "export"))
    options = ExportOptions(split_bytes=8 << 10)  # several tasks per partition
    out = StagedOutput(dst, dst_path).__enter__()  # never committed: aborted at the end
    try:
        plan = plan_export(src, src_path, dst, dst_path, options)
        [p] = plan.partitions
        assert len(p.units) >= 4
        segs = p.part.segments
        second = Path(segs[1].log.path)
        second.rename(second.with_name(second.name + ".deleted"))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            job = run_export_job(plan, out.target(), dst, dst_path, "inprocess", False)
        messages = [str(w.message) for w in caught if issubclass(w.category, KfmtWarning)]
        assert len(messages) == 1 and str(second) in messages[0], messages
        assert job.next_offsets[("live", 0)] == segs[1].base_offset
        assert job.inputs[0].records == segs[1].base_offset
        # only the files of the tasks before the gone segment are left in the staging directory
        staged = sorted(f for f in Path(out.target().root).rglob("*")
                        if f.is_file() and not f.name.startswith("_"))  # not the staging's own
        assert [str(f) for f in staged] == sorted(out.target().files().path(r.rel)
                                                  for r in job.files[0])
    finally:
        out.abort()
    assert truth[("live", 0)].next_offset > segs[1].base_offset


def data_source_rows(logs: Path) -> dict:
    """What the `kafka-log` data source's tasks return (its reader, without Spark), by partition."""
    import pyarrow as pa

    from kfmt.pipelines.datasource import KafkaLogDataSource
    from kfmt.rows.columns import EXPORT_SCHEMA

    r = KafkaLogDataSource({"path": str(logs)}).reader(None)
    table = pa.Table.from_batches([b for unit in r.partitions() for b in r.read(unit)], EXPORT_SCHEMA)
    out: dict = {}
    for row in table.select(["topic", "partition", "offset", "timestamp", "key", "value"]).to_pylist():
        out.setdefault((row["topic"], row["partition"]), []).append(row)
    return out


def check_rows_against_truth(rows: dict, truth) -> None:
    for tp, rs in rows.items():
        offsets = [r["offset"] for r in rs]
        assert offsets == sorted(set(offsets)), tp
        if tp not in COMPACTED:
            assert offsets == list(range(offsets[0], offsets[0] + len(offsets))), tp
        for r in rs:
            t = truth[tp].records[r["offset"]]
            digests = tuple(None if v is None else hashlib.sha256(v).hexdigest()
                            for v in (r["key"], r["value"]))
            assert digests == (t.key, t.value), r


def test_the_data_source_while_a_broker_writes(tmp_path):
    """The data source's tasks read what their listing planned: every row correct and, where nothing
    is compacted, contiguous; a segment that goes while its task runs fails the read with the one-line
    message (as Spark's Kafka source fails on data loss by default), never with a wrong row."""
    from kfmt.partition.live import SegmentGone

    logs = tmp_path / "logs"
    results, failures = [], []
    with LiveWriter(logs, PLAIN, COMPACTED, seed=5) as writer:
        writer.wait_for(rolls=4)
        deadline = time.monotonic() + RUN_SECONDS / 2
        while time.monotonic() < deadline:
            try:
                results.append(data_source_rows(logs))
            except SegmentGone as err:
                failures.append(str(err))
        writer.pause()  # between two requests: preallocated indexes, no torn tail
        paused = data_source_rows(logs)
        cat, _ = cat_records(logs)
        writer.resume()
    truth = writer.truth()
    assert len(results) >= 3, failures
    for rows in results + [paused]:
        check_rows_against_truth(rows, truth)
    assert {tp: [r["offset"] for r in rs] for tp, rs in paused.items()} == \
        {tp: [r["offset"] for r in rs] for tp, rs in cat.items()}
    assert all("while being read (the broker deleted or replaced it" in f for f in failures)


@pytest.mark.spark
def test_spark_reads_a_running_brokers_directory(tmp_path):
    """`spark.read.format("kafka-log")` on the directory of a paused writer (as a broker leaves it
    between two requests: preallocated indexes of the active segments, files in transit after a
    clean or a deletion) gives cat's records."""
    from kfmt.pipelines.datasource import register
    from kfmt.pipelines.session import spark_session, stop_session

    logs = tmp_path / "logs"
    spark = spark_session("local[2]")
    try:
        register(spark, check_workers=False)  # local workers are this interpreter
        with LiveWriter(logs, PLAIN, COMPACTED, seed=6, delete_delay=30) as writer:
            writer.wait_for(rolls=8, deleted=1, cleaned=1)
            writer.pause()
            assert list(logs.glob("*/*.deleted")), "nothing in transit"
            rows = spark.read.format("kafka-log").load(str(logs)).select(
                "topic", "partition", "offset", "key", "value").collect()
            cat, err = cat_records(logs)
            writer.resume()
        truth = writer.truth()
    finally:
        stop_session()
    by_tp: dict = {}
    for r in rows:
        by_tp.setdefault((r["topic"], r["partition"]), []).append(r.asDict())
    by_tp = {tp: sorted(rs, key=lambda r: r["offset"]) for tp, rs in by_tp.items()}
    check_rows_against_truth(by_tp, truth)
    assert {tp: [r["offset"] for r in rs] for tp, rs in by_tp.items()} == \
        {tp: [r["offset"] for r in rs] for tp, rs in cat.items()}
