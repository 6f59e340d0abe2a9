"""Issue 28, point 2: every range retention deletes before a run reads it is reported.

The live writer (tests/support/live_writer.py: a separate process that rolls segments and deletes
the oldest as retention does, moving the log start offset first) is let run far ahead of the
schedule: between two runs of `kfmt archive` and `kfmt export --append`, retention deletes every
segment the previous run saw and some more. Each run is made while the writer is paused, so the
directory at that moment is the independent truth: what the source still holds (its first segment,
its log start offset) and, from the writer's record of what it wrote, where each run ended.

Checked: each lost range named with its exact offsets, once, by the run that found it, in the
summary line (or the JSON report's `lost`), in the archive manifest, in the export state and in an
Iceberg export's snapshot summary (the same runs into a table, read back with pyiceberg);
`--fail-on-loss` exits 3 after publishing; and at the end the restored archive and the export,
together with the ranges reported lost, cover every offset the writer wrote, each record the
writer's, nothing twice.
"""
from __future__ import annotations

import base64
import hashlib
import json
import re
from pathlib import Path

import pyarrow.dataset as ds
import pytest
from support.cli import run_kfmt
from support.live_writer import LiveWriter

TP, NAME = ("live-del", 0), "live-del-0"
# small segments, retention keeping two: a segment lives a fraction of a second
WRITER = dict(segment_bytes=4096, index_interval_bytes=1024, retain_segments=2, step_seconds=0.002,
              delete_delay=0.05)
RUNS = 4
LOST_LINE = re.compile(r"lost offsets (\d+)\.\.(\d+) of ([\w.-]+): deleted by retention or "
                       r"DeleteRecords before any run read them")


def kfmt(*args) -> tuple[int, str, str]:
    result = run_kfmt(*args, "--master", "inprocess", "--no-progress")
    assert "Traceback" not in result.err
    return result.code, result.out, result.err


def source_start(logs: Path) -> int:
    """The partition's first segment as the paused writer left it (retention moved the log start
    offset to it, and deleted everything below)."""
    return min(int(p.name[:20]) for p in (logs / NAME).glob("*.log"))


def active_base(logs: Path) -> int:
    return max(int(p.name[:20]) for p in (logs / NAME).glob("*.log"))


def reported(out: str, as_json: bool) -> list[tuple[int, int]]:
    if as_json:
        return [(e["from"], e["to"]) for e in json.loads(out).get("lost", [])]
    return [(int(a), int(b) + 1) for a, b, name in LOST_LINE.findall(out) if name == NAME]


