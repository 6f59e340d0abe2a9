"""kfmt verify: genuine broker-written directories verify clean; corrupted copies fail (exit 65) with
every problem named by file, byte position and offset.

Positions and offsets the assertions expect come from the corpus's own ground truth (kafka-dump-log's
listings of batches, index entries and records in `*.truth/`), never from kfmt. Corruptions are made
in tmp_path copies; the corpus is never modified.
"""
from __future__ import annotations

import gzip
import json
import re
import shutil
import struct
import tarfile
import zlib
from pathlib import Path

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.cli import run_kfmt
from support.corpus import REAL_DIRS, REALKAFKA

LOGDIR_ROOT = REALKAFKA / "_logdir-root"
RETENTION_CASES = sorted(p.name for p in (REALKAFKA / "_retention").iterdir())


# --- helpers ---
def copy_partition(name: str, dst: Path) -> Path:
    """A writable copy of a corpus partition directory (the corpus files are read-only)."""
    src = REALKAFKA / name
    dst.mkdir(parents=True)
    for f in src.iterdir():
        if f.is_file():
            (dst / f.name).write_bytes(f.read_bytes())
    return dst


def truth_batches(name: str) -> dict[str, list[dict]]:
    """kafka-dump-log's batch listing: file name -> [{position, size, base, last}] in file order."""
    out, current = {}, None
    for line in (REALKAFKA / f"{name}.truth" / "dump-log.batches.txt").read_text().splitlines():
        if line.startswith("Dumping "):
            current = out.setdefault(line.split()[1], [])
            continue
        m = (re.match(r"baseOffset: (\d+) lastOffset: (\d+) .* position: (\d+) .* size: (\d+) ", line)
             or re.match(r"offset: (\d+)() position: (\d+) .* size: (\d+) ", line))
        if m:
            base = int(m[1])
            last = int(m[2]) if m[2] else base
            current.append({"base": base, "last": last, "position": int(m[3]), "size": int(m[4])})
    return out


def truth_inner_offsets(name: str, log: str, wrapper_position: int) -> list[int]:
    """The record offsets kafka-dump-log --deep-iteration lists under the wrapper at a position."""
    offsets, inside, in_file = [], False, False
    with gzip.open(REALKAFKA / f"{name}.truth" / "dump-log.deep.txt.gz", "rt") as f:
        for line in f:
            if line.startswith("Dumping "):
                in_file = line.split()[1] == log
                inside = False
            elif in_file and re.match(r"(baseOffset|offset): \d+ .*position: \d+", line):
                inside = f"position: {wrapper_position} " in line
            elif inside and (m := re.match(r"\| offset: (\d+) ", line)):
                offsets.append(int(m[1]))
    return offsets


def truth_index_entries(name: str, kind: str) -> dict[str, list[tuple[int, int]]]:
    """kafka-dump-log's listing of .index (offset, position) or .timeindex (timestamp, offset)."""
    out, current = {}, None
    pattern = r"offset: (\d+) position: (\d+)" if kind == "index" else r"timestamp: (\d+) offset: (\d+)"
    for line in (REALKAFKA / f"{name}.truth" / f"dump-{kind}.txt").read_text().splitlines():
        if line.startswith("Dumping "):
            current = out.setdefault(line.split()[1], [])
        elif m := re.match(pattern, line):
            current.append((int(m[1]), int(m[2])))
    return out


def flip(path: Path, position: int, mask: int = 0x10) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= mask
    path.write_bytes(bytes(data))


def rewrite_v2_batch(path: Path, position: int, edit) -> None:
    """Replace the v2 batch at `position` by `edit(bytes)` with its length and CRC-32C made valid
    again, so that only what the edit changed is wrong."""
    data = path.read_bytes()
    size = struct.unpack_from(">i", data, position + 8)[0] + 12
    batch = bytearray(edit(bytes(data[position:position + size])))
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    path.write_bytes(data[:position] + bytes(batch) + data[position + size:])


