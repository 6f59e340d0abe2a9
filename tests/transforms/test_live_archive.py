"""Issue 17's end-to-end check: `kfmt archive` (with and without --include-active), `kfmt export
--append` and `kfmt cat`, each a separate process, run again and again while support.live_writer (a
separate process writing a log directory as a broker does: appends with torn tails, rolls, retention
through `.deleted`, the cleaner's `.cleaned`/`.swap` sequence on a compacted partition) changes the
directory under them. Checked against what the writer says it wrote (its truth file):

* every generation the runs published restores (`kfmt restore --generation N`), passes `kfmt verify`
  and holds, at each offset, the record the writer wrote there, nothing twice, from offset 0 without
  a gap where nothing is compacted and with each key's latest record where it is;
* after the writer stopped and one last archive and export run: the latest generation holds exactly
  the records the writer wrote from the archive's log start on (the compacted partition: the offsets
  the log still holds), and so does the appended export (plus, on the compacted partition, records
  it exported before the cleaner removed them), nothing twice;
* a re-run with nothing new writes nothing: no generation, no object, no export file;
* no run prints a traceback; every run exits 0, its warnings one line each.

The writer is sized so that a segment outlives several runs on a loaded two-core machine (retention
would otherwise delete a segment no run saw: an archive cannot hold what it never read).
The last tests catch the cleaner between two of its steps on purpose (the writer stopped, its steps
replayed by hand: the runs say --exclude-active, as the lock of a running broker would): a generation archived while a
`.swap` is there, and a cleaning finished between a run's listing and its reading.
"""
from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow.dataset as ds
import pytest
from support.cli import run_kfmt
from support.live_writer import LiveWriter

PLAIN = [("live", 0), ("live", 1)]
COMPACTED = [("live-cmp", 0)]
# A partition rolls about every 2 s and retention keeps 8 segments: a rolled segment lives some 14 s,
# several rounds of each kind of run (archive, export and cat run side by side, each in a loop of
# its own, each run 2-4 s on a loaded machine).
# The cleaner's phases (`.cleaned`, `.swap`, `.deleted`, renamed into place) are 0.3 s apart, so that
# runs meet them now and then.
WRITER = dict(segment_bytes=8192, index_interval_bytes=1024, retain_segments=8, step_seconds=0.03,
              clean_every_rolls=3, transit_pause=0.3)
ENOUGH = dict(deleted=4, cleaned=2)  # the runs go on until the writer did this much...
MIN_RUNS = 3  # ...and each loop made this many runs...
MAX_SECONDS = 30  # ...or this long (bounded: the machine may be slow)
REQUIRED = dict(deleted=2, cleaned=1)  # and at least this happened while they ran
RUN_TIMEOUT = 60


def kfmt(*args, in_process: bool = False) -> subprocess.CompletedProcess:
    """`kfmt ARGS` as its own process (as cron would run it), or `in_process` (quicker: for runs
    against a directory nobody writes); checked: exit 0, no traceback, every line of stderr a
    one-line warning."""
    if in_process:
        done = run_kfmt(*args)
        result = subprocess.CompletedProcess(args, done.code, done.out, done.err)
    else:
        result = subprocess.run([sys.executable, "-m", "kfmt", *map(str, args)],
                                capture_output=True, text=True, timeout=RUN_TIMEOUT)
    check_run(args, result.returncode, result.stderr)
    return result


def check_run(args, code: int, err: str) -> None:
    assert "Traceback" not in err, (args, err)
    assert code == 0, (args, code, err)
    for line in err.splitlines():
        assert line.startswith("kfmt: warning: "), (args, err)


def sha(b64: str | None) -> str | None:
    return None if b64 is None else hashlib.sha256(base64.b64decode(b64)).hexdigest()


