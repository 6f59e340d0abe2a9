"""kfmt salvage against damaged copies of every corpus partition.

The truth is the corpus's: what a Java consumer read (`records.jsonl.gz`) and where kafka-dump-log
found every entry (`dump-log.batches.txt`). Each test damages a copy at positions taken from Kafka's
own listing and checks that the salvaged directory holds exactly the consumer's records minus those
of the damaged entries, that the report names the damaged byte ranges and the offsets between the
intact entries around them, and that `kfmt verify` passes on the output.
"""
from __future__ import annotations

import json
import os
import shutil
import struct
from pathlib import Path

import pytest
from support.cli import run_kfmt
from support.corpus import REAL_DIRS, REALKAFKA
from support.corpus_truth import consumer_records, kafka_listing
from support.partition_copies import copy_partition

from kfmt.errors import KfmtWarning
from kfmt.format.control import ControlType, control_key, end_txn_marker_value
from kfmt.format.message_formats import ReadOptions
from kfmt.format.model import BatchHeader, make_records
from kfmt.plugin import registry
from kfmt.storage.staging import StagedOutput
from kfmt.storage.store import open_storage
from kfmt.transforms.salvage import SalvageOptions, salvage
from kfmt.write.writer import PartitionWriter

# --- what the output holds, and what it should ---

def salvaged_records(dst: Path) -> list[dict]:
    result = run_kfmt("cat", dst, "--format", "json")
    assert result.code == 0, result.err
    return [json.loads(line) for line in result.lines]


def assert_verifies(dst: Path) -> None:
    result = run_kfmt("verify", dst, "--no-notes")
    assert result.code == 0, result.out


def partition_report(report: dict, index: int = 0) -> dict:
    return report["salvage"]["partitions"][index]


def records_of_entries(name: str, entries) -> set[int]:
    """The offsets of the consumer's records held by listed entries: those after the previous
    entry's last offset, up to the entry's own (a legacy wrapper's listing shows only its last)."""
    listing = kafka_listing(name)
    offsets = [r["offset"] for r in consumer_records(name)]
    lost = set()
    for entry in entries:
        i = listing.index(entry)
        previous = listing[i - 1].last_offset if i else -1
        lost |= {o for o in offsets if previous < o <= entry.last_offset}
    return lost


def first_offset(name: str, entry) -> int:
    """An entry's first offset: a v2 batch's base offset; a legacy wrapper's first inner offset."""
    if entry.magic >= 2:
        return entry.offset
    listing = kafka_listing(name)
    i = listing.index(entry)
    previous = listing[i - 1].last_offset if i else -1
    return min(r["offset"] for r in consumer_records(name) if previous < r["offset"])


def expected_room(name: str, entry) -> list[dict]:
    """The offsets between the intact entries around `entry` in its file: what salvage must report
    for it (the segment's base, or the next segment's base, where it has no neighbour)."""
    listing = kafka_listing(name)
    i = listing.index(entry)
    same_file = [e for e in listing if e.file == entry.file]
    j = same_file.index(entry)
    first = same_file[j - 1].last_offset + 1 if j else int(entry.file[:20])
    if j + 1 < len(same_file):
        last = first_offset(name, same_file[j + 1]) - 1
    elif i + 1 < len(listing):
        last = int(listing[i + 1].file[:20]) - 1
    else:
        last = None
    return [{"first": first, "last": last}]


def check_salvage(src: Path, dst: Path, name: str, lost: set[int], **kwargs) -> dict:
    """Salvage src into dst; the output must be the truth minus `lost`, verify clean, and the report's
    affected offsets must cover every lost record and no salvaged one."""
    _plan, report = salvage(str(src), str(dst), **kwargs)
    truth = list(consumer_records(name))
    got = salvaged_records(dst)
    assert got == [r for r in truth if r["offset"] not in lost]
    affected = partition_report(report)["affected_offsets"]

    def inside(offset):
        return any(a["first"] <= offset and (a["last"] is None or offset <= a["last"]) for a in affected)
    assert all(inside(o) for o in lost)
    assert not any(inside(r["offset"]) for r in got)
    assert_verifies(dst)
    return report