def verify_json(path, *args) -> tuple[int, list[dict], dict]:
    result = run_kfmt("verify", path, "--format", "json", *args)
    assert result.err == "", result.err
    doc = json.loads(result.out)
    return result.code, [p for p in doc["problems"] if p["severity"] == "error"], doc["summary"]


def find(errors: list[dict], check: str, file: Path, position=..., offset=..., contains: str = "") -> dict:
    """The one error matching; fails listing every error when there is none."""
    for e in errors:
        if (e["check"] == check and e["file"] == str(file) and (position is ... or e["position"] == position)
                and (offset is ... or e["offset"] == offset) and contains.lower() in e["message"].lower()):
            return e
    raise AssertionError(f"no {check} error for {file} position={position} offset={offset} "
                         f"containing {contains!r} in:\n" + "\n".join(map(str, errors)))


# --- genuine directories verify clean ---
@pytest.mark.parametrize("name", REAL_DIRS)
def test_every_corpus_partition_verifies_clean(name):
    result = run_kfmt("verify", REALKAFKA / name)
    assert result.code == 0, result.out
    assert result.lines[-1].startswith("OK: 0 problem(s)")
    assert not any(line.startswith("error") for line in result.lines)


def test_the_whole_corpus_as_one_log_directory_verifies_clean(tmp_path):
    logdir = tmp_path / "kafka-logs"
    logdir.mkdir()
    names = REAL_DIRS
    for name in names:  # copies: kfmt skips (with a warning) links leading out of a log directory
        shutil.copytree(REALKAFKA / name, logdir / name, copy_function=shutil.copyfile)
    for f in LOGDIR_ROOT.iterdir():
        shutil.copyfile(f, logdir / f.name)
    code, errors, summary = verify_json(logdir)
    assert code == 0 and errors == []
    assert summary["partitions"] == len(names)
    # The broker's checkpoints also name its internal topics, whose directories are not included.
    result = run_kfmt("verify", logdir)
    notes = [line for line in result.lines if line.startswith("note")]
    assert notes and all("__transaction_state-0 has no partition directory" in n for n in notes)


def test_a_copy_from_a_running_broker_verifies_clean_with_notes(tmp_path):
    with tarfile.open(REALKAFKA / "_running-copies" / "v2-zstd-0.running.tar.gz") as tar:
        tar.extractall(tmp_path)
    part = tmp_path / "v2-zstd-0"
    code, errors, _ = verify_json(part)
    assert code == 0 and errors == []
    result = run_kfmt("verify", part, "--format", "json")
    notes = {(p["check"], Path(p["file"]).name) for p in json.loads(result.out)["problems"]}
    active = max(p.name for p in part.glob("*.log")).removesuffix(".log")
    # the active segment's preallocated indexes and missing final time-index entry are genuine
    assert notes == {("offset-index-preallocated", f"{active}.index"),
                     ("time-index-preallocated", f"{active}.timeindex"),
                     ("time-index-final", f"{active}.timeindex")}


@pytest.mark.parametrize("case", RETENTION_CASES)
@pytest.mark.parametrize("side", ["input", "remaining"])
def test_retention_inputs_and_results_verify_clean(case, side):
    result = run_kfmt("verify", REALKAFKA / "_retention" / case / side)
    assert result.code == 0, result.out


# --- corrupt batches: every one reported, the rest of the segment still checked ---
BIT_FLIP_DIRS = ["v0-none-0", "v1-none-0", "v0-gzip-0", "v1-snappy-0", "v1-lz4-0",
                 "v2-none-0", "v2-gzip-0", "v2-lz4-0", "v2-zstd-0", "txn-v2-none-0"]