def raw_sha(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


def cat(log_dir: Path, in_process: bool = False) -> dict:
    """The records `kfmt cat` gives, per partition, in the order given."""
    result = kfmt("cat", log_dir, "--format", "json", in_process=in_process)
    out: dict = {}
    for line in result.stdout.splitlines():
        r = json.loads(line)
        out.setdefault((r["topic"], r["partition"]), []).append(
            (r["offset"], r["timestamp"], sha(r["key"]), sha(r["value"])))
    return out


def check_records(records: dict, truth, where: str) -> None:
    """Each record is the one the writer wrote at its offset; offsets increase (nothing twice), with
    no gap where nothing is compacted."""
    for tp, rs in records.items():
        offsets = [r[0] for r in rs]
        assert offsets == sorted(set(offsets)), f"{where} {tp}: out of order or twice"
        if tp in PLAIN:
            assert offsets == list(range(offsets[0], offsets[0] + len(offsets))), \
                f"{where} {tp}: a gap"
        for offset, ts, key, value in rs:
            w = truth[tp].records[offset]
            assert (ts, key, value) == (w.timestamp, w.key, w.value), f"{where} {tp}@{offset}"


def check_complete(records: dict, truth, where: str) -> None:
    """Nothing left out: a plain partition from offset 0 (the archive keeps what retention deleted);
    on the compacted partition, each key's latest record below the end of what is held (the cleaner
    never removes that one, and what it has not cleaned holds everything)."""
    for tp in PLAIN:
        assert records[tp][0][0] == 0, f"{where} {tp}: starts at {records[tp][0][0]}"
    for tp in COMPACTED:
        end = records[tp][-1][0] + 1
        latest = {}
        for offset in sorted(o for o in truth[tp].records if o < end):
            latest[truth[tp].records[offset].key] = offset
        missing = set(latest.values()) - {r[0] for r in records[tp]}
        assert not missing, f"{where} {tp}: the latest records of their keys missing: {sorted(missing)}"


def exported(dst: Path) -> dict:
    table = ds.dataset(dst, partitioning="hive", format="parquet").to_table(
        columns=["topic", "partition", "offset", "timestamp_ms", "key", "value"])
    out: dict = {}
    for row in table.to_pylist():
        out.setdefault((row["topic"], row["partition"]), []).append(
            (row["offset"], row["timestamp_ms"], raw_sha(row["key"]), raw_sha(row["value"])))
    return {tp: sorted(rs) for tp, rs in out.items()}


def file_state(root: Path) -> dict:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in root.rglob("*") if p.is_file()}


class Runs:
    """The archive, export and cat runs of one test, and what each published."""

    def __init__(self, logs: Path, url: str, export_dst: Path, opts: list[str]):
        self.logs, self.url, self.dst, self.opts = logs, url, export_dst, opts
        self.generations: dict[int, bool] = {}  # generation -> made with --include-active
        self.unchanged = 0
        self.swap_generations: set[int] = set()
        self.durations: list[float] = []  # of the archive runs
        self.export_durations: list[float] = []
        self.export_errs: list[str] = []
        self.export_reports: list[dict | None] = []  # the report after each run (diagnostics)

    def archive(self, include_active: bool) -> dict:
        swap_seen = any(self.logs.glob("*/*.swap"))
        started = time.monotonic()
        args = ["archive", self.logs, self.url, "--master", "inprocess", "--no-progress",
                "--format", "json", *self.opts] + (["--include-active"] if include_active else [])
        report = json.loads(kfmt(*args).stdout)
        self.durations.append(time.monotonic() - started)
        if report.get("state") == "unchanged":
            self.unchanged += 1
        else:
            self.generations[report["generation"]] = include_active
            if swap_seen:
                self.swap_generations.add(report["generation"])
        return report

    def export(self) -> None:
        started = time.monotonic()
        result = kfmt("export", self.logs, self.dst, "--append", "--master", "inprocess",
                      "--no-progress")
        self.export_errs.append(result.stderr)
        report = self.dst / "_kfmt-report.json"
        self.export_reports.append(json.loads(report.read_text()) if report.exists() else None)
        self.export_durations.append(time.monotonic() - started)


