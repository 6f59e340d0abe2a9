"""verify's two depths (kfmt.inspect.verify.log): the default checks what a broker's log recovery
checks (framing, the CRC over each entry's stored bytes, offsets), never inflating a compressed
batch; `--deep` inflates and checks every record too.

The rule tested: damage a real broker's segment by one byte anywhere -- every magic and codec,
legacy wrappers, control batches -- and the default depth finds a problem in that segment exactly
when `--deep` does, at the same entry. The one place that rule cannot hold is the part of an
entry its CRC does not cover and only its records can contradict: a v0/v1 wrapper's offset field
(docs/format.md §3.1, §3.4), whose last-inner-offset rule only `--deep` reads (as the wrapper whose
inner message is corrupt under a recomputed CRC, test_verify.py, and the v2 batch below)."""
from __future__ import annotations

import shutil
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.cli import run_kfmt
from support.corpus import REALKAFKA
from support.fuzzing import entries_of
from support.verify_inputs import partition_with

from kfmt.format.wire import crc32c
from kfmt.inspect.verify import verify
from kfmt.storage.store import open_storage

#: one partition per (magic, codec) shape the corpus has, wrappers and control batches included
SHAPES = ["v0-none-0", "v0-gzip-0", "v0-snappy-0", "v0-lz4-0", "v1-none-0", "v1-gzip-0", "v1-snappy-0",
          "v1-lz4-0", "v1-logappendtime-gzip-0", "v2-none-0", "v2-gzip-0", "v2-snappy-0", "v2-lz4-0",
          "v2-zstd-0", "txn-v2-none-0", "compact-v1-gzip-0"]
WRAPPER_OFFSET = range(0, 8)  # a v0/v1 entry's offset field, outside its CRC (docs/format.md §3.1)


def errors_at(path, deep: bool) -> set[tuple[str, int | None]]:
    """(file, position) of every error verify reports at a depth."""
    report = verify(*open_storage(str(path)), deep=deep)
    return {(p.file, p.position) for p in report.errors}


def _flip(tmp_path_factory, name: str, data) -> tuple:
    part = tmp_path_factory.mktemp("depth") / name
    shutil.copytree(REALKAFKA / name, part, copy_function=shutil.copyfile)
    log = data.draw(st.sampled_from(sorted(part.glob("*.log"))), label="segment")
    raw = bytearray(log.read_bytes())
    entries = entries_of(bytes(raw))
    if not entries:
        return part, None, None
    entry = data.draw(st.sampled_from(entries), label="entry")
    # half the draws in an entry's first 70 bytes, where the header fields are
    at = data.draw(st.one_of(st.integers(0, min(entry.size, 70) - 1), st.integers(0, entry.size - 1)),
                   label="byte")
    raw[entry.position + at] ^= data.draw(st.integers(1, 255), label="xor")
    log.write_bytes(bytes(raw))
    return part, entry, at


@pytest.mark.parametrize("name", SHAPES)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_one_flipped_byte_is_found_at_both_depths_or_neither(tmp_path_factory, name, data):
    part, entry, at = _flip(tmp_path_factory, name, data)
    default, deep = errors_at(part, False), errors_at(part, True)
    if entry is not None and entry.magic < 2 and entry.codec and at in WRAPPER_OFFSET:
        assert default <= deep  # only --deep compares a wrapper's offset with its inner messages'
        return
    assert {f for f, _ in default} == {f for f, _ in deep}
    assert default == deep


def test_a_v2_batch_whose_records_break_the_rules_under_a_valid_crc_only_deep_finds(tmp_path):
    """A compressed v2 batch whose records are malformed, its CRC computed over them: log recovery
    accepts it (RecordBatch.ensureValid is the CRC), kafka-dump-log --deep-iteration does not."""
    from kafka.record.default_records import DefaultRecordBatchBuilder  # an independent encoder

    builder = DefaultRecordBatchBuilder(magic=2, compression_type=1, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 20)
    for i in range(3):
        builder.append(i, timestamp=1_700_000_000_000 + i, key=b"k", value=b"v" * 300, headers=[])
    entry = bytearray(builder.build())
    struct.pack_into(">i", entry, 23, 1)  # lastOffsetDelta 1: three records in a batch of two offsets
    struct.pack_into(">I", entry, 17, crc32c(bytes(entry[21:])))
    part = partition_with(tmp_path, bytes(entry))
    shallow = run_kfmt("verify", part, "--format", "json")
    deep = run_kfmt("verify", part, "--format", "json", "--deep")
    assert (shallow.code, deep.code) == (0, 65), (shallow.out, deep.out)
    assert '"depth": "recovery"' in shallow.out and '"record-offsets"' in deep.out


def test_a_time_index_naming_a_wrapper_s_inner_offset_is_judged_alike_at_both_depths(tmp_path):
    """An older broker's time index names the inner offset of a wrapper's greatest timestamp, not the
    wrapper's last offset: the default depth, which does not inflate the wrapper to learn its first
    offset, must not call such an entry one no batch holds."""
    part = tmp_path / "v1-gzip-0"
    shutil.copytree(REALKAFKA / "v1-gzip-0", part, copy_function=shutil.copyfile)
    moved = 0
    for index in part.glob("*.timeindex"):
        data = bytearray(index.read_bytes())
        for at in range(0, len(data) - 11, 12):  # (timestamp int64, relative offset int32)
            relative = struct.unpack_from(">i", data, at + 8)[0]
            if relative > 0:
                struct.pack_into(">i", data, at + 8, relative - 1)  # inside the wrapper (gzip ones hold several)
                moved += 1
        index.write_bytes(bytes(data))
    assert moved
    default, deep = errors_at(part, False), errors_at(part, True)
    assert default == deep