@pytest.mark.parametrize("name", BIT_FLIP_DIRS)
def test_bit_flips_in_two_batches_of_a_segment_are_both_reported(name, tmp_path):
    part = copy_partition(name, tmp_path / name)
    log, batches = next((f, b) for f, b in truth_batches(name).items() if len(b) >= 3)
    first, second = batches[1], batches[-1]
    for b in (first, second):  # the last byte of an entry is covered by its CRC in every format
        flip(part / log, b["position"] + b["size"] - 1)
    code, errors, _ = verify_json(part)
    assert code == 65
    for b in (first, second):
        # the offset named is the one at the start of the entry: a v2 base offset, a legacy
        # message's own offset or a legacy wrapper's (last) offset
        find(errors, "crc", part / log, b["position"], b["base"], contains="crc")
    # whatever else is reported (a damaged record) lies inside the two damaged batches
    for e in errors:
        assert e["file"] == str(part / log)
        assert any(b["position"] <= e["position"] < b["position"] + b["size"] for b in (first, second)), e


@pytest.mark.parametrize("name", ["v1-gzip-0", "v0-gzip-0"])
def test_a_corrupt_message_inside_a_compressed_wrapper_is_reported(name, tmp_path):
    """The wrapper's CRC is intact (recomputed after the inner message was damaged): only the inner
    message's own CRC tells (docs/format.md §3.4), which only --deep reads: log recovery checks the
    wrapper's CRC alone, so the default depth finds the partition clean."""
    part = copy_partition(name, tmp_path / name)
    log = "00000000000000000000.log"
    wrapper = truth_batches(name)[log][-1]  # the last entry: rewriting it moves nothing after it
    data = (part / log).read_bytes()
    entry = data[wrapper["position"]:wrapper["position"] + wrapper["size"]]
    magic = entry[16]
    value_at = 30 if magic == 1 else 22  # after keyLength = -1 (a wrapper has a null key)
    assert struct.unpack_from(">i", entry, value_at - 4)[0] == -1
    inner = bytearray(zlib.decompress(entry[value_at + 4:], 16 + zlib.MAX_WBITS))
    # damage the value of the second inner message that has one
    pos, damaged = 0, None
    for i in range(100):
        size = struct.unpack_from(">i", inner, pos + 8)[0]
        key_at = pos + 12 + (14 if magic == 1 else 6)
        key_len = struct.unpack_from(">i", inner, key_at)[0]
        value_len = struct.unpack_from(">i", inner, key_at + 4 + max(key_len, 0))[0]
        if i > 0 and value_len > 0:
            inner[pos + 12 + size - 1] ^= 0x01
            damaged = i
            break
        pos += 12 + size
    compressor = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    value = compressor.compress(bytes(inner)) + compressor.flush()
    body = entry[16:value_at] + struct.pack(">i", len(value)) + value
    rebuilt = entry[:8] + struct.pack(">iI", len(body) + 4, zlib.crc32(body)) + body
    (part / log).write_bytes(data[:wrapper["position"]] + rebuilt)
    code, errors, summary = verify_json(part)
    assert (code, errors, summary["depth"]) == (0, [], "recovery")
    code, errors, summary = verify_json(part, "--deep")
    assert (code, summary["depth"]) == (65, "deep")
    inner_offset = truth_inner_offsets(name, log, wrapper["position"])[damaged]
    find(errors, "crc", part / log, wrapper["position"], inner_offset, contains=f"inner message {damaged}")
    assert len([e for e in errors if e["check"] == "crc"]) == 1


# --- broken framing: reported, and the next files are still checked ---
def test_truncation_mid_batch(tmp_path):
    part = copy_partition("v2-none-0", tmp_path / "v2-none-0")
    log = "00000000000000000000.log"
    last = truth_batches("v2-none-0")[log][-1]
    (part / log).write_bytes((part / log).read_bytes()[:last["position"] + 100])
    next_first = truth_batches("v2-none-0")["00000000000000000041.log"][0]
    flip(part / "00000000000000000041.log", next_first["size"] - 1)
    code, errors, _ = verify_json(part)
    assert code == 65
    find(errors, "framing", part / log, last["position"], last["base"], contains=f"{last['size']} bytes")
    # the next segment was still checked
    find(errors, "crc", part / "00000000000000000041.log", 0, next_first["base"])