def live_archive_and_export(tmp_path: Path, url: str, opts: list[str], restored_root: Path,
                            export: bool = True) -> Runs:
    """The runs against the live writer and every check of the module docstring (without `export`:
    the archive runs only)."""
    logs, dst = tmp_path / "logs", tmp_path / "export"
    runs = Runs(logs, url, dst, opts)
    cats = []
    done, failures = threading.Event(), []

    def loop(run):
        try:
            while not done.is_set():
                run()
        except BaseException as err:  # noqa: BLE001 - reported by the test thread
            failures.append(err)
            done.set()

    loops = [lambda: runs.archive(include_active=len(runs.durations) % 2 == 1)]
    if export:
        loops += [runs.export, lambda: cats.append(cat(logs))]
    counts = [runs.durations] + ([runs.export_durations, cats] if export else [])
    with LiveWriter(logs, PLAIN, COMPACTED, seed=17, **WRITER) as writer:
        writer.wait_for(rolls=3)
        threads = [threading.Thread(target=loop, args=(run,)) for run in loops]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + MAX_SECONDS
        while not done.is_set() and time.monotonic() < deadline and not (
                all(writer.stats[k] >= n for k, n in ENOUGH.items())
                and all(len(c) >= MIN_RUNS for c in counts)):
            time.sleep(0.1)
        done.set()
        for thread in threads:
            thread.join()
        stats = writer.stats
    if failures:
        raise failures[0]
    phase = time.monotonic()
    truth = writer.truth()
    print(f"writer {stats}; generations made during a swap {sorted(runs.swap_generations)}; "
          f"archive runs {[round(d, 1) for d in runs.durations]} s, export runs "
          f"{[round(d, 1) for d in runs.export_durations]} s")
    assert all(stats[k] >= n for k, n in REQUIRED.items()), stats
    assert all(len(c) >= MIN_RUNS for c in counts), [len(c) for c in counts]
    for i, records in enumerate(cats):
        check_records(records, truth, f"cat run {i}")

    # The writer stopped: one last run of each takes everything, a second one writes nothing.
    last = runs.archive(include_active=True)
    assert last.get("state") != "unchanged", last
    if export:
        runs.export()
    archive_files = file_state_of(url, opts)
    export_files = file_state(dst) if export else None
    again = runs.archive(include_active=True)
    assert (again["state"], again["generation"]) == ("unchanged", last["generation"]), again
    assert file_state_of(url, opts) == archive_files, "a re-run with nothing new wrote to the archive"
    if export:
        runs.export()
        assert file_state(dst) == export_files, "a re-run with nothing new wrote to the export"

    print(f"final runs {time.monotonic() - phase:.1f} s")
    phase = time.monotonic()
    # Every generation: restored, verified, each record the writer's.
    assert sorted(runs.generations) == list(range(1, last["generation"] + 1)), runs.generations
    for number in runs.generations:
        restored = restored_root / f"gen-{number}"
        kfmt("restore", url, restored, "--generation", number, "--master", "inprocess",
             "--no-progress", *opts, in_process=True)
        kfmt("verify", restored, "--deep", in_process=True)
        records = cat(restored, in_process=True)
        check_records(records, truth, f"generation {number}")
        check_complete(records, truth, f"generation {number}")

    print(f"generations checked {time.monotonic() - phase:.1f} s")
    # The latest generation and the export: exactly what the writer wrote from the log start on.
    latest = cat(restored_root / f"gen-{last['generation']}", in_process=True)
    info = {(i["topic"], i["partition"]): i for i in map(
        json.loads, kfmt("info", restored_root / f"gen-{last['generation']}", "--format",
                         "json", in_process=True).stdout.splitlines())}
    for tp in PLAIN:
        # the first run came before retention deleted anything: the archive starts at offset 0
        assert info[tp]["log_start_offset"] == 0, info[tp]
        assert [r[0] for r in latest[tp]] == list(range(0, truth[tp].next_offset)), tp
    for tp in COMPACTED:
        assert [r[0] for r in latest[tp]] == sorted(truth[tp].present), tp
    if export:
        check_export(runs, truth)
    return runs


