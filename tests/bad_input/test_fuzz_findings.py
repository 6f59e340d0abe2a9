"""Every finding of the fuzzers (tests/support/fuzzing.py, test_fuzz_corpus.py, test_fuzz_properties.py),
reduced to the smallest input that showed it and kept as a test of its fix. Each test names the
fuzz case that found it and the module the fix went into."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support.cli import run_kfmt
from support.corpus import REALKAFKA


def one_error_line(result, code: int = 65) -> str:
    assert result.code == code, (result.code, result.out, result.err)
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kfmt: error: ") and "Traceback" not in result.err, result.err
    return lines[0]


def log_dir_with(tmp_path: Path, name: str, checkpoint: str, content: bytes) -> Path:
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copytree(REALKAFKA / name, logs / name, copy_function=shutil.copyfile)
    (logs / checkpoint).write_bytes(content)
    return logs


# Found by the commands tier, case 2:19 (v2-zstd-0/recovery-point-offset-checkpoint, invalid UTF-8):
# `kfmt reindex` died with UnicodeDecodeError (exit 1). Kafka reads checkpoints with a UTF-8
# BufferedReader that fails on malformed input: bad data. Fixed in kfmt.partition.checkpoints
# (checkpoint_text, one rule) used by kfmt.transforms.reindex and kfmt.transforms.cleanup.plan (retain, compact).
@pytest.mark.parametrize("command", [["reindex"], ["retain", "--retention-bytes", "1", "--master", "inprocess"],
                                     ["compact", "--master", "inprocess"]])
@pytest.mark.parametrize("checkpoint", ["recovery-point-offset-checkpoint", "log-start-offset-checkpoint"])
def test_a_checkpoint_that_is_not_utf8_is_bad_data_naming_the_byte(tmp_path, command, checkpoint):
    logs = log_dir_with(tmp_path, "v2-none-0", checkpoint, b"0\n1\nv2-none 0 5\xc3\x28\n")
    line = one_error_line(run_kfmt(command[0], logs, tmp_path / "out", *command[1:]))
    assert f"{logs / checkpoint}, position 15: not valid UTF-8" in line
    assert not (tmp_path / "out").exists()


def test_salvage_leaves_a_checkpoint_that_is_not_utf8_out_and_says_so(tmp_path):
    logs = log_dir_with(tmp_path, "v2-none-0", "recovery-point-offset-checkpoint", b"0\n1\n\xff\n")
    result = run_kfmt("salvage", logs, tmp_path / "out")
    assert result.code == 0, result.err
    assert not (tmp_path / "out" / "recovery-point-offset-checkpoint").exists()
    assert "recovery-point-offset-checkpoint not used: not valid UTF-8" in result.out


# Found by the commands tier, case 3:124 (txn-v2-none-0, a batch's baseTimestamp set to
# Long.MIN_VALUE with its CRC fixed): `kfmt info` died with ValueError (year out of range) showing
# the time range. A timestamp is any int64 (Kafka does not check it); beyond what a date can show, the
# number alone is printed. Fixed in kfmt/cli/info.py.
def test_info_shows_timestamps_no_date_can_hold(tmp_path):
    from kfmt.format.model import BatchHeader, make_records
    from kfmt.plugin import registry

    v2 = registry.get().format_for(2)
    part = tmp_path / "t-0"
    part.mkdir()
    entries = b""
    for base, ts in ((0, -(1 << 63)), (1, (1 << 63) - 1)):
        header = BatchHeader(magic=2, base_offset=base, last_offset=base, max_timestamp=ts, base_timestamp=ts)
        entries += v2.encode(header, make_records([base], [ts], [b"k"], [b"v"]))
    (part / "00000000000000000000.log").write_bytes(entries)
    result = run_kfmt("info", part)
    assert result.code == 0, result.err
    assert f"timestamps    {-(1 << 63)} .. {(1 << 63) - 1}" in result.out


# Found by the commands tier, case 6:200 (compact-v1-gzip-0, the offset field of the first entry of
# segment 474 set to 26, outside the CRC): `kfmt recompress` exited 2 (usage error) because the
# writer took a first batch below the start offset for a caller's mistake; transforms take the start
# offset from the source, so it is the source that breaks base offset <= first offset (reference
# §12.1): bad data, exit 65. Fixed in kfmt/write/writer.py.
@pytest.mark.parametrize("command", [["recompress", "--compression", "zstd"], ["upgrade"],
                                     ["resegment", "--segment-bytes", "4096", "--kafka-version", "3.9"]])
def test_an_entry_below_its_segment_base_is_bad_data_for_every_transform(tmp_path, command):
    import struct

    src = tmp_path / "compact-v1-gzip-0"
    src.mkdir()
    for f in (REALKAFKA / "compact-v1-gzip-0").iterdir():
        if not f.name[:20].isdigit() or int(f.name[:20]) >= 474:
            shutil.copyfile(f, src / f.name)
    log = src / "00000000000000000474.log"
    data = bytearray(log.read_bytes())
    struct.pack_into(">q", data, 0, 26)
    log.write_bytes(bytes(data))
    line = one_error_line(run_kfmt(command[0], src, tmp_path / "out", *command[1:], "--master", "inprocess"))
    assert f"{log}, position 0, offset 26: " in line
    assert not (tmp_path / "out").exists()


# Found by the commands tier, case 7:243 (compact-v2-none-twin-0, a batch's producerId set to -7918
# with its CRC fixed): the salvaged (and reindexed) directory's producer snapshot listed producer
# -7918, which kfmt verify rejects. Kafka gives producer state only to a batch with
# NO_PRODUCER_ID < producerId (AbstractRecordBatch.hasProducerId): a negative id is no producer.
# Fixed in kfmt/format/model.py (BatchHeader.has_producer_id), kfmt/partition/companions.py (its array path) and
# kfmt/inspect/verify/txn.py.
@pytest.mark.parametrize("command", ["reindex", "salvage"])
def test_a_negative_producer_id_is_no_producer(tmp_path, command):
    from kfmt.format.model import BatchHeader, make_records
    from kfmt.plugin import registry

    v2 = registry.get().format_for(2)
    part = tmp_path / "p-0"
    part.mkdir()
    entries = b""
    for base, pid in ((0, 5), (1, -7918), (2, 5)):
        header = BatchHeader(magic=2, base_offset=base, last_offset=base, max_timestamp=1000, base_timestamp=1000,
                             producer_id=pid, producer_epoch=0 if pid >= 0 else -1, base_sequence=base if pid >= 0 else -1,
                             partition_leader_epoch=0)
        entries += v2.encode(header, make_records([base], [1000], [b"k"], [b"v"]))
    (part / "00000000000000000000.log").write_bytes(entries)
    assert run_kfmt(command, part, tmp_path / "out", "--now", "2000").code == 0
    assert run_kfmt("verify", tmp_path / "out", "--deep").code == 0
    from kfmt.partition.snapshots import read_snapshot

    [snapshot] = (tmp_path / "out").glob("*.snapshot")
    assert [e.producer_id for e in read_snapshot(snapshot.read_bytes())] == [5]


# Found by the commands tier, case 11:502 (compact-v2-none-0, the first time-index entry's timestamp
# made negative): `kfmt verify` died with StopIteration. Its running maximum of the batches' timestamps
# starts at -1 for "no batch", so an entry at -1 or below looked as if an earlier batch had reached it.
# Fixed in kfmt/inspect/verify/indexes.py: the entry is reported for what it is (no batch holds that maximum).
def test_verify_a_time_index_entry_with_a_negative_timestamp(tmp_path):
    import struct

    part = tmp_path / "v2-none-0"
    shutil.copytree(REALKAFKA / "v2-none-0", part, copy_function=shutil.copyfile)
    index = part / "00000000000000000041.timeindex"
    data = bytearray(index.read_bytes())
    struct.pack_into(">q", data, 0, -5)
    index.write_bytes(bytes(data))
    result = run_kfmt("verify", part)
    assert result.code == 65 and not result.err, result.err
    assert f"error [time-index-entry] {index}, position 0, offset " in result.out


# Found reading kfmt/format/v2_records.py for the fuzzers' memory ceiling, confirmed by measuring:
# the pure-Python record decoder allocated its five columns for the declared record count before
# parsing any record, so a 2 KiB zstd batch whose records decompress to 64 MiB of zeros (inside the
# decompression limit) and declare 9.6 million records took 360 MiB before failing on record 0 (about
# 6 GiB under the default 1 GiB limit). Fixed in kfmt/format/v2_records.py: the columns grow with
# the records parsed. The compiled path never did this; both are measured.
DECOMPRESSED = 64 << 20
MEASURE = textwrap.dedent(f"""
    import resource, struct, crc32c, zstandard
    from kfmt.plugin import registry
    from kfmt.errors import DataError
    from kfmt.format.message_formats import ReadOptions
    from kfmt.format.model import BatchHeader, make_records
    v2 = registry.get().format_for(2)
    header = BatchHeader(magic=2, base_offset=0, last_offset=0, compression=4, max_timestamp=0, base_timestamp=0)
    entry = bytearray(v2.encode(header, make_records([0], [0], [b"k"], [b"v"]))[:61])
    entry += zstandard.ZstdCompressor(level=19, write_content_size=False).compress(bytes({DECOMPRESSED}))
    struct.pack_into(">i", entry, 8, len(entry) - 12)
    struct.pack_into(">i", entry, 57, {DECOMPRESSED} // 7)  # as many records as the bytes could hold
    struct.pack_into(">I", entry, 17, crc32c.crc32c(bytes(entry[21:])))
    entry = memoryview(bytes(entry))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        v2.decode(entry, v2.read_header(entry, 0), ReadOptions(max_decompressed=1 << 30))
    except DataError:
        pass
    print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024)