def test_trailing_garbage(tmp_path):
    part = copy_partition("v1-none-0", tmp_path / "v1-none-0")
    log = part / sorted(truth_batches("v1-none-0"))[1]
    size = log.stat().st_size
    log.write_bytes(log.read_bytes() + b"this is not a kafka entry!")
    code, errors, _ = verify_json(part)
    assert code == 65
    find(errors, "framing", log, size)


def test_an_impossible_entry_length(tmp_path):
    part = copy_partition("v2-gzip-0", tmp_path / "v2-gzip-0")
    log = part / "00000000000000000000.log"
    second = truth_batches("v2-gzip-0")[log.name][1]
    data = bytearray(log.read_bytes())
    struct.pack_into(">i", data, second["position"] + 8, 3)
    log.write_bytes(bytes(data))
    code, errors, _ = verify_json(part)
    assert code == 65
    find(errors, "framing", log, second["position"], second["base"], contains="size 3")


# --- record structure, control records, transactional state (CRCs made valid again) ---
@pytest.mark.parametrize("edit, words", [
    (lambda b: b + b"\x00", "1 bytes follow"),  # a byte after the declared records
    # one record more declared than the batch holds
    (lambda b: b[:57] + struct.pack(">i", struct.unpack_from(">i", b, 57)[0] + 1) + b[61:],
     "declares 14 records"),
])
def test_records_that_do_not_match_their_batch(tmp_path, edit, words):
    part = copy_partition("v2-none-0", tmp_path / "v2-none-0")
    log = part / "00000000000000000000.log"
    last = truth_batches("v2-none-0")[log.name][-1]  # the last batch: resizing it moves nothing else
    assert last["last"] - last["base"] == 12  # 13 records
    rewrite_v2_batch(log, last["position"], edit)
    code, errors, _ = verify_json(part)
    assert code == 65
    error = find(errors, "record-structure", log, contains=words)
    assert last["position"] <= error["position"] < last["position"] + last["size"] + 1
    assert not [e for e in errors if e["check"] == "crc"]


MARKER_RECORD_HEADER = b"\x20\x00\x00\x00"  # length 16, attributes, timestamp and offset deltas 0


@pytest.mark.parametrize("record, words", [
    (b"\x04\x00\x01" + b"\x10" + bytes(8) + b"\x00", "key of 2 bytes"),  # key of 2 bytes, value 8
    (b"\x08\x00\x00\x00\x01" + b"\x08" + bytes(4) + b"\x02\x00\x01", "value of 4 bytes"),  # + 1 header
    (b"\x08\xff\xff\x00\x01" + b"\x0c" + bytes(6) + b"\x00", "negative version"),
])
def test_control_records_that_do_not_parse(tmp_path, record, words):
    part = copy_partition("txn-v2-none-0", tmp_path / "txn-v2-none-0")
    marker = next(b for f, batches in truth_batches("txn-v2-none-0").items() for b in batches
                  if f == "00000000000000000062.log" and b["position"] == 0)
    log = part / "00000000000000000062.log"
    rewrite_v2_batch(log, 0, lambda b: b[:61] + MARKER_RECORD_HEADER + record)
    code, errors, _ = verify_json(part)
    assert code == 65
    find(errors, "control-record", log, 0, marker["base"], contains=words)


def test_a_non_transactional_batch_inside_an_open_transaction(tmp_path):
    """Replaying it fails Kafka's producer-state rebuild (InvalidTxnStateException, §8)."""
    part = copy_partition("txn-v2-none-0", tmp_path / "txn-v2-none-0")
    log = part / "00000000000000000000.log"
    inside = truth_batches("txn-v2-none-0")[log.name][1]  # the transaction began with batch 0
    rewrite_v2_batch(log, inside["position"], lambda b: b[:22] + bytes([b[22] & ~0x10]) + b[23:])
    code, errors, _ = verify_json(part)
    assert code == 65
    find(errors, "txn-state", log, inside["position"], inside["base"], contains="non-transactional")


