"""What Kafka's log loading repairs is not a problem; what it leaves broken is.

* Missing companion files (LogSegment.sanityCheck, LogLoader): a segment without its `.index` is
  recovered whole on load, which rebuilds its `.index` and `.timeindex` from the log, so `verify`
  notes it; a `.timeindex` missing beside an existing `.index` is never rebuilt (Kafka creates an
  empty one), so it is a problem.

Inputs are copies of real-broker partitions (the realkafka corpus), with files removed.
"""
from __future__ import annotations

import json
import shutil

import pytest
from support.cli import run_kfmt
from support.corpus import REALKAFKA


def verify(path) -> tuple[int, list[dict]]:
    result = run_kfmt("verify", path, "--format", "json")
    return result.code, json.loads(result.out)["problems"]


def checks(problems: list[dict], severity: str) -> set[str]:
    return {p["check"] for p in problems if p["severity"] == severity}


@pytest.mark.parametrize("name", ["v2-none-0", "v1-gzip-0", "v0-none-0", "txn-v2-none-0"])
def test_a_partition_without_any_index_is_rebuilt_on_load_so_it_verifies(name, tmp_path):
    part = tmp_path / name
    shutil.copytree(REALKAFKA / name, part)
    logs = sorted(part.glob("*.log"))
    for f in [*part.glob("*.index"), *part.glob("*.timeindex")]:
        f.unlink()
    code, problems = verify(part)
    assert code == 0, [p for p in problems if p["severity"] == "error"]
    missing = [p for p in problems if p["check"] == "offset-index-missing"]
    assert missing and all(p["severity"] == "note" for p in missing)
    assert sorted(p["file"] for p in missing) == [str(f) for f in logs]
    assert "time-index-missing" not in checks(problems, "error")


@pytest.mark.parametrize("name", ["v2-none-0", "v1-gzip-0"])
def test_a_time_index_missing_beside_its_offset_index_is_a_problem(name, tmp_path):
    part = tmp_path / name
    shutil.copytree(REALKAFKA / name, part)
    victim = sorted(part.glob("*.timeindex"))[1]
    victim.unlink()
    code, problems = verify(part)
    assert code == 65
    errors = [p for p in problems if p["severity"] == "error"]
    assert [(p["check"], p["file"]) for p in errors] == \
        [("time-index-missing", str(victim.with_suffix(".log")))]


# --- crash-cut tails --------------------------------------------------------------------------------
#
# A partial entry after the last complete batch of a partition's last segment (a broker killed
# mid-write, a copy cut short) is what LogSegment.recover truncates: readers give every complete
# record, one warning naming the file, position and byte count, and exit 0; verify notes it;
# transforms leave it out and say so. Anywhere else it stays an error (exit 65). The batch
# boundaries come from kafka-dump-log's listing of the corpus (corpus_truth.kafka_listing), the
# records from the Java consumer's.

CUT_NAMES = ["v2-none-0", "v1-gzip-0", "v0-none-0", "txn-v2-none-0", "v2-zstd-0"]


def last_entries(name: str) -> tuple[str, list]:
    from support.corpus_truth import kafka_listing

    entries = kafka_listing(name)
    last = max(e.file for e in entries)
    return last, [e for e in entries if e.file == last]


def all_entries(name: str) -> list:
    from support.corpus_truth import kafka_listing

    return list(kafka_listing(name))


def records(name: str, upto: int | None = None) -> list[dict]:
    from support.corpus_truth import consumer_records

    return [r for r in consumer_records(name) if upto is None or r["offset"] <= upto]