def damage(part: Path, file: str, edit) -> None:
    path = part / file
    data = bytearray(path.read_bytes())
    edit(data)
    path.write_bytes(bytes(data))


def middle_entry(name: str):
    listing = kafka_listing(name)
    return listing[len(listing) // 2]


# --- every corpus partition ---

@pytest.mark.parametrize("name", REAL_DIRS)
def test_an_undamaged_partition_comes_back_whole_and_byte_for_byte(tmp_path, name):
    src = REALKAFKA / name
    report = check_salvage(src, tmp_path / "out", name, set())
    assert partition_report(report)["dropped"] == []
    assert report["totals"]["content_unchanged"]
    for log in src.glob("*.log"):  # intact entries are copied as they are, segments keep their bases
        assert (tmp_path / "out" / log.name).read_bytes() == log.read_bytes()


@pytest.mark.parametrize("name", REAL_DIRS)
@pytest.mark.parametrize("how", ["crc", "size"])
def test_a_damaged_entry_costs_exactly_its_records(tmp_path, name, how):
    """crc: a flipped bit in the entry's payload (its CRC fails); size: its size field says it runs
    past the end of the file, so the scan must resynchronise on the next entry."""
    src = copy_partition(name, tmp_path)
    entry = middle_entry(name)

    def edit(data):
        if how == "crc":
            data[entry.position + entry.size - 3] ^= 0x10
        else:
            struct.pack_into(">i", data, entry.position + 8, 0x7FFFFFF0)
    damage(src, entry.file, edit)
    report = check_salvage(src, tmp_path / "out", name, records_of_entries(name, [entry]))
    [dropped] = partition_report(report)["dropped"]
    assert (dropped["file"], dropped["start"], dropped["end"]) == (
        str(src / entry.file), entry.position, entry.position + entry.size)
    last_in_file = entry == [e for e in kafka_listing(name) if e.file == entry.file][-1]
    # a size running past the end of the file is what a cut-off entry looks like
    assert dropped["kind"] == ("truncated" if how == "size" and last_in_file else "corrupt")
    assert dropped["offsets"] == expected_room(name, entry)


# --- kinds of damage ---

@pytest.mark.parametrize("clean_shutdown", [True, False])
def test_a_copy_cut_short_loses_the_tail_and_says_so(tmp_path, clean_shutdown):
    """The snapshot a clean shutdown writes at the log end offset bounds what the tail held; without
    it (a broker that crashed) the offsets affected run to the end of the log."""
    name = "v2-zstd-0"
    src = copy_partition(name, tmp_path)
    listing = kafka_listing(name)
    last = listing[-1]
    damage(src, last.file, lambda data: data.__delitem__(slice(last.position + last.size // 2, None)))
    if not clean_shutdown:
        max(src.glob("*.snapshot")).unlink()
    report = check_salvage(src, tmp_path / "out", name, records_of_entries(name, [last]))
    [dropped] = partition_report(report)["dropped"]
    assert dropped["kind"] == "truncated"
    assert (dropped["start"], dropped["end"]) == (last.position, last.position + last.size // 2)
    assert dropped["offsets"] == [{"first": listing[-2].last_offset + 1,
                                   "last": last.last_offset if clean_shutdown else None}]


@pytest.mark.parametrize("name", ["v1-none-0", "v2-gzip-0"])
def test_entries_cut_out_at_their_boundaries_are_reported_missing(tmp_path, name):
    """No damaged byte is left when a copy loses whole entries (a segment's tail, or entries in the
    middle): the offsets that no byte holds are reported, in a log that shows no compaction."""
    src = copy_partition(name, tmp_path)
    listing = kafka_listing(name)
    files = sorted({e.file for e in listing})
    middle = [e for e in listing if e.file == files[len(files) // 2]]
    cut, gone = middle[1], middle[1:3]  # two entries cut out of the middle of a segment
    tail = [e for e in listing if e.file == files[1]][-2:]  # the last two entries of another one
    cut_out = slice(cut.position, gone[-1].position + gone[-1].size)
    damage(src, cut.file, lambda data: data.__delitem__(cut_out))
    damage(src, tail[0].file, lambda data: data.__delitem__(slice(tail[0].position, None)))
    report = check_salvage(src, tmp_path / "out", name, records_of_entries(name, gone + tail))
    dropped = partition_report(report)["dropped"]
    assert [(d["kind"], d["bytes"]) for d in dropped] == [("missing", 0), ("missing", 0)]
    expected = sorted([(first_offset(name, tail[0]), int(files[2][:20]) - 1),
                       (first_offset(name, gone[0]), gone[-1].last_offset)])
    assert sorted((d["offsets"][0]["first"], d["offsets"][0]["last"]) for d in dropped) == expected


def test_a_zeroed_block_across_two_entries_is_one_dropped_range(tmp_path):
    name = "v1-gzip-0"
    src = copy_partition(name, tmp_path)
    listing = kafka_listing(name)
    a = next(e for i, e in enumerate(listing[1:], 1) if listing[i + 1].file == e.file)
    b = listing[listing.index(a) + 1]

    def zero(data):
        start, stop = a.position + a.size - 40, b.position + 30
        data[start:stop] = bytes(stop - start)
    damage(src, a.file, zero)
    report = check_salvage(src, tmp_path / "out", name, records_of_entries(name, [a, b]))
    [dropped] = partition_report(report)["dropped"]
    assert (dropped["start"], dropped["end"]) == (a.position, b.position + b.size)


def test_garbage_between_entries_costs_no_offsets(tmp_path):
    name = "v0-snappy-0"
    src = copy_partition(name, tmp_path)
    entry = middle_entry(name)
    garbage = bytes(range(7, 7 + 200))
    damage(src, entry.file, lambda data: data.__setitem__(slice(entry.position, entry.position), garbage))
    report = check_salvage(src, tmp_path / "out", name, set())
    [dropped] = partition_report(report)["dropped"]
    assert (dropped["start"], dropped["end"], dropped["offsets"]) == (entry.position, entry.position + 200, [])


def test_a_repeated_region_is_kept_once(tmp_path):
    name = "v2-none-0"
    src = copy_partition(name, tmp_path)
    entry = middle_entry(name)

    def repeat(data):
        region = bytes(data[entry.position:entry.position + entry.size])
        data[entry.position + entry.size:entry.position + entry.size] = region
    damage(src, entry.file, repeat)
    report = check_salvage(src, tmp_path / "out", name, set())
    [dropped] = partition_report(report)["dropped"]
    assert dropped["kind"] == "duplicate" and dropped["offsets"] == []
    assert dropped["start"] == entry.position + entry.size


def test_swapped_entries_are_put_back_in_offset_order(tmp_path):
    name = "v2-lz4-0"
    src = copy_partition(name, tmp_path)
    listing = kafka_listing(name)
    a = next(e for i, e in enumerate(listing) if listing[i + 1].file == e.file)
    b = listing[listing.index(a) + 1]

    def swap(data):
        first, second = bytes(data[a.position:b.position]), bytes(data[b.position:b.position + b.size])
        data[a.position:b.position + b.size] = second + first
    damage(src, a.file, swap)
    report = check_salvage(src, tmp_path / "out", name, set())
    part = partition_report(report)
    assert part["dropped"] == [] and len(part["moved"]) == 1


@pytest.mark.parametrize("name,shift", [("v0-none-0", 1), ("v2-none-0", 3), ("v1-none-0", -1)])
def test_a_damaged_offset_field_never_puts_records_at_wrong_offsets(tmp_path, name, shift):
    """Offsets are outside the CRC: an entry whose offset field was changed is still intact by its
    CRC, but the entries around it show where it belongs; it is dropped and its room reported."""
    src = copy_partition(name, tmp_path)
    listing = kafka_listing(name)
    bases = sorted({int(e.file[:20]) for e in listing})

    def fits(i, e):  # neighbours in its file on both sides, and the shifted offsets stay in the segment
        following = [b for b in bases if b > int(e.file[:20])]
        return (listing[i - 1].file == e.file == listing[i + 1].file
                and int(e.file[:20]) <= first_offset(name, e) + shift
                and (not following or e.last_offset + shift < following[0]))
    entry = next(e for i, e in enumerate(listing) if i >= len(listing) // 2 and fits(i, e))
    damage(src, entry.file, lambda data: struct.pack_into(">q", data, entry.position, entry.offset + shift))
    report = check_salvage(src, tmp_path / "out", name, records_of_entries(name, [entry]))
    [dropped] = partition_report(report)["dropped"]
    assert dropped["kind"] == "misplaced" and dropped["start"] == entry.position
    assert dropped["offsets"] == expected_room(name, entry)


@pytest.mark.parametrize("name", ["v0-none-0", "v1-none-0", "v2-gzip-0"])
def test_a_damaged_offset_field_between_damaged_entries_is_caught_by_the_density(tmp_path, name):
    """Found by the long fuzz run (seed 20261122, case 28272): an intact entry whose offset field was
    raised, after a damaged entry whose frame is intact and before one whose frame is not. Nothing on
    its right vouches for it, but every other entry of the segment follows the one before it, so it
    opens a gap where none can be: it is dropped and reported, never written at the wrong offsets."""
    src = copy_partition(name, tmp_path)
    listing = kafka_listing(name)
    i = next(i for i in range(1, len(listing) - 4)
             if len({e.file for e in listing[i - 1:i + 5]}) == 1)
    a, b, c = listing[i:i + 3]

    def edit(data):
        data[a.position + a.size - 1] ^= 0xFF  # a payload byte: CRC broken, frame intact
        struct.pack_into(">q", data, b.position, b.offset + 1)  # the offset field, outside the CRC
        struct.pack_into(">i", data, c.position + 8, c.size - 12 + 7)  # c's frame leads nowhere
    damage(src, a.file, edit)
    report = check_salvage(src, tmp_path / "out", name, records_of_entries(name, [a, b, c]))
    kinds = {d["start"]: d["kind"] for d in partition_report(report)["dropped"]}
    assert kinds[b.position] == "misplaced" and kinds[a.position] == "corrupt"


def test_a_segment_that_cannot_be_read_loses_exactly_its_offsets(tmp_path):
    """A segment replaced by a link leading nowhere is skipped by the listing (with a warning), so the
    log has a hole: the offsets between the segments around it are reported missing. (A segment that
    is listed but cannot be read is dropped as unreadable: tests/bad_input/test_hostile_inputs.py.)"""
    name = "v1-snappy-0"
    src = copy_partition(name, tmp_path)
    logs = sorted(p.name for p in src.glob("*.log"))
    victim, following = logs[3], logs[4]
    (src / victim).unlink()
    (src / victim).symlink_to(tmp_path / "gone.log")
    first, last = int(victim[:20]), int(following[:20]) - 1
    lost = {r["offset"] for r in consumer_records(name) if first <= r["offset"] <= last}
    with pytest.warns(KfmtWarning, match="a symbolic link leading out of its directory"):
        report = check_salvage(src, tmp_path / "out", name, lost)
    [dropped] = partition_report(report)["dropped"]
    assert dropped["kind"] == "missing" and dropped["offsets"] == [{"first": first, "last": last}]


def test_a_batch_above_the_decompression_limit_is_dropped_naming_the_limit(tmp_path):
    name = "v2-gzip-0"
    listing = kafka_listing(name)
    limit = 3000
    # the batches whose records decompress to more than the limit: found by decoding with kfmt's
    # default limit (the consumer's truth says what they hold)
    _plan, report = salvage(str(REALKAFKA / name), str(tmp_path / "out"),
                            options=SalvageOptions(read=ReadOptions(max_decompressed=limit)))
    part = partition_report(report)
    assert part["dropped"], "the corpus has batches above 3000 bytes decompressed"
    assert all("more than 3000 bytes" in d["reason"] for d in part["dropped"])
    dropped = [e for e in listing if any(d["start"] <= e.position < d["end"] and d["file"].endswith(e.file)
                                        for d in part["dropped"])]
    assert all(any(d["start"] == e.position for e in dropped) for d in part["dropped"])
    lost = records_of_entries(name, dropped)
    assert [r["offset"] for r in salvaged_records(tmp_path / "out")] == [
        r["offset"] for r in consumer_records(name) if r["offset"] not in lost]
    assert_verifies(tmp_path / "out")


def test_a_damaged_partition_metadata_is_not_carried_over(tmp_path):
    name = "v2-snappy-0"
    src = copy_partition(name, tmp_path)
    (src / "partition.metadata").write_text("version: 0\ntopic_id: not-a-uuid")
    report = check_salvage(src, tmp_path / "out", name, set())
    assert not (tmp_path / "out" / "partition.metadata").exists()
    assert any("partition.metadata not carried over" in n for n in report["notes"])


def test_a_lost_marker_never_leaves_a_log_a_broker_refuses(tmp_path):
    """Producer 7 writes a transaction, its COMMIT marker is damaged, then it writes a
    non-transactional batch: replaying that fails in Kafka (InvalidTxnStateException), so salvage
    drops that batch and says why; the transaction's data stays (its marker is gone)."""
    src = tmp_path / "t-0"
    v2 = registry.get().format_for(2)

    def batch(base, n, *, transactional=False, control=None):
        keys = [control_key(control)] if control is not None else [b"k%d" % i for i in range(n)]
        values = [end_txn_marker_value(3)] if control is not None else [b"v%d" % i for i in range(n)]
        header = BatchHeader(magic=2, base_offset=base, last_offset=base + n - 1, max_timestamp=1000 + base,
                             base_timestamp=1000 + base, producer_id=7, producer_epoch=0,
                             base_sequence=-1 if control is not None else base, records_count=n,
                             is_transactional=transactional or control is not None,
                             is_control=control is not None, partition_leader_epoch=0)
        records = make_records(list(range(base, base + n)), [1000 + base] * n, keys, values)
        return header, v2.encode(header, records)

    entries = [batch(0, 3, transactional=True), batch(3, 1, control=ControlType.COMMIT), batch(4, 2)]
    storage, path = open_storage(str(src))
    with StagedOutput(storage, path) as out, PartitionWriter(out, "", start_offset=0) as writer:
        for header, entry in entries:
            writer.append(v2.read_header(memoryview(entry), 0), entry)
    marker_position = len(entries[0][1])
    damage(src, "00000000000000000000.log", lambda data: data.__setitem__(
        marker_position + len(entries[1][1]) - 1, data[marker_position + len(entries[1][1]) - 1] ^ 1))
    _plan, report = salvage(str(src), str(tmp_path / "out"))
    kinds = [(d["kind"], d["offsets"]) for d in partition_report(report)["dropped"]]
    assert kinds == [("corrupt", [{"first": 3, "last": 3}]),
                     ("txn-state", [{"first": 4, "last": 5}])]
    assert [r["offset"] for r in salvaged_records(tmp_path / "out")] == [0, 1, 2]
    assert_verifies(tmp_path / "out")


# --- log directories, dry runs, the command ---

def make_log_dir(tmp_path: Path, names: list[str]) -> Path:
    logs = tmp_path / "logs"
    logs.mkdir()
    for name in names:
        copy_partition(name, logs)
    for f in (REALKAFKA / "_logdir-root").iterdir():
        shutil.copyfile(f, logs / f.name)
    return logs


def test_a_log_directory_keeps_checkpoints_within_the_salvaged_logs(tmp_path):
    logs = make_log_dir(tmp_path, ["v2-none-0", "v1-lz4-0"])
    last = kafka_listing("v2-none-0")[-1]
    damage(logs / "v2-none-0", last.file, lambda data: data.__delitem__(slice(last.position + 20, None)))
    (logs / "replication-offset-checkpoint").write_text("0\n2\nv2-none 0 500\nv1-lz4 0 400\n")
    _plan, report = salvage(str(logs), str(tmp_path / "out"))
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["v1-lz4-0", "v2-none-0"]
    new_end = kafka_listing("v2-none-0")[-2].last_offset + 1
    assert (out / "replication-offset-checkpoint").read_text() == f"0\n2\nv1-lz4 0 400\nv2-none 0 {new_end}\n"
    assert (out / "meta.properties").read_bytes() == (REALKAFKA / "_logdir-root" / "meta.properties").read_bytes()
    assert_verifies(out)
    assert [p["name"] for p in report["salvage"]["partitions"]] == ["v1-lz4-0", "v2-none-0"]


def test_an_unreadable_checkpoint_is_left_out_not_fatal(tmp_path):
    logs = make_log_dir(tmp_path, ["v0-gzip-0"])
    (logs / "recovery-point-offset-checkpoint").write_bytes(b"\xff\xfe garbage")
    _plan, report = salvage(str(logs), str(tmp_path / "out"))
    assert not (tmp_path / "out" / "recovery-point-offset-checkpoint").exists()
    assert any("recovery-point-offset-checkpoint not used" in n for n in report["notes"])
    assert_verifies(tmp_path / "out")


def test_a_dry_run_writes_nothing_and_reports_the_same(tmp_path):
    name = "v2-lz4-0"
    src = copy_partition(name, tmp_path)
    entry = middle_entry(name)
    damage(src, entry.file, lambda data: data.__setitem__(entry.position + 40, data[entry.position + 40] ^ 4))
    _plan, dry = salvage(str(src), str(tmp_path / "out"), dry_run=True)
    assert not (tmp_path / "out").exists()
    _plan, real = salvage(str(src), str(tmp_path / "out"))
    for key in ("dropped", "affected_offsets", "kept", "moved"):
        assert partition_report(dry)[key] == partition_report(real)[key]
    assert partition_report(dry)["dropped"]


def test_the_command_prints_each_dropped_range_and_refuses_a_second_run(tmp_path):
    name = "v1-none-0"
    src = copy_partition(name, tmp_path)
    entry = middle_entry(name)
    damage(src, entry.file, lambda data: data.__setitem__(entry.position + 30, data[entry.position + 30] ^ 1))
    dst = tmp_path / "out"
    result = run_kfmt("salvage", src, dst)
    assert result.code == 0, result.err
    assert result.lines[0].startswith(f"{name}: kept ")
    assert result.lines[1].startswith(f"  dropped {src / entry.file} [{entry.position}, "
                                      f"{entry.position + entry.size}) {entry.size} bytes, corrupt: ")
    assert result.lines[1].endswith(f"offsets affected: {entry.offset}..{entry.offset}")
    report = json.loads((dst / "kfmt-report.json").read_text())
    assert report["command"] == "salvage"
    again = run_kfmt("salvage", src, dst)
    assert again.code == 2 and again.err == f"kfmt: error: {dst}: the destination exists and is not empty\n"
    as_json = run_kfmt("salvage", src, tmp_path / "again", "--format", "json")
    assert json.loads(as_json.out)["salvage"] == report["salvage"] | {
        "partitions": [p | {"destination": str(tmp_path / "again")} for p in report["salvage"]["partitions"]]}
    assert os.listdir(src) == os.listdir(REALKAFKA / name)  # the source is only read


@pytest.mark.parametrize("where", ["first", "middle", "last"])
@pytest.mark.parametrize("epoch", [-1, 7, 1 << 30])
def test_a_damaged_leader_epoch_is_caught_by_the_epochs_around_it(tmp_path, where, epoch):
    """The partition leader epoch is outside the CRC; the corpus's epochs are all 0. A batch claiming
    another epoch is dropped (its records reported); at the ends of the log the source's
    leader-epoch-checkpoint ("0 0") says which epoch its offsets belong to."""
    name = "v2-lz4-0"
    src = copy_partition(name, tmp_path)
    listing = kafka_listing(name)
    entry = {"first": listing[0], "middle": middle_entry(name), "last": listing[-1]}[where]
    damage(src, entry.file, lambda data: struct.pack_into(">i", data, entry.position + 12, epoch))
    report = check_salvage(src, tmp_path / "out", name, records_of_entries(name, [entry]))
    [dropped] = partition_report(report)["dropped"]
    assert (dropped["kind"], dropped["start"]) == ("epoch", entry.position)
    assert dropped["offsets"] == [{"first": entry.offset, "last": entry.last_offset}]


@pytest.mark.parametrize("clean_shutdown", [True, False])
@pytest.mark.parametrize("name", ["v2-zstd-0", "v1-lz4-0", "v1-none-0"])
def test_the_last_entry_of_the_log_with_a_damaged_offset_field_is_dropped(tmp_path, name, clean_shutdown):
    """No entry follows the last one to contradict its offset field: the clean-shutdown snapshot at
    the log end offset does; without it, in a segment whose other entries follow each other without
    a gap, one that opens a gap cannot be trusted."""
    src = copy_partition(name, tmp_path)
    last = kafka_listing(name)[-1]
    damage(src, last.file, lambda data: struct.pack_into(">q", data, last.position, last.offset + 7323))
    if not clean_shutdown:
        max(src.glob("*.snapshot")).unlink()
    report = check_salvage(src, tmp_path / "out", name, records_of_entries(name, [last]))
    [dropped] = partition_report(report)["dropped"]
    assert (dropped["kind"], dropped["start"]) == ("corrupt" if clean_shutdown else "misplaced", last.position)
    room = {"first": first_offset(name, last), "last": last.last_offset}
    claimed = {"first": first_offset(name, last) + 7323, "last": last.last_offset + 7323}
    # Without the snapshot and without sequence numbers (legacy data) the entries before it may have
    # been cut out instead: what it claims is reported too.
    ambiguous = not clean_shutdown and name.startswith("v1")
    assert dropped["offsets"] == ([room, claimed] if ambiguous else [room])


@pytest.mark.parametrize("name", ["v2-lz4-0", "v2-zstd-0"])
@pytest.mark.parametrize("shift", [-2, 1])
def test_a_damaged_offset_field_between_damaged_entries_is_caught_by_producer_sequences(tmp_path, name, shift):
    """Found by the long fuzz run (cases 1000:44956, 1000:49599): the entries on both sides of a batch
    whose base offset changed are damaged too, so no intact neighbour contradicts it; but its
    producer's batch next to it in the file has the sequence numbers just before (or after) its own,
    and those are inside the CRC. The producers of these topics are idempotent."""
    src = copy_partition(name, tmp_path)
    listing = kafka_listing(name)
    i = next(i for i in range(2, len(listing) - 2) if len({e.file for e in listing[i - 2:i + 3]}) == 1)
    before, entry, after = listing[i - 1], listing[i], listing[i + 1]

    def edit(data):
        for damaged in (before, after):  # a payload byte each: their CRCs fail, their frames stay
            data[damaged.position + damaged.size - 5] ^= 0x20
        struct.pack_into(">q", data, entry.position, entry.offset + shift)
    damage(src, entry.file, edit)
    report = check_salvage(src, tmp_path / "out", name, records_of_entries(name, [before, entry, after]))
    dropped = {d["start"]: d for d in partition_report(report)["dropped"]}
    assert dropped[entry.position]["kind"] == "misplaced"
    assert dropped[entry.position]["offsets"] == [{"first": entry.offset, "last": entry.last_offset}]
    assert dropped[before.position]["kind"] == dropped[after.position]["kind"] == "corrupt"


def test_a_copy_taken_from_a_running_broker(tmp_path):
    """The corpus's copy of v2-zstd-0 taken while the broker ran: preallocated (zero-filled) indexes,
    no snapshot at the log end. Everything is intact: nothing is dropped or reported missing."""
    import tarfile

    with tarfile.open(REALKAFKA / "_running-copies" / "v2-zstd-0.running.tar.gz") as tar:
        tar.extractall(tmp_path / "running", filter="data")
    [src] = [p.parent for p in (tmp_path / "running").rglob("00000000000000000000.log")]
    report = check_salvage(src, tmp_path / "out", "v2-zstd-0", set())
    assert partition_report(report)["dropped"] == []