# --- indexes against the log ---
def _first_indexed(name: str, kind: str) -> tuple[str, list[tuple[int, int]]]:
    return next((f, entries) for f, entries in truth_index_entries(name, kind).items() if len(entries) >= 2)


def test_an_index_entry_pointing_past_the_log(tmp_path):
    part = copy_partition("v2-none-0", tmp_path / "v2-none-0")
    index, entries = _first_indexed("v2-none-0", "index")
    base = int(index.split(".")[0])
    offset, _position = entries[1]
    log_size = (part / index.replace(".index", ".log")).stat().st_size
    data = bytearray((part / index).read_bytes())
    struct.pack_into(">ii", data, 8, offset - base, log_size + 100)
    (part / index).write_bytes(bytes(data))
    code, errors, _ = verify_json(part)
    assert code == 65
    find(errors, "offset-index-entry", part / index, 8, offset, contains="past the end of the log")


def test_an_index_entry_pointing_inside_a_batch(tmp_path):
    part = copy_partition("v2-none-0", tmp_path / "v2-none-0")
    index, entries = _first_indexed("v2-none-0", "index")
    base = int(index.split(".")[0])
    offset, position = entries[0]
    data = bytearray((part / index).read_bytes())
    struct.pack_into(">ii", data, 0, offset - base, position + 7)
    (part / index).write_bytes(bytes(data))
    code, errors, _ = verify_json(part)
    assert code == 65
    find(errors, "offset-index-entry", part / index, 0, offset, contains="inside")


def test_an_out_of_order_time_index(tmp_path):
    part = copy_partition("v2-none-0", tmp_path / "v2-none-0")
    timeindex, entries = _first_indexed("v2-none-0", "timeindex")
    data = (part / timeindex).read_bytes()
    (part / timeindex).write_bytes(data[12:24] + data[:12] + data[24:])
    code, errors, _ = verify_json(part)
    assert code == 65
    find(errors, "time-index-order", part / timeindex, 12, entries[0][1], contains="not later")


def test_a_time_index_without_its_final_entry(tmp_path):
    part = copy_partition("v2-none-0", tmp_path / "v2-none-0")
    timeindex, entries = _first_indexed("v2-none-0", "timeindex")
    (part / timeindex).write_bytes((part / timeindex).read_bytes()[:-12])
    code, errors, _ = verify_json(part)
    assert code == 65
    find(errors, "time-index-final", part / timeindex, contains=f"largest timestamp is {entries[-1][0]}")


# --- transaction index, snapshots, checkpoints ---
def test_a_txn_index_entry_naming_a_non_marker(tmp_path):
    part = copy_partition("txn-v2-none-0", tmp_path / "txn-v2-none-0")
    truth = (REALKAFKA / "txn-v2-none-0.truth" / "dump-txnindex.txt").read_text()
    pid, first, marker, lso = map(int, re.search(
        r"producerId: (\d+) firstOffset: (\d+) lastOffset: (\d+) lastStableOffset: (\d+)", truth).groups())
    txnindex = next(part.glob("*.txnindex"))
    data = bytearray(txnindex.read_bytes())
    struct.pack_into(">hqqqq", data, 0, 0, pid, first, first, first + 1)  # the transaction's first batch
    txnindex.write_bytes(bytes(data))
    code, errors, _ = verify_json(part)
    assert code == 65
    find(errors, "txn-index-entry", txnindex, 0, first, contains="data batch")
    # ...and the real ABORT marker is now left without an entry
    find(errors, "txn-index-missing", part / (txnindex.stem + ".log"), offset=marker)


def test_a_snapshot_with_a_bad_crc(tmp_path):
    part = copy_partition("v2-none-0", tmp_path / "v2-none-0")
    snapshot = sorted(part.glob("*.snapshot"))[3]
    flip(snapshot, 20)
    code, errors, _ = verify_json(part)
    assert code == 65
    find(errors, "snapshot", snapshot, contains="crc")