def check_export(runs: Runs, truth) -> None:
    """The appended export: every offset the writer wrote from the first run's start on, less what
    a run reported lost (and, the writer being sized for it, nothing lost); on the compacted
    partition at least what the log still holds; each record the writer's, nothing twice."""
    rows = exported(runs.dst)
    lost = {}  # what the export runs reported lost to retention, per partition
    for report in runs.export_reports:
        for p in (report or {}).get("append", []):
            if p["lost"] is not None:
                lost.setdefault((p["topic"], p["partition"]), set()).update(
                    range(p["lost"]["from"], p["lost"]["to"]))
    for tp in PLAIN:
        t = truth[tp]
        missing = set(range(0, t.next_offset)) - {r[0] for r in rows[tp]}
        assert missing == lost.get(tp, set()), (f"export {tp}: missing offsets not reported lost",
                                                sorted(missing)[:20], sorted(lost.get(tp, []))[:20])
        # and the writer is slow enough that no export run came too late for a segment
        assert not missing, (f"export {tp}: retention deleted offsets before an export run read "
                             f"them (the writer is too fast for this machine)", runs.export_durations)
    for tp in COMPACTED:
        t = truth[tp]
        exported_offsets = [r[0] for r in rows[tp]]
        assert exported_offsets == sorted(set(exported_offsets)), f"export {tp}: twice"
        assert t.present <= set(exported_offsets), f"export {tp}: a record the log holds is missing"
    check_records(rows, truth, "export")


def file_state_of(url: str, opts: list[str]) -> dict:
    """Every object under the archive URL: its size, modification time and SHA-256."""
    from kfmt.storage.store import open_storage

    storage, path = open_storage(url, dict(o.split("=", 1) for o in opts[1::2]))
    return {f.path: (f.size, f.mtime_ms, hashlib.sha256(bytes(storage.read(f.path))).hexdigest())
            for f in storage.walk(path)}


def test_archive_export_cat_while_a_broker_writes(tmp_path):
    runs = live_archive_and_export(tmp_path, str(tmp_path / "archive"), [], tmp_path / "restored")
    assert runs.unchanged >= 1  # the re-run with nothing new


@pytest.mark.s3
def test_archive_to_s3_while_a_broker_writes(tmp_path, s3_server, s3_url):
    """The archive runs alone (export and cat are the local test's), to the S3 test server."""
    runs = live_archive_and_export(tmp_path, s3_url, s3_server.cli_options(), tmp_path / "restored",
                                   export=False)
    assert runs.unchanged >= 1


