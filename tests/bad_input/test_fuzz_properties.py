"""Every reader against whatever bytes hypothesis makes (seeded: derandomize, no example database).

The only outcomes allowed: correct data, or a kfmt DataError (exit 65 at the command line) - never
another exception, a hang (pytest-timeout per test, hypothesis deadlines per example) or memory
growing without bound (the module runs under an address-space ceiling a little above what the test
process already holds, with a small decompression limit). The inputs: arbitrary bytes and text for
each file reader, and valid batches and segments (the round-trip strategies) damaged by a mutation
hypothesis chooses: then entries the mutation did not touch must still decode to what was written,
and `salvage` must keep every intact entry, invent nothing and lose nothing without saying so.

tests/bad_input/test_fuzz_corpus.py does the same with mutations of real broker-written files, in workers,
on both decode paths; tests/bad_input/test_fuzz_findings.py keeps every finding as a test.
"""
from __future__ import annotations

import resource
import struct
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.fuzzing import entries_of, fix_crc
from support.record_strategies import encode, segments

from kfmt.errors import DataError
from kfmt.format import segment
from kfmt.format.message_formats import ReadOptions
from kfmt.inspect.verify import verify
from kfmt.partition import checkpoints, indexes, snapshots, txnindex
from kfmt.partition.layout import find_partitions, segment_file_name
from kfmt.partition.reader import PartitionReader
from kfmt.plugin import registry
from kfmt.storage.manifest import Manifest
from kfmt.storage.store import open_storage
from kfmt.transforms.salvage import SalvageOptions, salvage

LIMIT = 1 << 20  # the decompression limit of these tests
STRICT_CAPPED = ReadOptions(max_decompressed=LIMIT)
LENIENT_CAPPED = ReadOptions(check_crc=False, max_decompressed=LIMIT)
HEADROOM = 1 << 30


def fuzz_settings(examples: int):
    return settings(max_examples=examples, deadline=5000, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])


@pytest.fixture(autouse=True, scope="module")
def memory_ceiling():
    """An address-space ceiling HEADROOM above what the process holds: an input that makes a reader
    allocate without bound fails with MemoryError, which no test below allows. Arrow's allocator
    reserves about 1 GB of address space on its first allocation (the library's, not an input's),
    and kfmt makes none until it first holds record columns: made before the ceiling."""
    import pyarrow

    pyarrow.allocate_buffer(1)
    with open("/proc/self/status") as f:
        vm = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
    before = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (vm + HEADROOM, before[1]))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, before)


def data_or_error(fn, *args, **kwargs):
    """The reader's result, or None for a DataError: any other exception fails the test."""
    try:
        return fn(*args, **kwargs)
    except DataError:
        return None


pytestmark = pytest.mark.timeout(300)


# --- file readers on any bytes ---

@fuzz_settings(300)
@given(data=st.binary(max_size=700), base=st.integers(0, 2**62))
def test_index_readers_take_any_bytes(data, base):
    for entry in indexes.read_offset_index(data, base):
        assert entry.offset >= base - 2**31
    indexes.lookup_offset(indexes.read_offset_index(data, base), base + 5, base)
    indexes.lookup_time(indexes.read_time_index(data, base), 1700000000000, base)
    txnindex.read_txn_index(data)


@fuzz_settings(300)
@given(data=st.binary(max_size=400), fix=st.booleans())
def test_snapshot_reader_takes_any_bytes(data, fix):
    if fix and len(data) >= 6:  # a valid CRC: the structure checks are reached
        import crc32c

        data = data[:2] + struct.pack(">I", crc32c.crc32c(data[6:])) + data[6:]
    entries = data_or_error(snapshots.read_snapshot, data, "x.snapshot")
    if entries is not None:
        assert len(data) == 10 + 32 * len(entries)


@fuzz_settings(400)
@given(raw=st.binary(max_size=200) | st.text(max_size=120).map(str.encode)
       | st.lists(st.sampled_from(["0", "1", "2", "-1", "t 0 5", "0 0", "x", "", " ", "9" * 20, "\r",
                                   "version: 0", "topic_id: AAAAAAAAAAAAAAAAAAAAAA", "topic_id: x"]),
                  max_size=6).map(lambda lines: "\n".join(lines).encode()))