@pytest.mark.parametrize("text, position, words", [
    ("0\n2\n0 0\n", 2, "declares 2 entries"),
    ("0\n1\n0 zero\n", 4, "malformed leader epoch entry"),
    ("0\n1\n0 0 0\n", 4, "expected 2 fields"),
    ("1\n1\n0 0\n", 0, "version 1"),
    ("0\n2\n0 0\n0 5\n", 8, "strictly increasing"),
    ("0\n1\n0 900\n", 4, "beyond the log end offset 500"),
])
def test_a_malformed_leader_epoch_checkpoint(tmp_path, text, position, words):
    part = copy_partition("v2-none-0", tmp_path / "v2-none-0")
    (part / "leader-epoch-checkpoint").write_text(text)
    code, errors, _ = verify_json(part)
    assert code == 65
    find(errors, "leader-epoch-checkpoint", part / "leader-epoch-checkpoint", position, contains=words)


@pytest.mark.parametrize("text", ["version: 0\ntopic_id: not-a-topic-id", "version: 0\n",
                                  "topic_id: AxZqudQbRCOynzdEmxgmzw\nversion: 0",
                                  "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA"])
def test_a_bad_partition_metadata(tmp_path, text):
    part = copy_partition("v2-none-0", tmp_path / "v2-none-0")
    (part / "partition.metadata").write_text(text)
    code, errors, _ = verify_json(part)
    assert code == 65
    find(errors, "partition-metadata", part / "partition.metadata")


def _small_log_dir(tmp_path) -> Path:
    logdir = tmp_path / "kafka-logs"
    copy_partition("v2-none-0", logdir / "v2-none-0")
    copy_partition("v1-gzip-0", logdir / "v1-gzip-0")
    return logdir


@pytest.mark.parametrize("name, text, position, words", [
    ("recovery-point-offset-checkpoint", "0\n2\nv2-none 0 500\nv1-gzip 0\n", 18, "malformed"),
    ("replication-offset-checkpoint", "0\n3\nv2-none 0 500\n", 2, "declares 3 entries"),
    ("cleaner-offset-checkpoint", "0 \n0\n", 0, "malformed"),
    ("log-start-offset-checkpoint", "0\n1\nv2-none x 0\n", 4, "malformed"),
    ("log-start-offset-checkpoint", "0\n1\nv1-gzip 0 401\n", 4, "beyond its log end offset 400"),
])  # the other checkpoints beyond the log end are notes: tests/partition/test_kafka_layouts.py
def test_a_malformed_or_inconsistent_offset_checkpoint(tmp_path, name, text, position, words):
    logdir = _small_log_dir(tmp_path)
    (logdir / name).write_text(text)
    code, errors, _ = verify_json(logdir)
    assert code == 65
    find(errors, "offset-checkpoint", logdir / name, position, contains=words)


def test_consistent_offset_checkpoints_verify_clean(tmp_path):
    logdir = _small_log_dir(tmp_path)
    for name in ("recovery-point-offset-checkpoint", "replication-offset-checkpoint"):
        (logdir / name).write_text("0\n2\nv2-none 0 500\nv1-gzip 0 400\n")
    (logdir / "log-start-offset-checkpoint").write_text("0\n1\nv1-gzip 0 250\n")
    (logdir / "cleaner-offset-checkpoint").write_text("")  # a 0-byte checkpoint is a valid empty one
    shutil.copyfile(LOGDIR_ROOT / "meta.properties", logdir / "meta.properties")
    result = run_kfmt("verify", logdir)
    assert result.code == 0, result.out


@pytest.mark.parametrize("text, words", [("version=0\n", "no broker.id"),
                                         ("version=3\nbroker.id=0\n", "version"),
                                         ("version=1\nnode.id=1\n", "no cluster.id"),
                                         ("version=0\nbroker.id=zero\n", "not an integer")])