def test_a_generation_archived_during_a_swap_restores_broker_ready(tmp_path):
    """The cleaner's LocalLog.replaceSegments caught half-way: the `.swap` log that replaces the
    first two segments is there (first with both originals, then with the second renamed
    `.deleted`). The layout reads the `.swap` in place of the segments it covers (as LogLoader
    would), and the archive stores it under its base-offset name: a restore of that generation must
    be a directory a broker loads (Kafka's own file names, nothing in transit), pass `kfmt verify`
    and hold the records; so must the generation after the swap completed."""
    logs, url = tmp_path / "logs", str(tmp_path / "archive")
    with LiveWriter(logs, [("live", 0)], seed=4, retain_segments=100) as writer:
        writer.wait_for(rolls=4)
    truth = writer.truth()
    part = logs / "live-0"
    segs = sorted(part.glob("*.log"))
    source = cat(logs, in_process=True)
    check_records(source, truth, "source")

    def archive_restore_check(number: int, state: str | None = None) -> Path:
        """One archive run (a new generation `number`, or `state` "unchanged"), its latest
        generation restored and checked."""
        report = json.loads(kfmt("archive", logs, url, "--master", "inprocess", "--no-progress", "--exclude-active",
                                 "--format", "json", in_process=True).stdout)
        assert report["generation"] == number and report.get("state") == state, report
        restored = tmp_path / f"run-{len(list(tmp_path.glob('run-*')))}"
        kfmt("restore", url, restored, "--generation", number, "--master", "inprocess",
             "--no-progress", in_process=True)
        kfmt("verify", restored, "--deep", in_process=True)
        names = [p.name for p in (restored / "live-0").iterdir()]
        assert not [n for n in names if n.endswith((".swap", ".cleaned", ".deleted"))], names
        assert cat(restored, in_process=True) == {tp: [r for r in rs if r[0] < int(segs[-1].stem)]
                                 for tp, rs in source.items()}, number  # the active one left out
        return restored

    archive_restore_check(1)
    # The cleaner's output renamed to .swap (its bytes: the first two segments' batches, all kept)
    swapped = segs[0].read_bytes() + segs[1].read_bytes()
    (part / (segs[0].name + ".swap")).write_bytes(swapped)
    for suffix in (".index.swap", ".timeindex.swap"):
        (part / (segs[0].stem + suffix)).write_bytes(b"")
    restored = archive_restore_check(2)
    assert (restored / "live-0" / segs[0].name).read_bytes() == swapped
    assert not (restored / "live-0" / segs[1].name).exists()  # merged into segment 0
    # the replaced segment renamed .deleted
    for path in part.glob(f"{segs[1].stem}.*"):
        path.rename(path.with_name(path.name + ".deleted"))
    archive_restore_check(2, "unchanged")  # what the layout lists is as it was
    # the swap completed: the .swap files renamed onto the first segment's, the .deleted ones gone
    for suffix in (".log", ".index", ".timeindex"):
        (part / (segs[0].stem + suffix + ".swap")).replace(part / (segs[0].stem + suffix))
    for path in part.glob("*.deleted"):
        path.unlink()
    # the same bytes, size and modification time under the name the archive gave them already
    restored = archive_restore_check(2, "unchanged")
    assert (restored / "live-0" / segs[0].name).read_bytes() == swapped


