"""kfmt dump prints what Kafka 3.6's kafka-dump-log.sh printed for the same files.

Truth: the realkafka corpus (kafka-dump-log's own output for every partition directory, the Java
consumer's records), a copy taken from a running broker (zero-filled index tails), and for the Java
and Scala rules the dump depends on (UTF-8 decoding, HashMap order) the real JVM libraries.
"""
from __future__ import annotations

import base64
import gzip
import json
import os
import re
import shutil
import struct
import subprocess
import tarfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import tools
from support.cli import run_kfmt
from support.corpus import REAL_DIRS, REALKAFKA

from kfmt.format.wire import crc32c
from kfmt.inspect.dump.java_output import java_absolute_path, java_file_string, java_string
from kfmt.inspect.dump.scalamap import ScalaHashMap
from kfmt.partition.layout import find_partitions
from kfmt.partition.reader import PartitionReader
from kfmt.storage.store import open_storage

STDERR_HEADERS = ("Mismatches in :", "Found timestamp mismatch in :", "Found out of order timestamp in :",
                  "The following indexed offsets are not found in the log.", "Non-consecutive offsets in ")
STDERR_LINE = re.compile(r"^(Mismatches in :|  Index |Found timestamp mismatch|Found out of order|"
                         r"The following indexed|Indexed offset: |Non-consecutive|  -?\d+ is followed by)")


def with_files(suffix: str) -> list:
    """Corpus directories that hold files with this suffix (all of them, for most suffixes)."""
    return [d for d in REAL_DIRS if any((REALKAFKA / d).glob(f"*{suffix}"))]


def files_of(name: str, suffix: str) -> list[str]:
    return sorted(p.name for p in (REALKAFKA / name).glob(f"*{suffix}"))


def truth_text(name: str, kind: str) -> str:
    path = REALKAFKA / f"{name}.truth" / kind
    if kind.endswith(".gz"):
        with gzip.open(path, "rb") as f:
            return f.read().decode("utf-8")
    return path.read_bytes().decode("utf-8")


def truth_records(name: str) -> list[dict]:
    with gzip.open(REALKAFKA / f"{name}.truth" / "records.jsonl.gz", "rt") as f:
        return [json.loads(line) for line in f]


def split_truth(text: str) -> tuple[list[str], list[str]]:
    """The stdout and stderr lines of a truth file that interleaves both (index dumps)."""
    lines = text.splitlines()
    return ([x for x in lines if not STDERR_LINE.match(x)], [x for x in lines if STDERR_LINE.match(x)])


def stderr_blocks(lines: list[str]) -> list[tuple[str, ...]]:
    """kafka-dump-log's stderr summaries as blocks (header + its lines), sorted: the order of the
    blocks follows the hash of the absolute path Kafka ran with, which the corpus does not keep."""
    blocks = []
    for line in lines:
        if line.startswith(STDERR_HEADERS):
            blocks.append([line])
        else:
            blocks[-1].append(line)
    return sorted(tuple(b) for b in blocks)


def in_corpus_dir(monkeypatch, name: str, *args):
    """Run kfmt dump inside the partition directory, as the truth was made; stderr paths are given
    back relative to the corpus (`<dir>/<file>`), as the truth files show them."""
    monkeypatch.chdir(REALKAFKA / name)
    result = run_kfmt("dump", *args)
    result.err = result.err.replace(f"{os.getcwd()}/", f"{name}/")
    return result


# --- .log --------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", REAL_DIRS)
def test_deep_dump_equals_kafka(name, monkeypatch):
    result = in_corpus_dir(monkeypatch, name, "--deep-iteration", "--print-data-log",
                           *files_of(name, ".log"))
    assert result.code == 0, result.err
    assert result.out == truth_text(name, "dump-log.deep.txt.gz")
    # stderr: the offset gaps inside each file, worked out from Kafka's own record lines
    assert stderr_blocks(result.err.splitlines()) == expected_gaps(name, result.out)


def expected_gaps(name: str, deep_text: str) -> list[tuple[str, ...]]:
    truth = truth_text(name, "dump-log.deep.txt.gz")
    assert truth == deep_text
    blocks = []
    for part in truth.split("Dumping ")[1:]:
        file = part.split("\n", 1)[0]
        offsets = [int(m) for m in re.findall(r"^\| offset: (\d+) ", part, re.M)]
        pairs, last = [], -1
        for offset in offsets:  # DumpLogSegments: the file's first record only sets lastOffset
            if last != -1 and offset != last + 1:
                pairs.append((last, offset))
            last = offset
        if pairs:
            blocks.append(tuple([f"Non-consecutive offsets in {name}/{file}"]
                                + [f"  {a} is followed by {b}" for a, b in reversed(pairs)]))
    return sorted(blocks)