def test_a_bad_meta_properties(tmp_path, text, words):
    logdir = _small_log_dir(tmp_path)
    (logdir / "meta.properties").write_text("#\n#Sun Nov 22 07:45:54 UTC 2026\n" + text)
    code, errors, _ = verify_json(logdir)
    assert code == 65
    find(errors, "meta-properties", logdir / "meta.properties", contains=words)


# --- several problems in several files: all listed ---
def test_every_problem_in_every_file_is_listed(tmp_path):
    logdir = _small_log_dir(tmp_path)
    v2, v1 = logdir / "v2-none-0", logdir / "v1-gzip-0"
    v2_batches, v1_batches = truth_batches("v2-none-0"), truth_batches("v1-gzip-0")
    b = v2_batches["00000000000000000000.log"][1]
    flip(v2 / "00000000000000000000.log", b["position"] + 70)
    w = v1_batches["00000000000000000050.log"][0]
    flip(v1 / "00000000000000000050.log", w["position"] + w["size"] - 5)
    index, entries = _first_indexed("v2-none-0", "index")
    data = bytearray((v2 / index).read_bytes())
    struct.pack_into(">i", data, 4, entries[0][1] + 3)
    (v2 / index).write_bytes(bytes(data))
    snapshot = sorted(v1.glob("*.snapshot"))[0]
    flip(snapshot, 2)
    (v2 / "partition.metadata").write_text("version: x\ntopic_id: AxZqudQbRCOynzdEmxgmzw")
    (logdir / "log-start-offset-checkpoint").write_text("0\n1\nv2-none 0 9000\n")
    # stopped cleanly: a broker trusts the indexes (without the marker it rebuilds them, and a bad
    # entry is a note: tests/partition/test_kafka_layouts.py)
    (logdir / ".kafka_cleanshutdown").write_text("")

    result = run_kfmt("verify", logdir)
    assert result.code == 65
    errors = [line for line in result.lines if line.startswith("error")]
    expected = [
        ("[crc]", f"{v2 / '00000000000000000000.log'}, position {b['position']}, offset {b['base']}:"),
        ("[crc]", f"{v1 / '00000000000000000050.log'}, position {w['position']}, offset {w['base']}:"),
        ("[offset-index-entry]", f"{v2 / index}, position 0, offset {entries[0][0]}:"),
        ("[snapshot]", f"{snapshot}, position"),
        ("[partition-metadata]", f"{v2 / 'partition.metadata'}, position 0:"),
        ("[offset-checkpoint]", f"{logdir / 'log-start-offset-checkpoint'}, position 4, offset 9000:"),
    ]
    for check, where in expected:
        assert any(check in line and where in line for line in errors), (check, where, result.out)
    assert result.lines[-1].startswith(f"FAILED: {len(errors)} problem(s)")
    code, json_errors, summary = verify_json(logdir)
    assert code == 65 and summary["errors"] == len(json_errors) == len(errors)
    assert summary["partitions"] == 2 and summary["ok"] is False


# --- property: no single bit flip in a segment goes unnoticed ---
FLIP_TARGETS = ["v2-none-0", "v1-gzip-0", "v0-none-0", "txn-v2-none-0"]