def test_checkpoint_readers_take_any_text(raw):
    text = data_or_error(checkpoints.checkpoint_text, raw, "x")
    if text is None:
        return
    data_or_error(checkpoints.read_leader_epochs, text, "leader-epoch-checkpoint")
    data_or_error(checkpoints.read_offset_checkpoint, text, "recovery-point-offset-checkpoint")
    data_or_error(checkpoints.read_partition_metadata, text, "partition.metadata")
    data_or_error(Manifest.parse, raw, "/x", "_kfmt_manifest.json")


CODECS = [(c.name, m) for c in registry.get().compressions.values() for m in sorted(c.magics)]


@pytest.mark.parametrize("name,magic", CODECS)
def test_codecs_take_any_bytes_and_damaged_payloads(name, magic):
    codec = registry.get().compression_named(name)

    @fuzz_settings(150)
    @given(data=st.data())
    def check(data):
        if data.draw(st.booleans()):
            payload = data.draw(st.binary(max_size=3000))
        else:  # a valid payload, damaged
            plain = data.draw(st.binary(max_size=5000) | st.just(bytes(200_000)))
            payload = bytearray(codec.compress(plain, magic=magic))
            for _ in range(data.draw(st.integers(0, 3)) if payload else 0):
                at = data.draw(st.integers(0, len(payload) - 1))
                payload[at] = data.draw(st.integers(0, 255))
            payload = bytes(payload[:data.draw(st.integers(0, len(payload)))])
        out = data_or_error(codec.decompress, payload, magic=magic, max_size=LIMIT)
        assert out is None or len(out) <= LIMIT
    check()


@fuzz_settings(300)
@given(payload=st.binary(max_size=600), count=st.integers(-5, 1 << 31), base=st.integers(0, 2**63 - 1),
       ts=st.integers(-(2**63), 2**63 - 1))
def test_v2_records_take_any_bytes(payload, count, base, ts):
    from kfmt.format.v2_records import decode_records

    records = data_or_error(decode_records, payload, count, base, ts, None)
    assert records is None or records.num_rows == count


# --- damaged segments ---

MUTATIONS = ["flip", "byte", "truncate", "repeat", "delete", "insert", "swap", "field+crc"]


@st.composite
def damaged(draw, original: bytes):
    """(damaged bytes, mutation, whether it forged a valid entry) of a segment's bytes."""
    data = bytearray(original)
    kind = draw(st.sampled_from(MUTATIONS))
    n = len(data)
    a = draw(st.integers(0, n - 1))
    length = draw(st.integers(1, max(1, min(n - a, 300))))
    if kind == "flip":
        data[a] ^= 1 << draw(st.integers(0, 7))
    elif kind == "byte":
        data[a] = draw(st.sampled_from([0, 0xFF, 0x80, 0x7F, 1]))
    elif kind == "truncate":
        del data[a:]
    elif kind == "repeat":
        data[a + length:a + length] = data[a:a + length]
    elif kind == "delete":
        del data[a:a + length]
    elif kind == "insert":
        data[a:a] = draw(st.binary(min_size=1, max_size=80))
    elif kind == "swap":
        b = draw(st.integers(a, n - 1))
        length = min(length, b - a, n - b)
        data[a:a + length], data[b:b + length] = data[b:b + length], data[a:a + length]
    else:  # an int32 of some entry's header set, its CRC fixed: a valid entry saying something else
        entry = draw(st.sampled_from(entries_of(bytes(data))))
        at = draw(st.integers(8, min(57, entry.size - 4)))  # inside the entry: a v0 message can be 26 bytes
        struct.pack_into(">i", data, entry.position + at, draw(st.sampled_from([0, -1, 1, 2**31 - 1, -2**31, 3])))
        fix_crc(data, entry.position)
    # an entry's offset (a v0/v1 message's, a v2 batch's base offset) lies outside what its CRC
    # covers: a changed offset byte gives a valid entry at other offsets, which no reader (Kafka's
    # included) can tell from the real one
    in_offset = kind in ("flip", "byte") and any(e.position <= a < e.position + 8 for e in entries_of(original))
    return bytes(data), kind, kind == "field+crc" or in_offset


