"""Which paths are Kafka's, and how a little Kafka is read: as Kafka's log loading reads it.

Rules (kfmt.partition.layout, kfmt.partition.load_recovery, kfmt.inspect.verify.checkpoints):
* a PATH with no file only Kafka writes (segment, index, snapshot, checkpoint, partition.metadata,
  meta.properties, ...) is refused in one line, exit 2, by every command: directories merely named
  like partitions do not make a log directory;
* an empty partition's log end offset is its last segment's base offset (LogSegment.readNextOffset);
* checkpoints ahead of the log (high watermark, recovery point, cleaner offset) are notes: Kafka bounds
  or resets them on load; a log start offset ahead still deletes the partition, an error;
* index files Kafka rebuilds on load (no clean-shutdown marker: the segments from the recovery point
  on) are notes, whatever they hold; with the marker Kafka trusts them, and they are checked strictly.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support.cli import run_kfmt
from support.corpus import REALKAFKA
from support.kafka_dirs import INDEX_BYTES, empty_partition, not_kafka_tree, writable

import kfmt

# every command that takes a PATH, with what it needs besides it ("DST": a destination)
COMMANDS = [("cat",), ("info",), ("verify",), ("offsets",), ("export", "DST"), ("upgrade", "DST"),
            ("resegment", "DST", "--segment-bytes", "1048576"), ("recompress", "DST", "--compression", "gzip"),
            ("reindex", "DST"), ("compact", "DST"), ("retain", "DST"), ("salvage", "DST"), ("archive", "DST")]
READERS = [("cat",), ("info",), ("verify",)]
TRANSFORMS = [c for c in COMMANDS if "DST" in c and c[0] not in ("export", "archive")] + [
    ("archive", "DST", "--include-active")]  # a stopped broker's partition: all of it


def _run(command: tuple, src: Path, dst: Path):
    return run_kfmt(command[0], src, *[dst if a == "DST" else a for a in command[1:]])


def _one_error_line(result, code: int, *named: str) -> str:
    assert result.code == code, (result.code, result.err)
    lines = result.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kfmt: error: "), result.err
    assert "Traceback" not in result.err and "None" not in lines[0], lines[0]
    for text in named:
        assert text in lines[0], (text, lines[0])
    return lines[0]


# --- no Kafka, no OK ---

def _etc(tmp_path):
    return not_kafka_tree(tmp_path / "etc")


def _empty(tmp_path):
    (tmp_path / "empty").mkdir()
    return tmp_path / "empty"


def _named_like_a_partition(tmp_path):
    (tmp_path / "t-0").mkdir()
    return tmp_path / "t-0"


def _partition_named_with_other_files(tmp_path):
    return not_kafka_tree(tmp_path / "etc") / "dbus-1"


NOT_KAFKA = [_etc, _empty, _named_like_a_partition, _partition_named_with_other_files]


@pytest.mark.parametrize("layout", NOT_KAFKA, ids=lambda f: f.__name__.strip("_"))
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_a_path_with_no_kafka_file_is_one_line_and_exit_2_for_every_command(tmp_path, layout, command):
    src, dst = layout(tmp_path), tmp_path / "out"
    result = _run(command, src, dst)
    # offsets looks for __consumer_offsets-N directories only, and says so
    says = "no __consumer_offsets-N" if command[0] == "offsets" else "no Kafka file here"
    _one_error_line(result, 2, str(src), says)
    assert not dst.exists()


def test_offsets_refuses_consumer_offsets_directories_with_no_kafka_file(tmp_path):
    (tmp_path / "logs" / "__consumer_offsets-3").mkdir(parents=True)
    for path in (tmp_path / "logs", tmp_path / "logs" / "__consumer_offsets-3"):
        _one_error_line(run_kfmt("offsets", path), 2, str(path), "no Kafka file here")


def test_dump_and_restore_refuse_a_directory_with_no_kafka_file(tmp_path):
    src = not_kafka_tree(tmp_path / "etc")
    _one_error_line(run_kfmt("dump", src), 2, str(src), "is a directory")
    _one_error_line(run_kfmt("dump", REALKAFKA / "v2-none-0" / "00000000000000000000.index", src), 2,
                    "is a directory")  # before any output: a directory is no file to dump
    _one_error_line(run_kfmt("restore", src, tmp_path / "out"), 2, str(src), "not a kfmt archive")
    assert not (tmp_path / "out").exists()


def test_partition_like_folders_beside_real_ones_are_what_kafka_takes_them_for(tmp_path):
    """Once a directory is a log directory, LogManager loads every `<topic>-<partition>` child as a
    partition, an empty one as an empty log."""
    logs = tmp_path / "logs"
    shutil.copytree(REALKAFKA / "v2-none-0", logs / "v2-none-0")
    (logs / "dbus-1").mkdir()
    infos = {i["topic"]: i for i in map(json.loads, _ok("info", logs, "--format", "json").splitlines())}
    assert infos["dbus"]["segments"] == 0 and infos["dbus"]["log_end_offset"] == 0
    assert infos["v2-none"]["log_end_offset"] == 500


# --- real layouts with little in them still work ---

def _ok(*args) -> str:
    result = run_kfmt(*args)
    assert result.code == 0, result.err
    return result.out


def _layouts(tmp_path) -> dict[str, Path]:
    """Kafka layouts with little in them: segments only; a log directory named like a partition; a
    partition directory whose only files are its checkpoint and metadata; a log directory whose
    only Kafka file is meta.properties, beside an empty partition directory."""
    out = {}
    bare = tmp_path / "bare" / "v2-none-0"
    bare.mkdir(parents=True)
    for log in (REALKAFKA / "v2-none-0").glob("*.log"):
        shutil.copy2(log, bare / log.name)
    out["segments only"] = bare
    named = tmp_path / "kafka-1"
    shutil.copytree(REALKAFKA / "v1-gzip-0", named / "v1-gzip-0")
    shutil.copy2(REALKAFKA / "_logdir-root" / "meta.properties", named / "meta.properties")
    out["log directory named like a partition"] = named
    meta = tmp_path / "meta" / "t-0"
    meta.mkdir(parents=True)
    (meta / "partition.metadata").write_text("version: 0\ntopic_id: AxZqudQbRCOynzdEmxgmzw")
    out["partition metadata only"] = meta
    root = tmp_path / "root"
    (root / "t-0").mkdir(parents=True)
    shutil.copy2(REALKAFKA / "_logdir-root" / "meta.properties", root / "meta.properties")
    out["meta.properties and an empty partition directory"] = root
    return {name: writable(path) for name, path in out.items()}


def test_real_layouts_with_little_in_them_are_read(tmp_path):
    for name, path in _layouts(tmp_path).items():
        for command in READERS:
            _ok(command[0], path)
        _ok("reindex", path, tmp_path / f"out-{path.name}-{len(name)}")


# --- an empty partition: its log end offset is its segment's base offset ---

@pytest.mark.parametrize("base", [0, 500])
def test_an_empty_partition_ends_at_its_segment_base_offset(tmp_path, base):
    logs = tmp_path / "logs"
    part = empty_partition(logs / "__consumer_offsets-7", base)
    shutil.copy2(REALKAFKA / "_logdir-root" / "meta.properties", logs / "meta.properties")
    (logs / ".kafka_cleanshutdown").write_text("")
    text = _ok("info", logs)
    assert f"log start {base}, log end {base}; no records" in text and "None" not in text
    [info] = map(json.loads, _ok("info", logs, "--format", "json").splitlines())
    assert (info["log_start_offset"], info["log_end_offset"], info["records"]) == (base, base, 0)
    assert [i["log_end_offset"] for i in kfmt.info(logs)] == [base]
    assert "OK" in _ok("verify", logs)
    assert _ok("cat", logs) == ""
    assert f"Log starting offset: {base}" in _ok("dump", *sorted(part.glob("*.*")))
    for command in TRANSFORMS:
        out = tmp_path / f"out-{command[0]}"
        _run(command, logs, out)
        if command[0] == "archive":
            _ok("restore", out, tmp_path / "restored")
            out = tmp_path / "restored"
        [after] = map(json.loads, _ok("info", out, "--format", "json").splitlines())
        assert after["log_end_offset"] == base, command


def test_the_log_end_offset_is_the_brokers_for_retention_outputs():
    """What a real broker left after retention and DeleteRecords, and the log end offset it reported."""
    for case in sorted((REALKAFKA / "_retention").iterdir()):
        truth = json.loads((case / "truth.json").read_text())
        [info] = kfmt.info(case / "remaining")
        assert info["log_end_offset"] == truth["log_end_offset"], case.name


def test_an_empty_partition_of_a_running_broker_is_read_with_notes(tmp_path):
    """Copied while the broker runs: no clean-shutdown marker, its indexes preallocated to 10 MiB."""
    logs = tmp_path / "logs"
    part = empty_partition(logs / "__consumer_offsets-0", running=True)
    shutil.copy2(REALKAFKA / "_logdir-root" / "meta.properties", logs / "meta.properties")
    assert (part / "00000000000000000000.index").stat().st_size == INDEX_BYTES
    result = run_kfmt("verify", logs, "--format", "json")
    assert result.code == 0, result.out
    assert [i["log_end_offset"] for i in kfmt.info(logs)] == [0]


# --- checkpoints ahead of their logs: what Kafka does on load ---

def _broker_dir(tmp_path, clean: bool = True) -> Path:
    """Two corpus partitions (log end offsets 500 and 400) in a log directory with the broker's
    meta.properties, as it was stopped (`clean`) or copied while running."""
    logs = tmp_path / "logs"
    for name in ("v2-none-0", "v1-gzip-0"):
        shutil.copytree(REALKAFKA / name, logs / name)
    shutil.copy2(REALKAFKA / "_logdir-root" / "meta.properties", logs / "meta.properties")
    if clean:
        (logs / ".kafka_cleanshutdown").write_text("")
    return writable(logs)


def _findings(path: Path) -> tuple[int, list[dict]]:
    result = run_kfmt("verify", path, "--format", "json")
    return result.code, json.loads(result.out)["problems"]


@pytest.mark.parametrize("name, what, says", [
    ("replication-offset-checkpoint", "high watermark", "Kafka bounds it by the log end offset"),
    ("recovery-point-offset-checkpoint", "recovery point", "Kafka takes the log end offset instead"),
    ("cleaner-offset-checkpoint", "first dirty offset", "the cleaner resets it to the log start offset"),
])
def test_a_checkpoint_ahead_of_its_log_is_a_note_saying_what_kafka_does(tmp_path, name, what, says):
    logs = _broker_dir(tmp_path)
    (logs / name).write_text("0\n2\nv2-none 0 620\nv1-gzip 0 400\n")
    code, found = _findings(logs)
    assert code == 0, found
    [note] = [p for p in found if p["check"] == "offset-checkpoint"]
    assert note["severity"] == "note" and note["offset"] == 620
    assert f"{what} 620 of v2-none-0 is beyond its log end offset 500: {says}" in note["message"]
    _every_command_takes(logs, tmp_path)


def _every_command_takes(logs: Path, tmp_path: Path) -> None:
    """Every reader and every transform runs on `logs` (exit 0)."""
    for command in [*READERS, ("dump", *sorted(str(p) for p in logs.glob("*/*.*index"))), *TRANSFORMS]:
        out = tmp_path / f"out-{command[0]}"
        result = _run(command, logs, out) if command[0] != "dump" else run_kfmt(*command)
        assert result.code == 0, (command, result.err)


def test_a_log_start_offset_ahead_of_its_log_stays_an_error(tmp_path):
    """LogLoader deletes every segment of such a partition on load: the data would be lost."""
    logs = _broker_dir(tmp_path)
    (logs / "log-start-offset-checkpoint").write_text("0\n1\nv1-gzip 0 401\n")
    code, found = _findings(logs)
    assert code == 65 and [p["severity"] for p in found if p["check"] == "offset-checkpoint"] == ["error"]


# --- index files Kafka rebuilds on load ---

def _spoil_indexes(part: Path) -> tuple[str, str]:
    """A 0-byte .timeindex for an inactive segment and a preallocated .index for another, as a copy
    of a crashed broker may hold them: (their names)."""
    logs = sorted(part.glob("*.log"))
    emptied, preallocated = logs[1].with_suffix(".timeindex"), logs[2].with_suffix(".index")
    emptied.write_bytes(b"")
    with open(preallocated, "r+b") as f:
        f.truncate(INDEX_BYTES)
    return emptied.name, preallocated.name


def test_indexes_kafka_rebuilds_on_load_are_notes(tmp_path):
    """No clean-shutdown marker and no recovery point: LogLoader.recoverLog recovers every segment."""
    logs = _broker_dir(tmp_path, clean=False)
    names = _spoil_indexes(logs / "v2-none-0")
    code, found = _findings(logs)
    assert code == 0, found
    spoilt = [p for p in found if Path(p["file"]).name in names]
    assert {p["check"] for p in spoilt} == {"time-index-final", "offset-index-format"}
    assert all(p["severity"] == "note" and "Kafka rebuilds it on load" in p["message"] for p in spoilt)
    _every_command_takes(logs, tmp_path)


def test_indexes_kafka_trusts_are_checked_strictly(tmp_path):
    """With the marker (a clean stop), or below the recovery point, Kafka reads them as they are."""
    clean = _broker_dir(tmp_path / "clean")
    _spoil_indexes(clean / "v2-none-0")
    assert _findings(clean)[0] == 65
    recovered_from_end = _broker_dir(tmp_path / "unclean", clean=False)
    (recovered_from_end / "recovery-point-offset-checkpoint").write_text("0\n2\nv2-none 0 500\nv1-gzip 0 400\n")
    _spoil_indexes(recovered_from_end / "v2-none-0")
    code, found = _findings(recovered_from_end)
    assert code == 65 and {p["check"] for p in found if p["severity"] == "error"} == {
        "time-index-final", "offset-index-format"}


# --- empty files: what they lack, never "None" ---

def test_empty_partition_metadata_and_meta_properties_say_what_they_lack(tmp_path):
    logs = _broker_dir(tmp_path)
    (logs / "v2-none-0" / "partition.metadata").write_bytes(b"")
    (logs / "v1-gzip-0" / "partition.metadata").write_text("version: 0\n")
    (logs / "meta.properties").write_bytes(b"")
    code, found = _findings(logs)
    assert code == 65
    messages = {(Path(p["file"]).parent.name, p["check"]): p["message"] for p in found if p["severity"] == "error"}
    assert messages == {
        ("v2-none-0", "partition-metadata"): "partition.metadata is empty (0 bytes): expected a line "
                                             "'version: <value>'",
        ("v1-gzip-0", "partition-metadata"): "partition.metadata ends after its version line: expected a line "
                                             "'topic_id: <value>'",
        ("logs", "meta-properties"): "no properties (an empty file): a broker cannot tell which node and cluster "
                                     "the directory belongs to (expected version=1 with node.id and cluster.id, or "
                                     "version=0 with broker.id)"}


# --- stray files and folders in a real log directory ---

def test_stray_files_and_folders_are_left_out_and_named(tmp_path):
    """What else lands in a log directory (a file system's lost+found, notes, a backup, a broker's
    .lock): every command reads the partitions; a transform writes none of it and says so."""
    logs = _broker_dir(tmp_path)
    (logs / "lost+found").mkdir()
    (logs / "notes.txt").write_text("moved from node 3\n")
    (logs / "v2-none-0.tar").write_bytes(b"\0" * 512)
    (logs / ".lock").write_bytes(b"")
    (logs / "v2-none-0" / "README").write_text("do not touch\n")
    result = run_kfmt("info", logs)
    assert result.code == 0 and result.err.count("kfmt: warning:") == 1 and "lost+found" in result.err
    _every_command_takes(logs, tmp_path)
    out = tmp_path / "out-reindex"
    strays = {"lost+found", "notes.txt", "v2-none-0.tar", ".lock"}
    assert not strays & {p.name for p in out.iterdir()} and not (out / "v2-none-0" / "README").exists()
    notes = " ".join(json.loads((out / "kfmt-report.json").read_text())["notes"])
    assert all(name in notes for name in [*strays - {"lost+found"}, "lost+found/", "README"]), notes