@pytest.mark.parametrize("name", FLIP_TARGETS)
def test_any_single_bit_flip_in_the_first_segment_is_detected(name, tmp_path_factory):
    """Every byte of an entry is covered by its CRC, or is framing (sizes, magic), or an offset or
    leader epoch that other batches, segments or files contradict once flipped."""
    part = copy_partition(name, tmp_path_factory.mktemp("flip") / name)
    log = part / "00000000000000000000.log"
    original = log.read_bytes()

    @settings(max_examples=25, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(position=st.integers(0, len(original) - 1), bit=st.integers(0, 7))
    def check(position, bit):
        data = bytearray(original)
        data[position] ^= 1 << bit
        log.write_bytes(bytes(data))
        try:
            result = run_kfmt("verify", part, "--no-notes")
            assert result.code == 65, (position, bit, result.out)
        finally:
            log.write_bytes(original)

    check()


# --- object storage ---
def test_an_fsspec_url(tmp_path):
    import fsspec

    fs = fsspec.filesystem("memory")
    root = f"/verify-{tmp_path.name}/logs"
    for f in (REALKAFKA / "txn-v2-none-0").iterdir():
        fs.pipe(f"{root}/txn-v2-none-0/{f.name}", f.read_bytes())
    try:
        assert run_kfmt("verify", f"memory://{root}").code == 0
        first = truth_batches("txn-v2-none-0")["00000000000000000000.log"][0]
        log = f"{root}/txn-v2-none-0/00000000000000000000.log"
        data = bytearray(fs.cat(log))
        data[first["size"] - 1] ^= 0x01
        fs.pipe(log, bytes(data))
        code, errors, _ = verify_json(f"memory://{root}")
        assert code == 65
        assert [(e["check"], e["file"], e["position"], e["offset"]) for e in errors] == \
            [("crc", f"memory://{log}", 0, first["base"])]
    finally:
        fs.rm(root.rsplit("/", 1)[0], recursive=True)


def test_files_disagreeing_with_a_kfmt_manifest(tmp_path):
    """A kfmt output is what its manifest lists: a listed file that is gone is lost data, a file it
    does not list is ignored by readers (a note)."""
    import hashlib

    from kfmt.storage.manifest import MANIFEST, FileRecord, encode_manifest

    out = tmp_path / "out"
    part = copy_partition("txn-v2-none-0", out / "txn-v2-none-0")
    records = [FileRecord(f"{part.name}/{f.name}", f.stat().st_size,
                          hashlib.sha256(f.read_bytes()).hexdigest()) for f in sorted(part.iterdir())]
    (out / MANIFEST).write_bytes(encode_manifest(records, "test-run", 0))
    assert run_kfmt("verify", out).code == 0
    snapshot = sorted(part.glob("*.snapshot"))[-1]
    snapshot.unlink()
    (part / "notes.txt").write_text("not published")
    result = run_kfmt("verify", out, "--format", "json")
    assert result.code == 65
    found = {(p["severity"], p["check"], p["file"]) for p in json.loads(result.out)["problems"]}
    assert ("error", "manifest", str(snapshot)) in found
    assert ("note", "manifest", str(part / "notes.txt")) in found


# --- the command line ---
def test_usage_errors_exit_2(tmp_path):
    assert run_kfmt("verify", tmp_path / "missing").code == 2
    assert run_kfmt("verify", REALKAFKA / "v2-none-0", "--format", "xml").code == 2


def test_a_time_index_whose_one_entry_is_all_zeros_is_an_entry(tmp_path):
    """Records whose timestamps are all 0 give a rolled segment the final time-index entry (timestamp
    0, the base offset): twelve zero bytes, as Kafka writes them on roll (LogSegment.onBecomeInactiveSegment).
    A trimmed file of one slot is that entry, not preallocated zeros (found by the salvage fuzz test)."""
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

    src, dst = tmp_path / "t-0", tmp_path / "reindexed" / "t-0"
    src.mkdir()
    for base in (0, 1):  # two segments of one v1 message each, timestamp 0 (kafka-python writes them)
        builder = LegacyRecordBatchBuilder(magic=1, compression_type=0, batch_size=1 << 20)
        builder.append(base, timestamp=0, key=None, value=b"v")
        (src / f"{base:020d}.log").write_bytes(bytes(builder.build()))
    assert run_kfmt("reindex", src, dst).code == 0
    assert (dst / f"{0:020d}.timeindex").read_bytes() == bytes(12)  # Kafka's entry (0, offset 0)
    code, errors, _ = verify_json(dst)
    assert code == 0 and errors == [], errors