def cut_copy(name: str, tmp_path, how: str):
    """A copy of corpus partition `name` whose last segment ends in a bad tail; (the copy, the
    segment, the tail's position and length, the last offset a consumer still gets)."""
    import struct

    part = tmp_path / name
    shutil.copytree(REALKAFKA / name, part)
    file, entries = last_entries(name)
    log = part / file.split("/")[-1]
    log.chmod(0o644)
    size = log.stat().st_size
    if how == "cut":  # the last entry cut in its middle
        last = entries[-1]
        position = last.position
        with open(log, "r+b") as f:
            f.truncate(last.position + last.size // 2)
        kept = all_entries(name)[-2].last_offset  # the last entry before it, in any segment
    else:  # an entry's header written, its body still zeros (as in a preallocated file)
        position = size
        with open(log, "ab") as f:
            f.write(struct.pack(">qi", entries[-1].last_offset + 1, 500) + bytes(100))
        kept = entries[-1].last_offset
    return part, log, position, log.stat().st_size - position, kept


def one_warning(err: str, log, position: int, length: int) -> None:
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert str(log) in lines[0] and f"position {position}" in lines[0] and f"{length} byte(s)" in lines[0]


@pytest.mark.parametrize("how", ["cut", "zero-filled"])
@pytest.mark.parametrize("name", CUT_NAMES)
def test_a_crash_cut_tail_gives_every_complete_record_and_one_warning(name, how, tmp_path):
    from support.export_truth import as_consumer_records, export, read_dataset

    part, log, position, length, kept = cut_copy(name, tmp_path, how)
    expected = records(name, kept)
    assert expected
    cat = run_kfmt("cat", part, "--format", "json")
    assert cat.code == 0, cat.err
    assert [json.loads(line) for line in cat.lines] == expected
    one_warning(cat.err, log, position, length)
    info = run_kfmt("info", part, "--format", "json")
    assert info.code == 0, info.err
    assert json.loads(info.out)["records"] == len(expected)
    one_warning(info.err, log, position, length)
    result = export(part, tmp_path / "out")
    assert result.code == 0, result.err
    one_warning(result.err, log, position, length)
    assert as_consumer_records(read_dataset(tmp_path / "out")) == expected
    report = json.loads(next((tmp_path / "out").glob("*kfmt-report.json")).read_text())
    assert any(str(log) in n and f"position {position}" in n for n in report["notes"])
    # verify: the tail log recovery truncates, a note
    code, problems = verify(part)
    assert code == 0, [p for p in problems if p["severity"] == "error"]
    tails = [p for p in problems if p["check"] == "log-tail-truncated"]
    assert [(p["file"], p["position"], p["severity"]) for p in tails] == [(str(log), position, "note")]


@pytest.mark.parametrize("command", [("upgrade",), ("recompress", "--compression", "lz4"),
                                     ("resegment", "--segment-bytes", "50000", "--kafka-version", "3.9"), ("reindex",)],
                         ids=lambda c: c[0])
@pytest.mark.parametrize("name", ["v1-gzip-0", "txn-v2-none-0"])
def test_transforms_leave_a_crash_cut_tail_out_and_say_so(name, command, tmp_path):
    part, log, position, length, kept = cut_copy(name, tmp_path, "cut")
    args = ["--master", "inprocess"] if command[0] != "reindex" else []
    result = run_kfmt(command[0], part, tmp_path / "out", *command[1:], *args, "--no-progress",
                      "--format", "json")
    assert result.code == 0, result.err
    notes = [n for n in json.loads(result.out)["notes"] if str(log) in n]
    assert len(notes) == 1 and f"position {position}" in notes[0] and f"{length} byte(s)" in notes[0]
    cat = run_kfmt("cat", tmp_path / "out", "--format", "json")
    assert (cat.code, cat.err) == (0, "")
    assert [json.loads(line) for line in cat.lines] == records(name, kept)
    code, problems = verify(tmp_path / "out")
    assert code == 0 and not [p for p in problems if "tail" in p["check"]], problems



@pytest.mark.parametrize("command", ["retain", "compact"])
@pytest.mark.parametrize("name", ["v1-gzip-0", "txn-v2-none-0"])
def test_cleanup_policies_leave_a_crash_cut_tail_out_and_say_so(name, command, tmp_path):
    """retain (nothing old enough to go: every complete record stays) and compact (which never
    cleans the last segment) read the partition as log recovery leaves it."""
    part, log, position, length, kept = cut_copy(name, tmp_path, "cut")
    result = run_kfmt(command, part, tmp_path / "out", "--master", "inprocess", "--no-progress",
                      "--format", "json")
    assert result.code == 0, result.err
    notes = [n for n in json.loads(result.out)["notes"] if str(log) in n]
    assert len(notes) == 1 and f"position {position}" in notes[0] and f"{length} byte(s)" in notes[0]
    one_warning(result.err, log, position, length)
    cat = run_kfmt("cat", tmp_path / "out", "--format", "json")
    assert (cat.code, cat.err) == (0, "")
    offsets = [json.loads(line)["offset"] for line in cat.lines]
    assert offsets and max(offsets) <= kept
    if command == "retain":
        assert [json.loads(line) for line in cat.lines] == records(name, kept)
    code, problems = verify(tmp_path / "out")
    assert code == 0 and not [p for p in problems if "tail" in p["check"]], problems


@pytest.mark.parametrize("name", ["v1-gzip-0", "txn-v2-none-0"])
def test_an_archive_cuts_a_crash_cut_tail_and_restore_gives_what_recovery_keeps(name, tmp_path):
    """With --include-active an archive stores the last segment up to its last complete entry, where
    log recovery would truncate it (its report says what was left out); the restored directory is
    the one log recovery makes of the broker's."""
    part, log, position, length, kept = cut_copy(name, tmp_path, "cut")
    archived = run_kfmt("archive", part, tmp_path / "archive", "--master", "inprocess", "--no-progress",
                        "--include-active", "--format", "json")
    assert archived.code == 0, archived.err
    notes = [n for n in json.loads(archived.out)["notes"] if str(log) in n]
    assert len(notes) == 1 and f"position {position}" in notes[0] and f"{length} byte(s)" in notes[0]
    assert (tmp_path / "archive" / log.name).read_bytes() == log.read_bytes()[:position]
    restored = run_kfmt("restore", tmp_path / "archive", tmp_path / "out", "--master", "inprocess",
                        "--no-progress")
    assert restored.code == 0, restored.err
    cat = run_kfmt("cat", tmp_path / "out", "--format", "json")
    assert (cat.code, cat.err) == (0, "")
    assert [json.loads(line) for line in cat.lines] == records(name, kept)
    code, problems = verify(tmp_path / "out")
    assert code == 0 and not [p for p in problems if "tail" in p["check"]], problems

@pytest.mark.parametrize("name", ["v2-none-0", "v1-gzip-0"])
def test_damage_anywhere_else_stays_an_error(name, tmp_path):
    from support.export_truth import export

    part = tmp_path / name
    shutil.copytree(REALKAFKA / name, part)
    middle = sorted(part.glob("*.log"))[3]
    middle.chmod(0o644)
    with open(middle, "r+b") as f:
        f.truncate(middle.stat().st_size - 30)
    for result in (run_kfmt("cat", part), run_kfmt("info", part), export(part, tmp_path / "out"),
                   run_kfmt("upgrade", part, tmp_path / "up", "--master", "inprocess", "--no-progress"),
                   run_kfmt("reindex", part, tmp_path / "ri", "--no-progress")):
        assert result.code == 65, result.err
        assert str(middle) in result.err and "Traceback" not in result.err
    code, problems = verify(part)
    assert code == 65
    assert [(p["check"], p["file"]) for p in problems if p["severity"] == "error"][0] == ("framing", str(middle))


@pytest.mark.parametrize("name", ["v2-none-0"])
def test_a_bad_crc_on_the_last_complete_batch_stays_an_error(name, tmp_path):
    part = tmp_path / name
    shutil.copytree(REALKAFKA / name, part)
    file, entries = last_entries(name)
    log = part / file.split("/")[-1]
    log.chmod(0o644)
    data = bytearray(log.read_bytes())
    data[entries[-1].position + entries[-1].size - 3] ^= 0xFF  # a byte of the last record
    log.write_bytes(bytes(data))
    assert run_kfmt("cat", part).code == 65
    assert verify(part)[0] == 65
