"""Fuzzing kfmt's readers with mutations of real broker-written files (the realkafka corpus).

One case = a copy of up to three consecutive segments of a corpus partition (with their companion
files, leader-epoch-checkpoint and partition.metadata; for checkpoint cases, inside a log directory
with the broker's log-dir files), one file of it damaged by a seeded choice of mutations: bit flips,
bytes and header fields set to boundary values, truncations, swapped, repeated, deleted and inserted
regions, zeroed blocks, huge and negative lengths, overlong varints, bad compressed payloads and
decompression bombs (the last ones with sizes and CRCs fixed, so that they reach the decoders).

Every reader then runs on it, and the oracle allows two outcomes only: correct data, or a kfmt
error (DataError, exit 65 with one line on stderr). Correct data means: an entry whose bytes are an
original entry's (or a mutation that keeps the records' meaning, such as a non-canonical varint)
decodes to the records the Java consumer read; seeks through damaged indexes of an intact log give
the consumer's records; `kfmt salvage` succeeds, invents nothing (every record it writes is the
consumer's record at that offset), loses nothing silently (every record it does not write lies in
an offset range its report names) and writes a directory `kfmt verify` passes. Transforms exit 0
or 65, and publish nothing when 65.

Cases run in a worker process (`python tests/support/fuzzing.py worker ...`) with a memory ceiling (an
address-space limit above what the worker uses after start-up) and a small decompression limit, under
a watchdog: a case that runs past its time is a hang, a worker that dies is a crash, a MemoryError
is unbounded memory growth. Either decode path runs: the compiled kernels, or with
KFMT_PURE_PYTHON=1 the pure-Python references.

`run_fuzz()` is what tests/bad_input/test_fuzz_corpus.py and tests/bad_input/fuzz_long.py call.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import random
import re
import resource
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import traceback
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(TESTS))  # a worker runs this file as a script: `support` must import

from support.corpus import REAL_DIRS, REALKAFKA  # noqa: E402

#: what a decompression may expand to in a fuzz worker, and the bombs' size beyond it
DECOMPRESSION_LIMIT = 16 << 20
BOMB_SIZE = 24 << 20
#: address space a worker may add to what it holds after start-up
MEMORY_HEADROOM = 1536 << 20

LOG_KINDS = ("flip", "bytes", "field", "field+crc", "payload+crc", "overlong-varint", "truncate",
             "swap", "repeat", "delete", "insert", "zero", "lengths+crc", "bomb")
#: mutations that fix the CRC: the damaged entry is then a valid entry saying something else, which
#: readers must read as it says (it is no longer the consumer's record)
FORGING = {"field+crc", "payload+crc", "overlong-varint", "lengths+crc", "bomb"}
FILE_KINDS = ("log",) * 10 + ("index", "timeindex", "snapshot", "txnindex", "leader-epoch-checkpoint",
                              "partition.metadata", "log-dir-checkpoint")
TIERS = ("readers", "commands")
#: verify's checks of what a batch's records say (as opposed to framing, order and companion files)
RECORD_CHECKS = {"record-timestamp", "record-offsets", "control-record", "txn-state"}
#: the other transforms, one per case in turn (they read through the same readers); Spark stays out
TRANSFORMS = (("upgrade",), ("resegment", "--segment-bytes", "4096", "--kafka-version", "3.9"), ("recompress", "--compression", "zstd"),
              ("retain", "--retention-bytes", "20000"), ("compact",), ("export", "--format", "jsonl"))


# --- entries of a segment ---

@dataclass
class Entry:
    position: int
    size: int
    magic: int
    codec: int


def entries_of(data: bytes) -> list[Entry]:
    """The entries of an undamaged segment, by their framing."""
    out, pos = [], 0
    while pos + 17 <= len(data):
        size = struct.unpack_from(">i", data, pos + 8)[0] + 12
        if size < 26 or pos + size > len(data):
            break
        magic = data[pos + 16]
        codec = (struct.unpack_from(">h", data, pos + 21)[0] if magic >= 2 else data[pos + 17]) & 7
        out.append(Entry(pos, size, magic, codec))
        pos += size
    return out


def fix_crc(data: bytearray, pos: int) -> None:
    """Recompute the CRC of the entry at `pos` (v2: CRC-32C over [21, end); v0/v1: CRC-32 over
    [16, end)) so that a mutation reaches the decoder instead of stopping at the CRC."""
    import crc32c

    size = struct.unpack_from(">i", data, pos + 8)[0] + 12
    if size < 26 or pos + size > len(data):
        return
    if data[pos + 16] >= 2:
        struct.pack_into(">I", data, pos + 17, crc32c.crc32c(bytes(data[pos + 21:pos + size])))
    else:
        struct.pack_into(">I", data, pos + 12, zlib.crc32(bytes(data[pos + 16:pos + size])) & 0xFFFFFFFF)


def replace_entry(data: bytearray, e: Entry, new: bytes) -> None:
    data[e.position:e.position + e.size] = new


def with_payload(data: bytearray, e: Entry, payload: bytes) -> bytes:
    """Entry `e` with its records (v2: everything after the 61-byte header; legacy: the value)
    replaced, sizes and CRC fixed."""
    old = bytes(data[e.position:e.position + e.size])
    if e.magic >= 2:
        new = bytearray(old[:61] + payload)
    else:
        key_at = 18 if e.magic == 0 else 26
        klen = struct.unpack_from(">i", old, key_at)[0]
        value_at = key_at + 4 + max(klen, 0)
        new = bytearray(old[:value_at] + struct.pack(">i", len(payload)) + payload)
    struct.pack_into(">i", new, 8, len(new) - 12)
    fix_crc(new, 0)
    return bytes(new)


# --- boundary values ---

INT_WIDTHS = {1: ">b", 2: ">h", 4: ">i", 8: ">q"}


def boundary_values(width: int, near: int) -> list[int]:
    top = (1 << (8 * width - 1)) - 1
    return [0, -1, 1, top, -top - 1, near - 1, near + 1, near * 2, -near, top // 2, 14, 25, 26, 61]


def put_int(data: bytearray, at: int, width: int, value: int) -> None:
    top = 1 << (8 * width)
    value = (value + top // 2) % top - top // 2  # wrapped into the field's range
    struct.pack_into(INT_WIDTHS[width], data, at, value)


# header fields (offset in the entry, width) whose damage the readers must survive
V2_FIELDS = [(0, 8), (8, 4), (12, 4), (16, 1), (21, 2), (23, 4), (27, 8), (35, 8), (43, 8), (51, 2),
             (53, 4), (57, 4)]
LEGACY_FIELDS = {0: [(0, 8), (8, 4), (16, 1), (17, 1), (18, 4)],
                 1: [(0, 8), (8, 4), (16, 1), (17, 1), (18, 8), (26, 4)]}


# --- bombs ---

_BOMBS: dict = {}


def bomb(codec: int, magic: int) -> bytes:
    """A payload of `codec` expanding to BOMB_SIZE zero bytes (kfmt's own writer makes Kafka's
    framing, so that nothing but the size stops the reader)."""
    key = (codec, magic)
    if key not in _BOMBS:
        from kfmt.plugin import registry

        zeros = bytes(BOMB_SIZE)
        if codec == 1:  # one gzip member at level 9: about 1000 to 1
            gz = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
            _BOMBS[key] = gz.compress(zeros) + gz.flush()
        else:
            _BOMBS[key] = registry.get().compression_for(codec, magic).compress(zeros, magic=magic)
    return _BOMBS[key]


# --- mutations ---

def mutate_log(rng: random.Random, data: bytearray, kind: str) -> tuple[str, list[int]]:
    """Damage a segment in place. Returns a description and the positions (in the damaged file) of
    entries whose records must still decode to the originals."""
    entries = entries_of(bytes(data))
    if not entries:
        return "empty segment: left as it is", []
    e = rng.choice(entries)
    n = len(data)
    if kind == "flip":
        spots = [rng.randrange(n) for _ in range(rng.randint(1, 8))]
        for spot in spots:
            data[spot] ^= 1 << rng.randrange(8)
        return f"flip bits at {spots}", []
    if kind == "bytes":
        spots = [rng.randrange(n) for _ in range(rng.randint(1, 6))]
        for spot in spots:
            data[spot] = rng.choice((0x00, 0xFF, 0x7F, 0x80, 0x01))
        return f"set bytes at {spots}", []
    if kind in ("field", "field+crc"):
        fields = V2_FIELDS if e.magic >= 2 else LEGACY_FIELDS[e.magic]
        at, width = rng.choice(fields)
        value = rng.choice(boundary_values(width, e.size if at == 8 else n))
        put_int(data, e.position + at, width, value)
        if kind == "field+crc":
            fix_crc(data, e.position)
        return f"{kind} of the entry at {e.position}: bytes {at}..{at + width} = {value}", []
    if kind == "payload+crc":
        start = e.position + (61 if e.magic >= 2 else 22 if e.magic == 0 else 30)
        if start >= e.position + e.size:
            return "payload+crc: no payload", []
        spots = [rng.randrange(start, e.position + e.size) for _ in range(rng.randint(1, 4))]
        for spot in spots:
            data[spot] = rng.choice((0x00, 0xFF, 0x80, 0x7F, rng.randrange(256)))
        fix_crc(data, e.position)
        return f"payload bytes {spots} of the entry at {e.position}, CRC fixed", []
    if kind == "overlong-varint":
        plain = [x for x in entries if x.magic >= 2 and x.codec == 0]
        if not plain:
            return mutate_log(rng, data, "payload+crc")
        e = rng.choice(plain)
        return _overlong_varint(rng, data, e)
    if kind == "truncate":
        cut = rng.choice([rng.randrange(n), e.position + rng.randrange(min(e.size, 64))])
        del data[cut:]
        return f"truncate at {cut}", []
    if kind in ("swap", "repeat", "delete", "insert", "zero"):
        length = rng.choice([rng.randint(1, 64), e.size, rng.randint(1, max(1, n // 4))])
        a = rng.randrange(n)
        if kind == "swap":
            b = rng.randrange(n)
            a, b = sorted((a, b))
            length = min(length, b - a, n - b)
            if length <= 0:
                return "swap: nothing", []
            data[a:a + length], data[b:b + length] = data[b:b + length], data[a:a + length]
            return f"swap {length} bytes at {a} and {b}", []
        if kind == "repeat":
            region = bytes(data[a:a + length])
            data[a + len(region):a + len(region)] = region
            return f"repeat {len(region)} bytes at {a}", []
        if kind == "delete":
            del data[a:a + length]
            return f"delete {length} bytes at {a}", []
        if kind == "insert":
            data[a:a] = bytes(rng.randrange(256) for _ in range(length))
            return f"insert {length} random bytes at {a}", []
        data[a:a + length] = bytes(len(data[a:a + length]))
        return f"zero {length} bytes at {a}", []
    if kind == "lengths+crc":
        return _lengths(rng, data, e)
    if kind == "bomb":
        compressed = [x for x in entries if x.codec]
        if not compressed:
            return mutate_log(rng, data, "lengths+crc")
        e = rng.choice(compressed)
        replace_entry(data, e, with_payload(data, e, bomb(e.codec, e.magic)))
        return f"bomb of codec {e.codec} in the entry at {e.position}", []
    raise ValueError(kind)


def _overlong_varint(rng: random.Random, data: bytearray, e: Entry) -> tuple[str, list[int]]:
    """The first record's length varint of an uncompressed v2 batch written with extra continuation
    bytes: up to 5 bytes Kafka still reads it (same records), beyond that it is refused."""
    at = e.position + 61
    old = bytearray()
    while data[at + len(old)] & 0x80:
        old.append(data[at + len(old)])
    old.append(data[at + len(old)])
    total = rng.choice([len(old) + 1, 5, 6, 10])
    if total <= len(old):
        return "overlong-varint: already long", []
    value = 0
    for i, b in enumerate(old):
        value |= (b & 0x7F) << (7 * i)
    new = bytes((((value >> (7 * i)) & 0x7F) | (0x80 if i < total - 1 else 0)) for i in range(total))
    entry = bytearray(data[e.position:e.position + e.size])
    entry[61:61 + len(old)] = new
    struct.pack_into(">i", entry, 8, len(entry) - 12)
    fix_crc(entry, 0)
    replace_entry(data, e, bytes(entry))
    same = [e.position] if total <= 5 else []
    return f"first record length of the batch at {e.position} as a {total}-byte varint", same


def _lengths(rng: random.Random, data: bytearray, e: Entry) -> tuple[str, list[int]]:
    """Huge and negative lengths and counts that the CRC vouches for."""
    value = rng.choice([-2, -1 << 31, (1 << 31) - 1, 1 << 30, e.size, e.size * 1000])
    if e.magic >= 2:
        if e.codec == 0 and rng.random() < 0.5:  # the first record's length varint
            entry = bytearray(data[e.position:e.position + e.size])
            zig = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFF
            varint = bytearray()
            while zig >= 0x80:
                varint.append((zig & 0x7F) | 0x80)
                zig >>= 7
            varint.append(zig)
            entry[61:62] = varint
            struct.pack_into(">i", entry, 8, len(entry) - 12)
            fix_crc(entry, 0)
            replace_entry(data, e, bytes(entry))
            return f"first record length {value} in the batch at {e.position}, CRC fixed", []
        put_int(data, e.position + 57, 4, value)
        fix_crc(data, e.position)
        return f"record count {value} in the batch at {e.position}, CRC fixed", []
    key_at = 18 if e.magic == 0 else 26
    at = rng.choice([key_at, key_at + 4 + max(0, struct.unpack_from(">i", data, e.position + key_at)[0])])
    if e.position + at + 4 <= e.position + e.size:
        put_int(data, e.position + at, 4, value)
        fix_crc(data, e.position)
    return f"a length of {value} at byte {at} of the message at {e.position}, CRC fixed", []


def mutate_binary(rng: random.Random, data: bytearray, entry_size: int) -> tuple[str, str]:
    """Damage an index, time index, txn index or snapshot: (the mutation, what it did)."""
    kind, what = _mutate_binary(rng, data, entry_size)
    return kind, what


def _mutate_binary(rng: random.Random, data: bytearray, entry_size: int) -> tuple[str, str]:
    n = len(data)
    kind = rng.choice(("flip", "field", "truncate", "extend", "swap", "zero"))
    if kind == "flip" and n:
        spots = [rng.randrange(n) for _ in range(rng.randint(1, 4))]
        for spot in spots:
            data[spot] ^= 1 << rng.randrange(8)
        return "flip", f"flip bits at {spots}"
    if kind == "field" and n >= 4:
        at = rng.randrange(0, n - 3)
        at -= at % 4
        put_int(data, at, 4, rng.choice(boundary_values(4, n)))
        return "field", f"int32 at {at} set"
    if kind == "truncate" and n:
        cut = rng.randrange(n)
        del data[cut:]
        return "truncate", f"truncate at {cut}"
    if kind == "extend":
        data += rng.choice([bytes(entry_size * 3), bytes(rng.randrange(256) for _ in range(entry_size + 3))])
        return "extend", "extended"
    if kind == "swap" and n >= 2 * entry_size:
        a = rng.randrange(n // entry_size) * entry_size
        b = rng.randrange(n // entry_size) * entry_size
        data[a:a + entry_size], data[b:b + entry_size] = data[b:b + entry_size], data[a:a + entry_size]
        return "swap", f"swap entries at {a} and {b}"
    data[:] = bytes(rng.randrange(256) for _ in range(rng.randint(0, 64)))
    return "random", "replaced by random bytes"


def mutate_text(rng: random.Random, data: bytearray) -> tuple[str, str]:
    """Damage a checkpoint text file or partition.metadata: (the mutation, what it did)."""
    kind, what = _mutate_text(rng, data)
    return kind, what


def _mutate_text(rng: random.Random, data: bytearray) -> tuple[str, str]:
    text = bytes(data)
    kind = rng.choice(("bytes", "number", "line", "utf8", "crlf", "blank", "truncate"))
    if kind == "bytes" and text:
        spots = [rng.randrange(len(text)) for _ in range(rng.randint(1, 3))]
        for spot in spots:
            data[spot] = rng.choice(b" \t\n\r-+0123456789:x=\x00\xff")
        return "bytes", f"bytes at {spots}"
    if kind == "number":
        out, i = bytearray(), 0
        digits = [j for j, c in enumerate(text) if chr(c).isdigit()]
        if digits:
            i = rng.choice(digits)
            data[i:i + 1] = rng.choice([b"9223372036854775808", b"-5", b"2147483648", b"1e3", b""])
        return "number", f"number at {i}"
    if kind == "line":
        lines = text.split(b"\n")
        lines.insert(rng.randrange(len(lines) + 1), rng.choice([b"x 0 1", b"", b"0 0 0 0", b"topic -1 5"]))
        data[:] = b"\n".join(lines)
        return "line", "line inserted"
    if kind == "utf8":
        data[rng.randrange(len(data) + 1):0] = b"\xc3\x28\xff"
        return "utf8", "invalid UTF-8"
    if kind == "crlf":
        data[:] = text.replace(b"\n", b"\r\n")
        return "crlf", "CRLF line ends"
    if kind == "blank":
        data[:] = b" " + text.replace(b" ", b"  ")
        return "blank", "extra blanks"
    del data[rng.randrange(len(data) + 1):]
    return "truncate", "truncated"


# --- cases ---

@dataclass
class Case:
    seed: int
    index: int
    corpus: str
    kind: str
    root: Path  # the partition directory, or the log directory holding it (log-dir cases)
    partition: Path
    file: str | None  # the damaged file's name
    description: str
    first_offset: int  # the offsets the copied segments cover (the truth's range)
    last_offset: int
    same_records: list[int] = field(default_factory=list)
    forged: bool = False  # a mutation fixed a CRC (FORGING)
    how: str = "none"  # the mutation

    @property
    def mutation(self) -> str:
        return f"{self.kind}/{self.how}"

    @property
    def label(self) -> str:
        return f"case {self.seed}:{self.index} {self.corpus}/{self.file} ({self.kind}: {self.description})"


def build_case(seed: int, index: int, workdir: Path) -> Case:
    """Case `index` of run `seed`: the same bytes every time."""
    from support.corpus_truth import kafka_listing

    rng = random.Random(seed * 1_000_003 + index)
    corpus = REAL_DIRS[index % len(REAL_DIRS)]
    kind = rng.choice(FILE_KINDS)
    if kind == "txnindex":
        corpus = "txn-v2-none-0"
    src = REALKAFKA / corpus
    logs = sorted(p.name for p in src.glob("*.log"))
    start = rng.randrange(len(logs))
    chosen = logs[start:start + 3]
    bases = [int(name[:20]) for name in chosen]
    root = workdir / "logs" if kind == "log-dir-checkpoint" else workdir
    part = root / corpus
    part.mkdir(parents=True)
    # what the directory holds for those segments: their files, and the snapshots at their bases and
    # at the offset after them (the next segment's base, or the log end a clean shutdown wrote)
    end = int(logs[start + 3][:20]) if start + 3 < len(logs) else max(
        (int(f.name[:20]) for f in src.glob("*.snapshot")), default=bases[-1])
    for f in src.iterdir():
        offset = int(f.name[:20]) if f.name[:20].isdigit() else None
        if offset is None or offset in bases or (f.suffix == ".snapshot" and bases[0] <= offset <= end):
            shutil.copyfile(f, part / f.name)
    listing = [e for e in kafka_listing(corpus) if e.file in chosen]
    last_offset = listing[-1].last_offset if listing else bases[0]
    if kind == "log-dir-checkpoint":
        for f in (REALKAFKA / "_logdir-root").iterdir():
            shutil.copyfile(f, root / f.name)
        topic = corpus.rsplit("-", 1)[0]
        for name, offset in (("recovery-point-offset-checkpoint", last_offset + 1),
                             ("replication-offset-checkpoint", last_offset + 1),
                             ("log-start-offset-checkpoint", bases[0])):
            (root / name).write_text(f"0\n1\n{topic} 0 {offset}\n")
    target = _target_file(rng, kind, part, chosen)
    same: list[int] = []
    forged, how = False, "none"
    if target is None:
        description = f"no {kind} file here: undamaged"
    else:
        data = bytearray(target.read_bytes())
        if kind == "log":
            how = rng.choice(LOG_KINDS)
            description, same = mutate_log(rng, data, how)
            forged = how in FORGING
        elif kind in ("index", "timeindex", "txnindex", "snapshot"):
            how, description = mutate_binary(rng, data, {"index": 8, "timeindex": 12, "txnindex": 34,
                                                         "snapshot": 32}[kind])
        else:
            how, description = mutate_text(rng, data)
        target.write_bytes(bytes(data))
    return Case(seed, index, corpus, kind, root, part, target.name if target else None, description,
                bases[0], last_offset, same, forged, how)


def _target_file(rng, kind, part: Path, chosen: list[str]) -> Path | None:
    if kind == "log":
        return part / rng.choice(chosen)
    if kind in ("index", "timeindex", "txnindex"):
        files = sorted(part.glob(f"*.{kind}"))
        files = [f for f in files if f.stat().st_size] or files
        return rng.choice(files) if files else None
    if kind == "snapshot":
        files = sorted(part.glob("*.snapshot"))
        return rng.choice(files) if files else None
    if kind == "log-dir-checkpoint":
        root = part.parent
        return root / rng.choice(["recovery-point-offset-checkpoint", "replication-offset-checkpoint",
                                  "log-start-offset-checkpoint", "cleaner-offset-checkpoint"])
    path = part / kind
    return path if path.exists() else None


# --- the oracle ---

class Findings(list):
    def add(self, case: Case, target: str, problem: str) -> None:
        self.append({"case": case.label, "target": target, "problem": problem})


def truth_by_offset(case: Case) -> dict[int, dict]:
    from support.corpus_truth import consumer_records

    return {r["offset"]: r for r in consumer_records(case.corpus)
            if case.first_offset <= r["offset"] <= case.last_offset}


def consumer_view(batch) -> list[dict]:
    """A batch's records as the consumer's truth lists them (as `kfmt cat --format json` prints)."""
    from kfmt.cli.cat import records_of

    return [json.loads(line) for line in records_of(batch, 0, {}, True)]


def guarded(case: Case, findings: Findings, target: str, fn, *args, **kwargs):
    """Run one reader: a DataError is an allowed outcome (returns None), anything else a finding."""
    from kfmt.errors import DataError

    try:
        return fn(*args, **kwargs)
    except DataError:
        return None
    except MemoryError:
        findings.add(case, target, "MemoryError: memory grew past the ceiling")
    except Exception as exc:  # noqa: BLE001 - every other exception is what the fuzzer looks for
        findings.add(case, target, f"{type(exc).__name__}: {exc} | {_where(exc)}")
    return None


def _where(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    kfmt_frames = [f for f in frames if "/kfmt/" in f.filename or "/plugins/" in f.filename] or frames
    f = kfmt_frames[-1]
    return f"{Path(f.filename).name}:{f.lineno} {f.name}"


def run_readers(case: Case, findings: Findings) -> None:
    """The file readers on the damaged file, in-process."""
    from kfmt.format import segment
    from kfmt.format.message_formats import LENIENT, STRICT
    from kfmt.partition import checkpoints, indexes, snapshots, txnindex
    from kfmt.partition.layout import find_partitions
    from kfmt.storage.manifest import Manifest
    from kfmt.storage.store import open_storage
    from kfmt.transforms.salvage import scan_segment, segment_ranges

    if case.file is None:
        return
    path = (case.root if case.kind == "log-dir-checkpoint" else case.partition) / case.file
    data = path.read_bytes()
    name = str(path)
    if case.kind == "log":
        truth = truth_by_offset(case)
        originals = _original_entries(case)
        checks = Counter()

        def strict():
            for batch in segment.batches(data, name, STRICT):
                _check_decoded(case, findings, "strict read", data, batch, originals, truth, checks)

        def lenient():
            scanner = segment.FrameScanner(data, name)
            for header in scanner:
                batch = guarded(case, findings, "lenient decode", segment.decode, data, header, name, LENIENT)
                if batch is not None:
                    _check_decoded(case, findings, "lenient decode", data, batch, originals, truth, checks)

        guarded(case, findings, "strict read", strict)
        guarded(case, findings, "lenient read", lenient)
        for position in case.same_records:
            if checks[position] == 0:
                findings.add(case, "strict read", f"the entry at {position} keeps its records' meaning "
                             f"but was not read")
        [part] = find_partitions(*open_storage(str(case.partition)))
        rng = dict(zip((s.log.name for s in part.segments), segment_ranges(part)))[case.file]
        scan = guarded(case, findings, "salvage scan", scan_segment, data, name, rng)
        if scan is not None:
            for i in scan.order:
                start, size = scan.found.positions[i], scan.found.sizes[i]
                batch = guarded(case, findings, "salvage scan", segment.decode, data,
                                _header_at(data, start), name)
                if batch is not None and not case.forged:  # leader epochs are judged per partition
                    _no_invention(case, findings, "salvage scan", batch, truth, ignore=("leaderEpoch",))
    elif case.kind in ("index", "timeindex"):
        reader = indexes.read_offset_index if case.kind == "index" else indexes.read_time_index
        guarded(case, findings, f"read {case.kind}", reader, data, int(case.file[:20]))
    elif case.kind == "snapshot":
        guarded(case, findings, "read snapshot", snapshots.read_snapshot, data, name)
    elif case.kind == "txnindex":
        guarded(case, findings, "read txnindex", txnindex.read_txn_index, data)
    else:
        text = data.decode("utf-8", "replace")
        parse = {"leader-epoch-checkpoint": checkpoints.read_leader_epochs,
                 "partition.metadata": checkpoints.read_partition_metadata}.get(
            case.file, checkpoints.read_offset_checkpoint)
        guarded(case, findings, f"read {case.file}", parse, text, name)
        guarded(case, findings, "read manifest", Manifest.parse, data, str(case.root), name)


def _header_at(data: bytes, position: int):
    from kfmt.plugin import registry

    entry = memoryview(data)[position:]
    size = struct.unpack_from(">i", data, position + 8)[0] + 12
    return registry.get().format_for(data[position + 16]).read_header(entry[:size], position)


def _original_entries(case: Case) -> set[bytes]:
    data = (REALKAFKA / case.corpus / case.file).read_bytes()
    return {data[e.position:e.position + e.size] for e in entries_of(data)}


def _check_decoded(case, findings, target, data, batch, originals, truth, checks) -> None:
    h = batch.header
    entry = bytes(data[h.position:h.position + h.size])
    if h.position in case.same_records:
        checks[h.position] += 1
    if (entry in originals or h.position in case.same_records) and not h.is_control:
        _no_invention(case, findings, target, batch, truth)


def _no_invention(case, findings, target, batch, truth, ignore=()) -> None:
    if batch.header.is_control:
        return
    for record in consumer_view(batch):
        expected = truth.get(record["offset"])
        if expected is not None:
            record = {k: v for k, v in record.items() if k not in ignore}
            expected = {k: v for k, v in expected.items() if k not in ignore}
        if record != expected:
            findings.add(case, target, f"record at offset {record['offset']} is not the consumer's: "
                         f"{_short(record)} != {_short(expected)}")
            return


def _short(record) -> str:
    return json.dumps(record)[:160] if record is not None else "nothing"


# --- the commands, end to end ---

def run_commands(case: Case, findings: Findings, scratch: Path) -> None:
    from support.cli import run_kfmt

    root, part = case.root, case.partition
    allowed = {0, 65}

    def command(*args, codes=allowed):
        result = run_kfmt(*args)
        label = "kfmt " + " ".join(str(a) for a in args[:2])
        err = result.err.strip()
        if result.code not in codes:
            findings.add(case, label, f"exit {result.code}: {err[:300]}")
        elif "internal error" in err or "Traceback" in err:
            findings.add(case, label, f"not a clear error: {err[:300]}")
        elif args[0] != "dump" and len(err.splitlines()) > 1:  # dump's stderr reports are Kafka's
            findings.add(case, label, f"stderr is not one clear line: {err[:300]}")
        elif result.code and args[0] not in ("verify", "dump") \
                and not (err.splitlines() or [""])[-1].startswith("kfmt: error: "):
            findings.add(case, label, f"exit {result.code} without a kfmt error line: {err[:300]}")
        return result

    truth = truth_by_offset(case)
    log_intact = case.kind != "log"
    offsets = sorted(truth)
    command("cat", root, "--format", "json")
    if case.corpus.startswith("txn"):
        command("cat", root, "--isolation", "read_committed")
    command("info", root)
    command("verify", root)
    if offsets:
        rng = random.Random(case.index)
        target = rng.choice(offsets)
        seek = command("cat", part, "--from-offset", target, "--max-records", 20, "--format", "json",
                       codes={0} if log_intact else allowed)
        if log_intact and seek.code == 0:
            got = [json.loads(line) for line in seek.lines]
            # a consumer's seek below the log start offset starts there (a damaged checkpoint
            # may have moved it)
            start = max(target, checkpointed_log_start(case))
            expected = [truth[o] for o in offsets if o >= start][:20]
            if got != expected:
                findings.add(case, "kfmt cat --from-offset", f"seek to {target} through a damaged index "
                             f"gave offsets {[r['offset'] for r in got][:5]}..., expected "
                             f"{[r['offset'] for r in expected][:5]}...")
        stamp = truth[rng.choice(offsets)]["timestamp"]
        command("cat", part, "--from-timestamp", stamp, "--max-records", 5,
                codes={0} if log_intact else allowed)
    if case.file is not None:
        damaged = (root if case.kind == "log-dir-checkpoint" else part) / case.file
        if case.kind in ("log", "index", "timeindex", "snapshot", "txnindex"):
            command("dump", damaged, "--deep-iteration", "--print-data-log")
        if case.kind in ("index", "timeindex"):
            command("dump", damaged, "--verify-index-only")
    _salvage_oracle(case, findings, command, scratch / "salvaged", truth)
    for name, *args in (("reindex",), TRANSFORMS[case.index % len(TRANSFORMS)]):
        out = scratch / f"{name}-out"
        result = command(name, root, out, *args, *(("--master", "inprocess") if name != "reindex" else ()))
        if result.code == 65 and (out.exists() or any(scratch.glob(f"{name}-out.*"))):
            findings.add(case, f"kfmt {name}", "exit 65 but something was published or left behind")


def checkpointed_log_start(case: Case) -> int:
    """The partition's entry in its log directory's log-start-offset-checkpoint, read as Kafka's
    CheckpointFile reads it (version 0, a count, `topic partition offset` lines; anything else: no
    entry): what the log start offset is at least (-1 when there is no entry)."""
    path = case.partition.parent / "log-start-offset-checkpoint"
    if case.kind != "log-dir-checkpoint" or not path.is_file():
        return -1
    number = re.compile(r"[+-]?[0-9]+", re.ASCII)
    try:
        lines = re.split(r"\r\n|\r|\n", path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError:
        return -1
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) < 2 or not number.fullmatch(lines[0]) or int(lines[0]) != 0 or not number.fullmatch(lines[1]) \
            or int(lines[1]) != len(lines) - 2:
        return -1
    topic = case.partition.name.rsplit("-", 1)[0]
    for line in lines[2:]:
        fields = re.split(r"\s+", line, flags=re.ASCII)
        while fields and fields[-1] == "":
            fields.pop()
        if len(fields) != 3 or not number.fullmatch(fields[1]) or not number.fullmatch(fields[2]):
            return -1
        if fields[0] == topic and int(fields[1]) == 0:
            return int(fields[2]) if int(fields[2]) < 2**63 else -1
    return -1


def _salvage_oracle(case: Case, findings: Findings, command, dst: Path, truth: dict) -> None:
    from kfmt.errors import KfmtError
    from kfmt.inspect.verify import verify
    from kfmt.partition.layout import find_partitions
    from kfmt.partition.reader import PartitionReader
    from kfmt.storage.store import open_storage

    result = command("salvage", case.root, dst, "--format", "json", codes={0})
    if result.code != 0:
        return
    report = json.loads(result.out)
    storage, path = open_storage(str(dst))
    verified = verify(storage, path, deep=True)
    # A forged entry is intact and kept, and verify may object to what it says (a timestamp above
    # its batch's maxTimestamp...): salvage must not add a problem the input did not have.
    allowed_checks = ({p.check for p in verify(*open_storage(str(case.root)), deep=True).errors} & RECORD_CHECKS
                      if case.forged else set())
    for problem in verified.errors:
        if problem.check not in allowed_checks:
            findings.add(case, "kfmt salvage", f"its output fails verify: {problem.text()[:300]}")
    written = set()
    try:
        for part in find_partitions(storage, path):
            for _seg, batch, _skip in PartitionReader(part).batches():
                if not case.forged:
                    _no_invention(case, findings, "kfmt salvage", batch, truth)
                written |= set(batch.records.column(0).to_pylist())
    except KfmtError as err:
        findings.add(case, "kfmt salvage", f"its output cannot be read: {err}")
        return
    for log in dst.rglob("*.log"):  # every entry written is, byte for byte, an entry of the input
        source = (case.partition / log.name).read_bytes() if (case.partition / log.name).exists() else b""
        data = log.read_bytes()
        for e in entries_of(data):
            if data[e.position:e.position + e.size] not in source:
                findings.add(case, "kfmt salvage",
                             f"{log.name}: the entry at {e.position} is not in the input")
                break
    if case.forged:
        return
    affected = [(a["first"], a["last"])
                for p in report["salvage"]["partitions"] for a in p["affected_offsets"]]
    silent = [o for o in truth if o not in written
              and not any(a <= o and (b is None or o <= b) for a, b in affected)]
    if silent:
        findings.add(case, "kfmt salvage", f"records lost without a report: offsets {silent[:10]}")


# --- the worker, under a watchdog ---

def worker_main(seed: int, start: int, count: int, tier: str) -> None:
    """Run cases [start, start + count), one JSON line out before and after each."""
    import kfmt.cli  # noqa: F401 - imported before the ceiling is set
    import kfmt.inspect.verify  # noqa: F401
    import kfmt.transforms.salvage  # noqa: F401
    # kfmt imports pyarrow where record columns are first made, not with its modules; Arrow's
    # allocator (mimalloc) reserves about 1 GB of address space on its first allocation: the
    # library's, not the work's, so it is made before the ceiling, as kfmt's imports once made it
    import pyarrow

    pyarrow.allocate_buffer(1)

    _set_memory_ceiling()
    out = sys.stdout
    for index in range(start, start + count):
        print(json.dumps({"start": index}), file=out, flush=True)
        findings = Findings()
        with tempfile.TemporaryDirectory(prefix="kfmt-fuzz-") as tmp:
            work = Path(tmp)
            case = build_case(seed, index, work / "case")
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                if tier == "readers":
                    guarded(case, findings, "readers", run_readers, case, findings)
                else:
                    guarded(case, findings, "commands", run_commands, case, findings, work)
        print(json.dumps({"done": index, "label": case.label, "kind": case.kind,
                          "mutation": case.mutation, "findings": findings}), file=out, flush=True)


def _set_memory_ceiling() -> None:
    with open("/proc/self/status") as f:
        vm = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
    _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (vm + MEMORY_HEADROOM, hard))


@dataclass
class FuzzResult:
    seed: int
    tier: str
    path: str
    cases: int = 0
    findings: list[dict] = field(default_factory=list)
    kinds: Counter = field(default_factory=Counter)  # damaged file kind -> cases
    mutations: Counter = field(default_factory=Counter)  # "kind/mutation" -> cases
    seconds: float = 0.0

    def summary(self) -> str:
        return (f"{self.tier} tier, {self.path} path, seed {self.seed}: {self.cases} cases in "
                f"{self.seconds:.0f} s, {len(self.findings)} findings; "
                f"files: {dict(sorted(self.kinds.items()))}")


def worker_env(path: str) -> dict:
    env = dict(os.environ, KFMT_MAX_DECOMPRESSED_BYTES=str(DECOMPRESSION_LIMIT))
    if path == "pure":
        env["KFMT_PURE_PYTHON"] = "1"
    else:
        env.pop("KFMT_PURE_PYTHON", None)
    return env


def run_fuzz(seed: int, count: int, tier: str, path: str = "pure", *, case_timeout: float = 60.0,
             budget: float | None = None, start: int = 0) -> FuzzResult:
    """Run cases [start, start + count) of `seed` in workers (restarted after a hang or a crash),
    stopping early when `budget` seconds are spent."""
    result = FuzzResult(seed, tier, path)
    began = time.monotonic()
    index, stop = start, start + count
    while index < stop and (budget is None or time.monotonic() - began < budget):
        proc = subprocess.Popen([sys.executable, __file__, "worker", str(seed), str(index), str(stop - index),
                                 tier], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=worker_env(path), start_new_session=True)
        current, since = None, time.monotonic()
        try:
            while True:
                if budget is not None and time.monotonic() - began >= budget and current is None:
                    index = stop
                    break
                ready, _, _ = select.select([proc.stdout], [], [], 1.0)
                if not ready:
                    if current is not None and time.monotonic() - since > case_timeout:
                        result.findings.append({"case": f"case {seed}:{current}", "target": "watchdog",
                                                "problem": f"no result after {case_timeout:.0f} s: a hang"})
                        result.cases += 1
                        index = current + 1
                        break
                    continue
                line = proc.stdout.readline()
                if not line:  # the worker died
                    proc.wait()
                    if current is not None:
                        result.findings.append({"case": f"case {seed}:{current}", "target": "worker",
                                                "problem": f"the worker died (exit {proc.returncode}): "
                                                           f"{proc.stderr.read()[-500:]}"})
                        result.cases += 1
                        index = current + 1
                    else:
                        index = stop
                    break
                message = json.loads(line)
                if "start" in message:
                    current, since = message["start"], time.monotonic()
                    if budget is not None and time.monotonic() - began >= budget:
                        index = stop
                        break
                else:
                    result.cases += 1
                    result.kinds[message["kind"]] += 1
                    result.mutations[message["mutation"]] += 1
                    result.findings += message["findings"]
                    current, index = None, message["done"] + 1
                    if index >= stop:
                        break
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            proc.stdout.close()
            proc.stderr.close()
    result.seconds = time.monotonic() - began
    return result


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "worker":
        worker_main(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
    else:
        sys.exit("usage: fuzzing.py worker SEED START COUNT TIER (see tests/bad_input/fuzz_long.py)")