def test_compacted_logs_report_their_gaps(realkafka, monkeypatch):
    # the check above must not pass vacuously: the compacted corpus has gaps
    assert expected_gaps("compact-v2-none-0", truth_text("compact-v2-none-0", "dump-log.deep.txt.gz"))


@pytest.mark.parametrize("name", REAL_DIRS)
def test_batch_dump_equals_kafka(name, monkeypatch):
    result = in_corpus_dir(monkeypatch, name, *files_of(name, ".log"))
    assert result.code == 0, result.err
    assert result.out == truth_text(name, "dump-log.batches.txt")
    assert result.err == ""


@pytest.mark.parametrize("name", REAL_DIRS)
def test_skip_record_metadata(name, monkeypatch):
    """Kafka's record lines without their metadata: `| key: K payload: V`, ` payload: V` for a
    record without a key (the Scala tool's quirk), an empty line for a control record."""
    result = in_corpus_dir(monkeypatch, name, "--print-data-log", "--skip-record-metadata",
                           *files_of(name, ".log"))
    assert result.code == 0, result.err
    metadata = re.compile(r"^\| offset: \d+ \w+: -?\d+ keySize: -?\d+ valueSize: -?\d+"
                          r"( sequence: -?\d+ headerKeys: \[[^\]\n]*\])?( isValid: \w+ crc: \d+\})?"
                          r"( endTxnMarker: \w+ coordinatorEpoch: \d+)?", re.M)

    def without_metadata(m):  # "| offset: ... key: K" becomes "| key: K"
        return "|" if m.string.startswith(" key: ", m.end()) else ""

    assert result.out == metadata.sub(without_metadata, truth_text(name, "dump-log.deep.txt.gz"))