def sha(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


def iceberg_table(dst: Path):
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog("kfmt", uri=f"sqlite:///{dst / '_catalog.db'}", warehouse=f"file://{dst / 'warehouse'}")
    return catalog.load_table("kafka.records")


def covered(offsets: set[int], lost: list[tuple[int, int]], start: int, end: int) -> None:
    """`offsets` and the lost ranges are disjoint and together every offset in [start, end)."""
    gone = {o for a, b in lost for o in range(a, b)}
    assert not offsets & gone, sorted(offsets & gone)[:10]
    assert offsets | gone == set(range(start, end)), sorted(set(range(start, end)) - offsets - gone)[:10]


@pytest.mark.timeout(300)
def test_retention_outrunning_the_schedule_loses_nothing_without_a_word(tmp_path):
    logs, archive, export = tmp_path / "logs", tmp_path / "archive", tmp_path / "export"
    table = tmp_path / "table"
    expected_archive, expected_export = [], []
    said_archive, said_export, said_table = [], [], []
    archive_end = export_end = first_start = None
    with LiveWriter(logs, [TP], seed=28, **WRITER) as writer:
        writer.wait_for(rolls=2)
        for run in range(RUNS):
            writer.pause()  # the directory as the broker leaves it between two requests
            start, written_end = source_start(logs), max(writer.truth()[TP].records) + 1
            first_start = start if run == 0 else first_start  # where the archive and export begin
            if archive_end is not None and start > archive_end:
                expected_archive.append((archive_end, start))
            if export_end is not None and start > export_end:
                expected_export.append((export_end, start))
            as_json = run % 2 == 0
            fmt = ["--format", "json"] if as_json else []
            code, out, err = kfmt("archive", logs, archive, "--fail-on-loss", *fmt)
            assert code == (3 if run else 0), (code, err)
            said_archive += reported(out, as_json)
            for a, b in reported(out, as_json):
                assert f"lost offsets {a}..{b - 1} of {NAME}" in err  # the warning too
            code, out, err = kfmt("export", logs, export, "--append", "--fail-on-loss",
                                  *(["--output", "json"] if as_json else []))
            assert code == (3 if run else 0), (code, err)
            if run:
                assert err.splitlines()[-1].startswith("kfmt: error: ") and "--fail-on-loss" in err
            said_export += reported(out, as_json)
            # the same run into an Iceberg table: the same source, so the same ranges
            code, out, err = kfmt("export", logs, table, "--format", "iceberg", "--append", "--fail-on-loss",
                                  *(["--output", "json"] if as_json else []))
            assert code == (3 if run else 0), (code, err)
            said_table += reported(out, as_json)
            # a running broker: the archive holds up to its active segment, the export to the end
            archive_end, export_end = active_base(logs), written_end
            before = writer.stats["rolls"]
            writer.resume()
            # retention deletes every segment this run saw, and more
            writer.wait_for(timeout=60, rolls=before + WRITER["retain_segments"] + 3)
    # the writer stopped cleanly: a last run of each takes everything, and finds the last gap
    start = source_start(logs)
    expected_archive.append((archive_end, start))
    expected_export.append((export_end, start))
    code, out, _err = kfmt("archive", logs, archive)
    assert code == 0
    said_archive += reported(out, False)
    code, out, _err = kfmt("export", logs, export, "--append")
    assert code == 0
    said_export += reported(out, False)
    code, out, _err = kfmt("export", logs, table, "--format", "iceberg", "--append")
    assert code == 0
    said_table += reported(out, False)

    assert len(expected_archive) == RUNS and len(expected_export) == RUNS
    assert said_archive == expected_archive
    assert said_export == expected_export
    assert said_table == expected_export
    # the manifest and the export state keep them
    manifest = json.loads((archive / "_kfmt_manifest.json").read_text())
    [part] = manifest["archive"]["partitions"]
    assert [(e["from"], e["to"]) for e in part["lost"]] == expected_archive
    state = json.loads((export / "_kfmt-export-state.json").read_text())
    [entry] = state["partitions"]
    assert [tuple(r) for r in entry["lost"]] == expected_export
    iceberg = iceberg_table(table)
    summary = iceberg.current_snapshot().summary.additional_properties
    assert [tuple(r) for r in json.loads(summary[f"kfmt.lost.{TP[0]}.{TP[1]}"])] == expected_export
    assert kfmt("export", logs, table, "--format", "iceberg", "--append")[1].startswith("nothing new")

    # together with what they hold, every offset the writer wrote: nothing lost without a word
    truth = writer.truth()[TP]
    end = truth.next_offset
    assert kfmt("restore", archive, tmp_path / "restored")[0] == 0
    restored = [json.loads(line) for line in run_kfmt("cat", tmp_path / "restored", "--format", "json").lines]
    covered({r["offset"] for r in restored}, expected_archive, first_start, end)
    for r in restored:
        w = truth.records[r["offset"]]
        value = None if r["value"] is None else base64.b64decode(r["value"])
        assert (r["timestamp"], sha(value)) == (w.timestamp, w.value)
    rows = ds.dataset(export, partitioning="hive", format="parquet").to_table(
        columns=["offset", "timestamp_ms", "value"]).to_pylist()
    offsets = [row["offset"] for row in rows]
    assert len(offsets) == len(set(offsets)), "an offset exported twice"
    covered(set(offsets), expected_export, first_start, end)
    for row in rows:
        w = truth.records[row["offset"]]
        assert (row["timestamp_ms"], sha(row["value"])) == (w.timestamp, w.value)
    table_offsets = iceberg.scan(selected_fields=("offset",)).to_arrow().column("offset").to_pylist()
    assert sorted(table_offsets) == sorted(offsets)  # the table holds what the files hold