@fuzz_settings(250)
@given(data=st.data())
def test_a_damaged_segment_reads_as_written_or_fails_with_a_data_error(data):
    parts = data.draw(segments())
    originals = {encode(h, r): expected for h, r, expected in parts}
    damaged_bytes, _kind, _forged = data.draw(damaged(b"".join(encode(h, r) for h, r, _ in parts)))
    view = memoryview(damaged_bytes)

    def strict():
        return list(segment.batches(view, "fuzz.log", STRICT_CAPPED))

    def lenient():
        out = []
        for header in segment.FrameScanner(view, "fuzz.log"):
            batch = data_or_error(segment.decode, view, header, "fuzz.log", LENIENT_CAPPED)
            if batch is not None:
                out.append(batch)
        return out

    for batches in (data_or_error(strict), lenient()):
        for batch in batches or []:
            h = batch.header
            entry = damaged_bytes[h.position:h.position + h.size]
            if entry in originals:  # an entry the damage did not touch reads as written
                assert batch.records.to_pylist() == originals[entry].to_pylist()


# --- salvage ---

def write_partition(parts, directory: Path, cut: int) -> None:
    """Batches into one or two segments (the second from batch `cut` on), with leader epochs made
    to increase along the log, as a broker's do."""
    directory.mkdir()
    files: dict[int, bytes] = {}
    base = parts[0][0].base_offset
    for i, (header, records, _) in enumerate(parts):
        if i == cut:
            base = header.base_offset
        if header.magic >= 2:
            header = header.replace(partition_leader_epoch=i // 3)
        files[base] = files.get(base, b"") + encode(header, records)
    for base, content in files.items():
        (directory / segment_file_name(base, "log")).write_bytes(content)


def records_of(path: Path) -> dict[int, dict]:
    storage, root = open_storage(str(path))
    out = {}
    for part in find_partitions(storage, root):
        for _seg, batch, _skip in PartitionReader(part).batches():
            if not batch.header.is_control:
                for record in batch.records.to_pylist():
                    out[record["offset"]] = record
    return out


@fuzz_settings(60)
@given(data=st.data())
def test_salvage_keeps_every_intact_entry_invents_nothing_and_says_what_it_lost(data):
    parts = data.draw(segments())
    cut = data.draw(st.integers(1, len(parts)))
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        write_partition(parts, tmp / "p-0", cut)
        written = records_of(tmp / "p-0")
        logs = sorted((tmp / "p-0").glob("*.log"))
        victim = data.draw(st.sampled_from(logs))
        original = victim.read_bytes()
        damaged_bytes, kind, forged = data.draw(damaged(victim.read_bytes()))
        victim.write_bytes(damaged_bytes)
        _plan, report = salvage(str(tmp / "p-0"), str(tmp / "out"),
                                options=SalvageOptions(read=STRICT_CAPPED))
        storage, root = open_storage(str(tmp / "out"))
        assert verify(storage, root, deep=True).ok, [p.text() for p in verify(storage, root, deep=True).errors]
        salvaged = records_of(tmp / "out")
        for log in (tmp / "out").glob("*.log"):  # every entry written is an input entry, as it was
            source = (tmp / "p-0" / log.name).read_bytes()
            assert all(e in source for e in _entries(log.read_bytes()))
        if not forged:
            assert all(salvaged[o] == written[o] for o in salvaged)
        affected = [(a["first"], a["last"]) for a in report["salvage"]["partitions"][0]["affected_offsets"]]
        unknowable = set()
        if original.startswith(damaged_bytes) and len(damaged_bytes) in {e.position for e in entries_of(original)}:
            # a segment cut at an entry boundary is a shorter, intact segment: nothing on disk says that
            # entries followed (the cleaner leaves such offset gaps, and empty segments, too), so the
            # offsets they held cannot be reported
            following = [int(log.stem) for log in logs if int(log.stem) > int(victim.stem)]
            end = min(following, default=None)
            unknowable = {o for o in written.keys() - salvaged.keys()
                          if o >= int(victim.stem) and (end is None or o < end)}
        for offset in (written.keys() - salvaged.keys() - unknowable) if not forged else ():
            # (a forged entry moves records to other offsets: which ones it hides is unknowable)
            assert any(a <= offset and (b is None or offset <= b) for a, b in affected), (kind, offset)
        if kind in ("repeat", "insert") and not forged:  # nothing was destroyed or reordered
            intact = [e for e in _entries(original) if e in damaged_bytes]
            if len(intact) == len(_entries(original)):
                assert salvaged == written, kind


def _entries(data: bytes) -> list[bytes]:
    return [data[e.position:e.position + e.size] for e in entries_of(data)]