@pytest.mark.parametrize("name", ["v2-none-0", "v1-gzip-0", "v0-none-0"])
@pytest.mark.parametrize("deep", [False, True])
def test_max_bytes(name, deep, monkeypatch):
    """Only batches wholly inside the first N bytes of each file; no trailing-bytes message."""
    log = files_of(name, ".log")[2]
    batches = [line for line in truth_text(name, "dump-log.batches.txt").split(f"Dumping {log}\n")[1]
               .split("Dumping ")[0].splitlines() if " position: " in line]
    sizes = [(int(re.search(r" position: (\d+)", b)[1]), int(re.search(r" size: (\d+)", b)[1]))
             for b in batches]
    limit = sizes[len(sizes) // 2][0] + sizes[len(sizes) // 2][1] - 1  # cuts the middle batch
    args = ["--max-bytes", str(limit), log] + (["--deep-iteration"] if deep else [])
    result = in_corpus_dir(monkeypatch, name, *args)
    assert result.code == 0, result.err
    shown = [line for line in result.lines if " position: " in line and not line.startswith("|")]
    assert shown == [b for b, (pos, size) in zip(batches, sizes) if pos + size <= limit]
    assert len(shown) == len(sizes) // 2
    assert "invalid bytes" not in result.out


# --- indexes -----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", REAL_DIRS)
@pytest.mark.parametrize("suffix", [".index", ".timeindex"])
def test_index_dump_equals_kafka(name, suffix, monkeypatch):
    result = in_corpus_dir(monkeypatch, name, *files_of(name, suffix))
    assert result.code == 0, result.err
    out, err = split_truth(truth_text(name, f"dump-{suffix[1:]}.txt"))
    assert result.lines == out
    assert stderr_blocks(result.err.splitlines()) == stderr_blocks(err)


def test_index_problems_are_in_the_truth(realkafka):
    # the stderr comparison above must not pass vacuously
    assert split_truth(truth_text("v0-none-0", "dump-index.txt"))[1]
    assert split_truth(truth_text("v2-none-0", "dump-timeindex.txt"))[1]


@pytest.mark.parametrize("name", REAL_DIRS)
def test_verify_index_only(name, monkeypatch):
    """Only the problems: stdout keeps "Dumping" (and "is empty.") lines, stderr is unchanged."""
    for suffix in (".index", ".timeindex"):
        result = in_corpus_dir(monkeypatch, name, "--verify-index-only", *files_of(name, suffix))
        assert result.code == 0, result.err
        out, err = split_truth(truth_text(name, f"dump-{suffix[1:]}.txt"))
        assert result.lines == [x for x in out if x.startswith("Dumping ") or x.endswith(" is empty.")]
        assert stderr_blocks(result.err.splitlines()) == stderr_blocks(err)


@pytest.mark.parametrize("name", REAL_DIRS)
def test_index_sanity_check(name, monkeypatch):
    """Every genuine index passes OffsetIndex/TimeIndex.sanityCheck; empty offset indexes are
    reported empty before the check (DumpLogSegments.dumpIndex), empty time indexes pass it."""
    for suffix in (".index", ".timeindex"):
        result = in_corpus_dir(monkeypatch, name, "--index-sanity-check", *files_of(name, suffix))
        assert result.code == 0, result.err
        truth = split_truth(truth_text(name, f"dump-{suffix[1:]}.txt"))[0]
        expected = []
        for file in files_of(name, suffix):
            expected.append(f"Dumping {file}")
            empty = f"{file} is empty." in truth
            expected.append(f"{file} is empty." if empty else f"{file} passed sanity check.")
        assert result.lines == expected


# --- .snapshot / .txnindex ---------------------------------------------------------------------

@pytest.mark.parametrize("name", with_files(".snapshot"))
def test_snapshot_dump_equals_kafka(name, monkeypatch):
    result = in_corpus_dir(monkeypatch, name, *files_of(name, ".snapshot"))
    assert result.code == 0, result.err
    assert result.out == truth_text(name, "dump-snapshot.txt")


@pytest.mark.parametrize("name", with_files(".txnindex"))
def test_txnindex_dump_equals_kafka(name, monkeypatch):
    result = in_corpus_dir(monkeypatch, name, *files_of(name, ".txnindex"))
    assert result.code == 0, result.err
    assert result.out == truth_text(name, "dump-txnindex.txt")


# --- arguments, storage ------------------------------------------------------------------------

def test_files_option_is_kafkas_spelling(realkafka, monkeypatch):
    name = "txn-v2-none-0"
    logs, snaps = files_of(name, ".log"), files_of(name, ".snapshot")
    result = in_corpus_dir(monkeypatch, name, "--files", ",".join(logs))
    assert result.code == 0 and result.out == truth_text(name, "dump-log.batches.txt")
    # positional FILEs come first, then each --files list in order
    mixed = in_corpus_dir(monkeypatch, name, logs[0], "--files", ",".join(logs[1:]),
                          "--files", ",".join(snaps))
    assert mixed.out == truth_text(name, "dump-log.batches.txt") + truth_text(name, "dump-snapshot.txt")


def test_no_files_is_a_usage_error():
    result = run_kfmt("dump")
    assert result.code == 2 and "no files" in result.err


def test_unknown_files_are_ignored_with_kafkas_message(realkafka, monkeypatch):
    result = in_corpus_dir(monkeypatch, "v2-none-0", "partition.metadata", "00000000000000000000.txnindex.x",
                           "00000000000000000000.snapshot.deleted")
    assert result.code == 0
    assert result.lines == ["Dumping partition.metadata", "Dumping 00000000000000000000.txnindex.x",
                            "Dumping 00000000000000000000.snapshot.deleted"]
    assert result.err.splitlines() == ["Ignoring unknown file partition.metadata",
                                       "Ignoring unknown file 00000000000000000000.txnindex.x",
                                       "Ignoring unknown file 00000000000000000000.snapshot.deleted"]


def test_fsspec_url(realkafka):
    """A memory:// copy dumps like the local files, under the URL the user gave."""
    name = "v1-gzip-0"
    storage, root = open_storage("memory://kfmt-dump-test/v1-gzip-0")
    try:
        for path in (REALKAFKA / name).iterdir():
            storage.write(storage.join(root, path.name), path.read_bytes())
        logs = files_of(name, ".log")
        result = run_kfmt("dump", "--deep-iteration", "--print-data-log",
                          *[f"memory://kfmt-dump-test/v1-gzip-0/{log}" for log in logs])
        assert result.code == 0, result.err
        assert result.out == truth_text(name, "dump-log.deep.txt.gz").replace(
            "Dumping ", "Dumping memory://kfmt-dump-test/v1-gzip-0/")
        index = run_kfmt("dump", "memory://kfmt-dump-test/v1-gzip-0/00000000000000000250.index")
        assert index.code == 0, index.err
        truth = split_truth(truth_text(name, "dump-index.txt"))[0]
        start = truth.index("Dumping 00000000000000000250.index")
        end = next(i for i in range(start + 1, len(truth) + 1)
                   if i == len(truth) or truth[i].startswith("Dumping"))
        assert index.lines == ["Dumping memory://kfmt-dump-test/v1-gzip-0/00000000000000000250.index",
                               *truth[start + 1:end]]
    finally:
        storage.remove_tree(root)


# --- JSON --------------------------------------------------------------------------------------

def dump_json(*args) -> list[dict]:
    result = run_kfmt("dump", "--format", "json", *args)
    assert result.code == 0, result.err
    return [json.loads(line) for line in result.lines]


@pytest.mark.parametrize("name", REAL_DIRS)
def test_json_records_equal_the_consumer_and_the_reader(name, monkeypatch):
    monkeypatch.chdir(REALKAFKA / name)
    objects = dump_json("--print-data-log", *files_of(name, ".log"))
    batches = [o for o in objects if o["type"] == "batch"]

    # against the Java consumer: every non-control record, in order, with the same bytes
    consumed = []
    for b in batches:
        for r in b["records"]:
            if b["isControl"]:
                assert "value" not in r and r["control"]["type"] in ("COMMIT", "ABORT")
                continue
            value = r["value"]
            assert r["valueText"] == (None if value is None else java_string(base64.b64decode(value)))
            epoch = b["partitionLeaderEpoch"]
            consumed.append({"offset": r["offset"], "timestamp": r["timestamp"],
                             "timestampType": b["timestampType"], "key": r["key"], "value": value,
                             "headers": [{"key": h["key"], "value": h["value"]} for h in r.get("headers", [])],
                             "leaderEpoch": epoch if epoch >= 0 else None})
    assert consumed == truth_records(name)

    # against kfmt's own reader: the same batches at the same places
    part = find_partitions(*open_storage(str(REALKAFKA / name)))[0]
    read = [(seg.log.name, batch) for seg, batch, _ in PartitionReader(part).batches()]
    assert [(o["file"], o["position"], o["size"], o["baseOffset"], o["lastOffset"], len(o["records"]))
            for o in batches] == [(f, b.header.position, b.header.size, b.header.base_offset,
                                   b.header.last_offset, len(b)) for f, b in read]
    assert [[r["offset"] for r in o["records"]] for o in batches] == \
        [b.records.column("offset").to_pylist() for _, b in read]


@pytest.mark.parametrize("name", REAL_DIRS)
def test_json_batches_match_kafkas_batch_lines(name, monkeypatch):
    monkeypatch.chdir(REALKAFKA / name)
    objects = dump_json(*files_of(name, ".log"))
    lines = [x for x in truth_text(name, "dump-log.batches.txt").splitlines() if " position: " in x]
    batches = [o for o in objects if o["type"] == "batch"]
    assert len(batches) == len(lines)
    for o, line in zip(batches, lines):
        fields = dict(re.findall(r"(\w+): (\S+)", line))
        assert int(fields["position"]) == o["position"] and int(fields["size"]) == o["size"]
        assert int(fields["crc"]) == o["crc"] and fields["isvalid"] == str(o["isValid"]).lower()
        assert fields["compresscodec"] == o["compression"] and int(fields["magic"]) == o["magic"]
        assert int(fields[o["timestampType"]]) == o["maxTimestamp"]
        if o["magic"] == 2:
            assert int(fields["baseOffset"]) == o["baseOffset"] and int(fields["count"]) == o["count"]
            assert int(fields["lastSequence"]) == o["lastSequence"]
        assert int(fields.get("lastOffset", fields.get("offset"))) == o["lastOffset"]
    assert not [o for o in objects if o["type"] not in ("file", "batch")]


@pytest.mark.parametrize("name", REAL_DIRS)
def test_json_indexes_match_kafka(name, monkeypatch):
    monkeypatch.chdir(REALKAFKA / name)
    for suffix, kind in ((".index", "indexEntry"), (".timeindex", "timeIndexEntry")):
        objects = dump_json(*files_of(name, suffix))
        out, err = split_truth(truth_text(name, f"dump-{suffix[1:]}.txt"))
        entries = [x for x in out if x.startswith(("offset:", "timestamp:"))]
        if kind == "indexEntry":
            assert [f"offset: {o['offset']} position: {o['position']}" for o in objects
                    if o["type"] == kind] == entries
            problems = [f"  Index offset: {o['indexOffset']}, log offset: {o['logOffset']}"
                        for o in objects if o["type"] == "indexMismatch"]
            assert sorted(problems) == sorted(x for x in err if x.startswith("  Index offset"))
        else:
            assert [f"timestamp: {o['timestamp']} offset: {o['offset']}" for o in objects
                    if o["type"] == kind] == entries
            problems = [f"Indexed offset: {o['indexOffset']}, found log offset: {o['logOffset']}"
                        for o in objects if o["type"] == "offsetNotFound"]
            assert problems == [x for x in err if x.startswith("Indexed offset")]


def test_json_snapshot_and_txnindex(realkafka, monkeypatch):
    name = "txn-v2-none-0"
    monkeypatch.chdir(REALKAFKA / name)
    snapshots = dump_json(*files_of(name, ".snapshot"))
    producers = [o for o in snapshots if o["type"] == "producer"]
    lines = [x for x in truth_text(name, "dump-snapshot.txt").splitlines() if x.startswith("producerId")]
    assert len(producers) == len(lines)
    for o, line in zip(producers, lines):
        fields = dict(re.findall(r"(\w+): (\S+)", line))
        assert int(fields["producerId"]) == o["producerId"]
        assert fields["currentTxnFirstOffset"] == ("OptionalLong.empty" if o["currentTxnFirstOffset"] is None
                                                   else f"OptionalLong[{o['currentTxnFirstOffset']}]")
        if "firstSequence" in fields:
            assert int(fields["firstSequence"]) == o["batch"]["firstSequence"]
        else:
            assert o["batch"] is None
    txns = [o for o in dump_json(*files_of(name, ".txnindex")) if o["type"] == "abortedTxn"]
    assert [f"version: {o['version']} producerId: {o['producerId']} firstOffset: {o['firstOffset']} "
            f"lastOffset: {o['lastOffset']} lastStableOffset: {o['lastStableOffset']}" for o in txns] == \
        [x for x in truth_text(name, "dump-txnindex.txt").splitlines() if x.startswith("version")]


# --- a copy taken from a running broker: preallocated, zero-filled index tails -----------------

@pytest.fixture
def running_copy(realkafka, tmp_path):
    with tarfile.open(REALKAFKA / "_running-copies" / "v2-zstd-0.running.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    directory = tmp_path / "v2-zstd-0"
    assert (directory / "00000000000000000447.index").stat().st_size == 10485760
    return directory


def test_running_copy_indexes_stop_at_the_zero_fill(running_copy, monkeypatch):
    """The active segment's indexes print their real entries only. Its .index holds the entry the
    stopped broker's copy has; its .timeindex lacks the entry written at shutdown. The time-index
    check finds the batches although Kafka's lookup sends it to position 0 (the zero tail fills
    the index's warm section)."""
    monkeypatch.chdir(running_copy)
    index = run_kfmt("dump", *files_of("v2-zstd-0", ".index"))
    assert index.code == 0 and index.err == ""
    assert index.lines == split_truth(truth_text("v2-zstd-0", "dump-index.txt"))[0]
    time_index = run_kfmt("dump", *files_of("v2-zstd-0", ".timeindex"))
    assert time_index.code == 0 and time_index.err == ""
    truth = split_truth(truth_text("v2-zstd-0", "dump-timeindex.txt"))[0]
    assert truth[-2:] == ["timestamp: 1700000496138 offset: 496", "timestamp: 1700000499162 offset: 499"]
    assert time_index.lines == truth[:-1]
    objects = dump_json("00000000000000000447.index", "00000000000000000447.timeindex")
    assert [o["slot"] for o in objects if o["type"] in ("indexEntry", "timeIndexEntry")] == [0, 0]


def test_running_copy_sanity_check(running_copy, monkeypatch):
    """The zero tail passes OffsetIndex.sanityCheck (its last slot's offset is the base offset) but
    fails TimeIndex.sanityCheck (last timestamp 0 < first): one line, exit 65, no traceback."""
    monkeypatch.chdir(running_copy)
    result = run_kfmt("dump", "--index-sanity-check", "00000000000000000447.index",
                      "00000000000000000447.timeindex")
    assert result.code == 65
    assert result.lines == ["Dumping 00000000000000000447.index",
                            "00000000000000000447.index passed sanity check.",
                            "Dumping 00000000000000000447.timeindex"]
    assert len(result.err.splitlines()) == 1
    assert "the last timestamp is 0 which is less than the first timestamp 1700000496138" in result.err
    assert "Traceback" not in result.err


def test_running_copy_logs_dump_like_the_stopped_copy(running_copy, monkeypatch):
    monkeypatch.chdir(running_copy)
    result = run_kfmt("dump", "--deep-iteration", "--print-data-log", *files_of("v2-zstd-0", ".log"))
    assert result.code == 0
    assert result.out == truth_text("v2-zstd-0", "dump-log.deep.txt.gz")


# --- bad data: Kafka's messages where it goes on, one line and exit 65 where it throws --------

def copy_dir(name: str, tmp_path):
    return shutil.copytree(REALKAFKA / name, tmp_path / name, copy_function=shutil.copyfile)


@pytest.mark.parametrize("tail", [bytes(17), struct.pack(">qi", 999, 500) + b"\x02" * 20],
                         ids=["short-of-a-header", "entry-past-the-end"])
def test_trailing_bytes_are_reported_like_kafka(realkafka, tmp_path, monkeypatch, tail):
    """Kafka's reader stops quietly before 17 or fewer bytes and before an entry that runs past the
    end of the file; the dump then counts the bytes left."""
    directory = copy_dir("v2-none-0", tmp_path)
    monkeypatch.chdir(directory)
    log = directory / "00000000000000000000.log"
    with open(log, "ab") as f:
        f.write(tail)
    result = run_kfmt("dump", log.name)
    assert result.code == 0
    first = truth_text("v2-none-0", "dump-log.batches.txt").split("Dumping ")[1]
    assert result.out == f"Dumping {first}Found {len(tail)} invalid bytes at the end of {log.name}\n"


def test_zero_filled_log_tail_is_fatal_as_in_kafka(realkafka, tmp_path, monkeypatch):
    """18+ zero bytes read as an entry of size 0 < 14: Kafka throws CorruptRecordException."""
    directory = copy_dir("v1-none-0", tmp_path)
    monkeypatch.chdir(directory)
    log = sorted(directory.glob("*.log"))[0]
    size = log.stat().st_size
    with open(log, "ab") as f:
        f.write(bytes(4096))
    result = run_kfmt("dump", "--deep-iteration", log.name)
    assert result.code == 65
    assert result.out.startswith(f"Dumping {log.name}\nLog starting offset: 0\n")
    assert len(result.err.splitlines()) == 1
    assert f"position {size}" in result.err and "Traceback" not in result.err


def test_corrupt_snapshot_message_and_the_run_goes_on(realkafka, tmp_path, monkeypatch):
    directory = copy_dir("v2-none-0", tmp_path)
    monkeypatch.chdir(directory)
    snaps = files_of("v2-none-0", ".snapshot")
    data = bytearray((directory / snaps[0]).read_bytes())
    data[-1] ^= 0xFF
    (directory / snaps[0]).write_bytes(bytes(data))
    (directory / snaps[1]).write_bytes((directory / snaps[1]).read_bytes()[:30])
    result = run_kfmt("dump", *snaps)
    stored = int.from_bytes(data[2:6], "big")
    assert result.err.splitlines() == [
        f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {stored}. Computed crc: "
        f"{crc32c(bytes(data[6:]))}",
        "Snapshot failed schema validation: Error reading field 'producer_entries': Error reading field "
        "'last_offset': java.nio.BufferUnderflowException"]
    expected = ""
    for block in truth_text("v2-none-0", "dump-snapshot.txt").split("Dumping ")[1:]:
        name = block.split("\n", 1)[0]
        # Kafka printed no entries for the corrupt two
        expected += f"Dumping {name}\n" if name in snaps[:2] else f"Dumping {block}"
    assert result.out == expected
    assert result.code == 65


def test_corrupt_txnindex_version_is_fatal(realkafka, tmp_path, monkeypatch):
    directory = copy_dir("txn-v2-none-0", tmp_path)
    monkeypatch.chdir(directory)
    name = files_of("txn-v2-none-0", ".txnindex")[0]
    data = (directory / name).read_bytes()
    (directory / name).write_bytes(data + b"\x01" + data[1:])
    result = run_kfmt("dump", name)
    assert result.code == 65
    first_entry = truth_text("txn-v2-none-0", "dump-txnindex.txt").splitlines()[1]
    assert result.lines == [f"Dumping {name}", first_entry]
    assert "Unexpected aborted transaction version 1" in result.err and len(result.err.splitlines()) == 1


def test_index_without_its_log(realkafka, tmp_path, monkeypatch):
    directory = copy_dir("v2-none-0", tmp_path)
    monkeypatch.chdir(directory)
    (directory / "00000000000000000203.log").unlink()
    for name in ("00000000000000000203.index", "00000000000000000203.timeindex"):
        result = run_kfmt("dump", name)
        assert result.code == 65 and result.lines == [f"Dumping {name}"]
        assert "00000000000000000203.log is missing" in result.err and len(result.err.splitlines()) == 1


def test_corrupt_batch_crc_is_printed_not_refused(realkafka, tmp_path, monkeypatch):
    directory = copy_dir("v2-gzip-0", tmp_path)
    monkeypatch.chdir(directory)
    log = directory / "00000000000000000000.log"
    data = bytearray(log.read_bytes())
    data[-1] ^= 0x01  # inside the last batch's compressed records: its CRC no longer holds
    log.write_bytes(bytes(data))
    result = run_kfmt("dump", log.name)
    assert result.code == 0
    batch_lines = [x for x in result.lines if " position: " in x]
    assert batch_lines[-1].endswith("isvalid: false") and batch_lines[0].endswith("isvalid: true")


# --- the Java and Scala rules, against the real JVM libraries ----------------------------------


JAVA_UTF8 = """
import java.io.*; import java.nio.charset.StandardCharsets; import java.util.HexFormat;
public class JavaUtf8 { public static void main(String[] a) throws Exception {
  BufferedReader r = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
  HexFormat hf = HexFormat.of(); StringBuilder out = new StringBuilder(); String line;
  while ((line = r.readLine()) != null) {
    String decoded = new String(hf.parseHex(line), StandardCharsets.UTF_8);
    out.append(hf.formatHex(decoded.getBytes(StandardCharsets.UTF_8))).append('\\n'); }
  System.out.print(out); } }
"""


@pytest.mark.needs("java")
def test_java_string_equals_java(tmp_path):
    import random

    rng = random.Random(20231114)
    tricky = [0x41, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xE1, 0xED, 0xEF,
              0xF0, 0xF4, 0xF5, 0xF7, 0xF8, 0xFF]
    cases = [bytes(rng.choice(tricky) for _ in range(rng.randint(0, 7))) for _ in range(6000)]
    cases += [bytes(rng.randrange(256) for _ in range(rng.randint(0, 40))) for _ in range(3000)]
    (tmp_path / "JavaUtf8.java").write_text(JAVA_UTF8)
    stdin = "".join(c.hex() + "\n" for c in cases)
    java = subprocess.run([tools.java(), str(tmp_path / "JavaUtf8.java")], input=stdin, capture_output=True,
                          text=True, check=True, timeout=120).stdout.splitlines()
    mine = [java_string(c).encode("utf-8").hex() for c in cases]
    assert mine == java
    # and it matters: Python's own replacement differs on some of them
    assert any(c.decode("utf-8", "replace").encode().hex() != j for c, j in zip(cases, java))


@given(st.text())
@settings(max_examples=300)
def test_java_string_of_valid_utf8_is_the_text(text):
    assert java_string(text.encode("utf-8")) == text


SCALA_ORDER = """
import java.io.*; import java.nio.charset.StandardCharsets;
public class ScalaOrder { public static void main(String[] a) throws Exception {
  // maps separated by empty lines, one put per line; prints each map's keys in iteration order
  BufferedReader r = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
  PrintStream out = new PrintStream(System.out, true, "UTF-8");
  scala.collection.mutable.HashMap<String, Object> m = new scala.collection.mutable.HashMap<>();
  String line; int i = 0;
  while (true) { line = r.readLine();
    if (line == null || line.isEmpty()) {
      scala.collection.Iterator<String> it = m.keysIterator(); while (it.hasNext()) out.println(it.next());
      out.println(); m = new scala.collection.mutable.HashMap<>(); if (line == null) break; continue; }
    m.put(line, i++); } } }
"""


@pytest.mark.needs("java", "scala")
def test_scala_hashmap_order_equals_scala(tmp_path):
    """Kafka's stderr summaries come out in Scala 2.13 mutable.HashMap order; growth is triggered by
    puts that only replace a value too, so the test replays put sequences with repeats."""
    import random

    rng = random.Random(7)
    maps = []
    for _ in range(60):
        keys = [java_absolute_path(f"d{rng.randint(0, 99)}/{rng.randint(0, 10**6):020d}.index", "/tmp/kafka")
                for _ in range(rng.randint(1, 70))]
        maps.append([rng.choice(keys) for _ in range(rng.randint(1, 200))])
    (tmp_path / "ScalaOrder.java").write_text(SCALA_ORDER)
    stdin = "".join("\n".join(puts) + "\n\n" for puts in maps).rstrip("\n") + "\n"
    out = subprocess.run([tools.java(), "-cp", tools.scala_library(), str(tmp_path / "ScalaOrder.java")],
                         input=stdin, capture_output=True, text=True, check=True, timeout=120).stdout
    scala = [block.splitlines() for block in out.split("\n\n")][:len(maps)]
    mine = []
    for puts in maps:
        m = ScalaHashMap()
        for i, key in enumerate(puts):
            m.put(key, i)
        mine.append([k for k, _ in m.items()])
    assert mine == scala


def test_java_file_names():
    assert java_file_string("a//b///c/") == "a/b/c"
    assert java_absolute_path("./x.index", "/data") == "/data/./x.index"
    assert java_absolute_path("/abs//x.log", "/data") == "/abs/x.log"
    assert java_absolute_path("x.log", "/") == "/x.log"


# --- the reference's worked examples (docs/format.md §3.3, §4.5, §4.6, §15.2) -----------------------

V2_BATCH = bytes.fromhex(  # §4.5: offset 0, key "test", value "Super", CreateTime 1700000000000
    "0000000000000000 00000041 00000000 02 38cb2fd7 0000 00000000 0000018bcfe56800 0000018bcfe56800"
    "ffffffffffffffff ffff ffffffff 00000001 1e000000087465737 40a537570657200".replace(" ", ""))
COMMIT_MARKER = bytes.fromhex(  # §4.6: COMMIT at offset 10, producer 1000, coordinator epoch 5
    "000000000000000a000000420000000002fc84b0340030000000000000018bcfe56800000001"
    "8bcfe5680000000000000003e80000ffffffff00000001200000000800000001"
    "0c0000000000050" "0")
V1_MESSAGE = bytes.fromhex(  # §3.3: v1, offset 0, CreateTime 9999999
    "0000000000000000 0000001f 831fac85 01 00 0000000000989 67f 00000004 74657374 00000005 5375706572"
    .replace(" ", ""))


def test_reference_examples(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "00000000000000000000.log").write_bytes(V2_BATCH + COMMIT_MARKER)
    (tmp_path / "00000000000000000001.log").write_bytes(V1_MESSAGE)
    result = run_kfmt("dump", "--print-data-log", "00000000000000000000.log", "00000000000000000001.log")
    assert result.code == 0, result.err
    assert result.lines == [
        "Dumping 00000000000000000000.log", "Log starting offset: 0",
        "baseOffset: 0 lastOffset: 0 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 "
        "producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: "
        "OptionalLong.empty position: 0 CreateTime: 1700000000000 size: 77 magic: 2 compresscodec: none "
        "crc: 952840151 isvalid: true",
        "| offset: 0 CreateTime: 1700000000000 keySize: 4 valueSize: 5 sequence: -1 headerKeys: [] "
        "key: test payload: Super",
        "baseOffset: 10 lastOffset: 10 count: 1 baseSequence: -1 lastSequence: -1 producerId: 1000 "
        "producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: true isControl: true deleteHorizonMs: "
        "OptionalLong.empty position: 77 CreateTime: 1700000000000 size: 78 magic: 2 compresscodec: none "
        "crc: 4236554292 isvalid: true",
        "| offset: 10 CreateTime: 1700000000000 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] "
        "endTxnMarker: COMMIT coordinatorEpoch: 5",
        "Dumping 00000000000000000001.log", "Log starting offset: 1",
        "offset: 0 position: 0 CreateTime: 9999999 size: 43 magic: 1 compresscodec: none crc: 2199891077 "
        "isvalid: true",
        "| offset: 0 CreateTime: 9999999 keySize: 4 valueSize: 5 isValid: true crc: 2199891077} key: test "
        "payload: Super"]
    # and the non-consecutive check saw 0 followed by 10 in the first file
    assert result.err.splitlines() == [f"Non-consecutive offsets in {tmp_path}/00000000000000000000.log",
                                       "  0 is followed by 10"]


def test_kraft_snapshot_and_control_types(tmp_path, monkeypatch):
    """A KRaft snapshot (.checkpoint) dumps as a log under its end offset and epoch; control records
    print as Kafka 3.6 names them with --kafka-version 3.6 (types it does not know as UNKNOWN, a
    LeaderChange it does not parse, so a short one is no error)."""
    from kfmt.format.model import BatchHeader, make_records
    from kfmt.plugin import registry

    v2 = registry.get().format_for(2)

    def control(offset: int, type_id: int, value: bytes) -> bytes:
        header = BatchHeader(magic=2, base_offset=offset, last_offset=offset, is_control=True,
                             base_timestamp=1700000000000, max_timestamp=1700000000000,
                             partition_leader_epoch=2)
        return v2.encode(header, make_records([offset], [1700000000000], [struct.pack(">hh", 0, type_id)],
                                              [value]))

    data = (control(0, 3, struct.pack(">hqb", 0, 1699999999999, 0))  # SnapshotHeader, no tagged fields
            + control(1, 2, b"\x00\x00")  # LEADER_CHANGE
            + control(2, 5, b"\x00\x00")  # KRAFT_VERSION: unknown to Kafka 3.6
            + control(3, 4, struct.pack(">hb", 0, 0)))  # SnapshotFooter
    name = "00000000000000000100-0000000002.checkpoint"
    (tmp_path / name).write_bytes(data)
    monkeypatch.chdir(tmp_path)
    result = run_kfmt("dump", "--deep-iteration", "--kafka-version", "3.6", name)
    assert result.code == 0, result.err
    records = [line.split("headerKeys: [] ", 1)[1] for line in result.lines if line.startswith("| ")]
    assert result.lines[:2] == [f"Dumping {name}", "Snapshot end offset: 100, epoch: 2"]
    assert records == ['SnapshotHeader {"version":0,"lastContainedLogTimestamp":1699999999999}',
                       "controlType: LEADER_CHANGE(2)", "controlType: UNKNOWN(5)",
                       'SnapshotFooter {"version":0}']
    skipped = run_kfmt("dump", "--deep-iteration", "--skip-record-metadata", "--kafka-version", "3.6", name)
    assert [line for line in skipped.lines if " position: " not in line][2:] == ["", "", "", ""]