@pytest.mark.parametrize("listed", ["swap", "segments"])
def test_a_cleaning_finished_while_the_run_reads_loses_nothing(tmp_path, monkeypatch, listed):
    """The cleaner finishes replacing the first two segments (LocalLog.replaceSegments: the `.swap`
    renamed onto the first one's name, the second renamed `.deleted`) after the run listed the
    partition and before it reads it. The run listed either the `.swap` (which hides the segments
    it covers) or the two segments. Either way it reads the bytes where the broker moved them (the
    `.swap` under the segment's own name; the second segment's `.deleted` file, there until
    file.delete.delay.ms) and the generation holds every record, without a warning: skipping them
    would leave the merged segment's offsets out of this generation."""
    import kfmt.transforms.archive.read_task as read_task

    logs, url = tmp_path / "logs", str(tmp_path / "archive")
    with LiveWriter(logs, [("live", 0)], seed=4, retain_segments=100) as writer:
        writer.wait_for(rolls=4)
    truth = writer.truth()
    part = logs / "live-0"
    segs = sorted(part.glob("*.log"))
    source = cat(logs, in_process=True)
    rolled = {tp: [r for r in rs if r[0] < int(segs[-1].stem)] for tp, rs in source.items()}
    check_records(rolled, truth, "source")
    swapped = segs[0].read_bytes() + segs[1].read_bytes()
    swap = part / (segs[0].name + ".swap")
    if listed == "swap":
        kfmt("archive", logs, url, "--master", "inprocess", "--no-progress", "--exclude-active", in_process=True)
        swap.write_bytes(swapped)
    real, done = read_task.archive_files, []

    def cleaner_finishes_first(task):
        if not done and any(f.path in (str(swap), str(segs[1])) for f in task.files):
            swap.write_bytes(swapped) if not swap.exists() else None
            swap.replace(segs[0])
            for path in part.glob(f"{segs[1].stem}.*"):
                path.rename(path.with_name(path.name + ".deleted"))
            done.append(True)
        return real(task)

    monkeypatch.setattr(read_task, "archive_files", cleaner_finishes_first)
    result = kfmt("archive", logs, url, "--master", "inprocess", "--no-progress", "--exclude-active", "--format", "json",
                  in_process=True)
    monkeypatch.setattr(read_task, "archive_files", real)
    assert done and result.stderr == "", result.stderr
    restored = tmp_path / "restored"
    kfmt("restore", url, restored, "--generation", json.loads(result.stdout)["generation"],
         "--master", "inprocess", "--no-progress", in_process=True)
    kfmt("verify", restored, "--deep", in_process=True)
    assert cat(restored, in_process=True) == rolled
    # the next run reads the segment the swap became: the same records, in one segment fewer
    report = json.loads(kfmt("archive", logs, url, "--master", "inprocess", "--no-progress", "--exclude-active",
                             "--format", "json", in_process=True).stdout)
    restored = tmp_path / "restored-next"
    kfmt("restore", url, restored, "--generation", report["generation"], "--master", "inprocess",
         "--no-progress", in_process=True)
    kfmt("verify", restored, "--deep", in_process=True)
    assert cat(restored, in_process=True) == rolled
    assert (restored / "live-0" / segs[0].name).read_bytes() == swapped
    assert not (restored / "live-0" / segs[1].name).exists()


def test_a_swap_gone_before_the_run_reads_keeps_what_it_hid(tmp_path):
    """The run lists a `.swap` (which hides the segments it covers) and the `.swap` is gone when the
    run reads it, with the segment's own name holding other bytes (removed, not renamed: LogLoader
    deletes an unfinished cleaning's swap at a restart). The run skips it with one warning, and the
    generation keeps what the latest one holds for those offsets: the hidden segments too, which
    the source still holds, rather than dropping them as if the cleaner had merged them."""
    import kfmt.transforms.archive.read_task as read_task

    logs, url = tmp_path / "logs", str(tmp_path / "archive")
    with LiveWriter(logs, [("live", 0)], seed=4, retain_segments=100) as writer:
        writer.wait_for(rolls=4)
    part = logs / "live-0"
    segs = sorted(part.glob("*.log"))
    source = cat(logs, in_process=True)
    rolled = {tp: [r for r in rs if r[0] < int(segs[-1].stem)] for tp, rs in source.items()}
    kfmt("archive", logs, url, "--master", "inprocess", "--no-progress", "--exclude-active", in_process=True)
    swap = part / (segs[0].name + ".swap")
    swap.write_bytes(segs[0].read_bytes() + segs[1].read_bytes())
    real = read_task.archive_files

    def swap_removed_first(task):
        swap.unlink(missing_ok=True)
        return real(task)

    read_task.archive_files = swap_removed_first
    try:
        result = kfmt("archive", logs, url, "--master", "inprocess", "--no-progress", "--exclude-active", "--format",
                      "json", in_process=True)
    finally:
        read_task.archive_files = real
    assert len(result.stderr.splitlines()) == 1 and "gone before it could be read" in result.stderr
    state = json.loads(result.stdout)
    restored = tmp_path / "restored"
    kfmt("restore", url, restored, "--generation", state["generation"], "--master", "inprocess",
         "--no-progress", in_process=True)
    kfmt("verify", restored, "--deep", in_process=True)
    assert cat(restored, in_process=True) == rolled