""")


@pytest.mark.parametrize("path", ["pure", pytest.param("native", marks=pytest.mark.needs("speedups-built"))])
def test_a_declared_record_count_allocates_nothing_before_the_records_are_read(path):
    env = dict(os.environ, KFMT_PURE_PYTHON="1" if path == "pure" else "0")
    grown = int(subprocess.run([sys.executable, "-c", MEASURE], capture_output=True, text=True, env=env,
                               check=True, timeout=300).stdout)
    assert grown < 2 * DECOMPRESSED, f"{grown >> 20} MiB for {DECOMPRESSED >> 20} MiB decompressed"


# Found by the long run (commands tier, seed 2000, case 1140: compact-v1-gzip-0's 00000000000000000377.index
# replaced by random bytes): `kfmt verify` died with IndexError. An entry with a negative position
# went to the branch describing the batch it points inside, which an empty segment (compaction leaves
# them) does not have. Fixed in kfmt/inspect/verify/indexes.py: a negative position is reported as such.
@pytest.mark.parametrize("segment", ["00000000000000000377", "00000000000000000000"])  # empty, not empty
def test_verify_an_index_entry_with_a_negative_position(tmp_path, segment):
    import struct

    part = tmp_path / "compact-v1-gzip-0"
    shutil.copytree(REALKAFKA / "compact-v1-gzip-0", part, copy_function=shutil.copyfile)
    index = part / f"{segment}.index"
    index.write_bytes(struct.pack(">ii", 3, -70))
    result = run_kfmt("verify", part)
    assert result.code == 65 and not result.err, result.err
    assert (f"error [offset-index-entry] {index}, position 0, offset {int(segment) + 3}: entry (offset "
            f"{int(segment) + 3}, position -70) names a negative position") in result.out
