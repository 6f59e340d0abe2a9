"""Hypothesis strategies and checks shared by the tests of the compiled kernels (kfmt._speedups) and
the pure-Python references: run a case through both paths and compare the outcomes."""
from __future__ import annotations

import contextlib
import importlib
import itertools
import struct
import sys

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from kfmt.errors import DataError
from kfmt.format import segment
from kfmt.format.model import BatchHeader, TimestampType, make_records
from kfmt.plugin import registry

# The modules that choose between a kernel and its reference: kfmt/format's (docs/architecture.md,
# "Kernels and their references"; _kernel_holders imports every one of them) and the value formats'.
NATIVE_USERS = ["kfmt.default_plugins.values.registry_formats", "kfmt.default_plugins.values.writer_schema"]


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _kernel_holders(names: list[str]) -> list:
    """The modules of `names` and every kfmt.format module and loaded kfmt module that holds
    kfmt.format.kernels.native (imported here, so that one imported later is not missed)."""
    import pkgutil

    import kfmt.format
    from kfmt.format import kernels

    if kernels.native is None:
        return []
    for info in pkgutil.walk_packages(kfmt.format.__path__, "kfmt.format."):
        if info.name != "kfmt.format.layout_c":
            importlib.import_module(info.name)
    named = [m for m in map(importlib.import_module, names) if hasattr(m, "native")]
    loaded = [m for name, m in list(sys.modules.items()) if name.startswith("kfmt.") and m is not None
              and m is not kernels and getattr(m, "native", None) is kernels.native]
    return list({id(m): m for m in named + loaded}.values())


@contextlib.contextmanager
def reference_code(names: list[str] = NATIVE_USERS):
    """Run the pure-Python reference: the kernels off in every module that uses them (those of
    `names`, and every loaded module holding them)."""
    users = _kernel_holders(names)
    saved = [m.native for m in users]
    for m in users:
        m.native = None
    try:
        yield
    finally:
        for m, native in zip(users, saved):
            m.native = native


def outcome(fn):
    """What a call gives: its value, or the DataError it raises (type, message, position, offset)."""
    try:
        return "value", fn()
    except DataError as err:
        return "error", type(err).__name__, err.message, err.file, err.position, err.offset


def both(fn, names: list[str] = NATIVE_USERS):
    fast = outcome(fn)
    with reference_code(names):
        reference = outcome(fn)
    return fast, reference


maybe_bytes = st.none() | st.binary(max_size=30)


headers = st.lists(st.tuples(st.binary(max_size=8), maybe_bytes), max_size=3)


int64s = st.integers(-2**63, 2**63 - 1)


timestamps = st.sampled_from([-1, 0, 1700000000000]) | st.integers(-2**40, 2**43) | int64s


@st.composite
def record_columns(draw, max_size=20):
    n = draw(st.integers(0, max_size))
    base = draw(st.integers(0, 2**40) | int64s)
    offsets = list(itertools.accumulate([base] + draw(st.lists(st.integers(1, 2**20), min_size=n, max_size=n))[1:]))[:n]
    offsets = [min(o, 2**63 - 1) for o in offsets]
    return make_records(offsets, draw(st.lists(timestamps, min_size=n, max_size=n)),
                        draw(st.lists(maybe_bytes, min_size=n, max_size=n)),
                        draw(st.lists(maybe_bytes, min_size=n, max_size=n)),
                        draw(st.lists(headers, min_size=n, max_size=n)))


LEGACY_CODECS = {0: ["none", "gzip", "snappy", "lz4"], 1: ["none", "gzip", "snappy", "lz4"],
                 2: ["none", "gzip", "snappy", "lz4", "zstd"]}


@st.composite
def segments(draw):
    """A segment of mixed batches (every magic and codec), then maybe a damaged or junk tail."""
    out = bytearray()
    offset = draw(st.integers(0, 1000))
    for _ in range(draw(st.integers(0, 6))):
        magic = draw(st.sampled_from([0, 1, 2]))
        codec = draw(st.sampled_from(LEGACY_CODECS[magic]))
        n = 1 if magic < 2 and codec == "none" else draw(st.integers(1, 5))
        offsets = list(range(offset, offset + n))
        ts = [-1 if magic == 0 else draw(timestamps.filter(lambda t: -2**62 < t < 2**62)) for _ in offsets]
        keys = draw(st.lists(maybe_bytes, min_size=n, max_size=n))
        values = draw(st.lists(maybe_bytes, min_size=n, max_size=n))
        hs = draw(st.lists(headers, min_size=n, max_size=n)) if magic == 2 else None
        records = make_records(offsets, ts, keys, values, hs)
        lat = magic > 0 and draw(st.booleans())
        header = BatchHeader(magic=magic, base_offset=offset, last_offset=offsets[-1],
                             compression=registry.get().compression_named(codec).id,
                             timestamp_type=(TimestampType.LOG_APPEND_TIME if lat else
                                             TimestampType.NO_TIMESTAMP_TYPE if magic == 0
                                             else TimestampType.CREATE_TIME),
                             max_timestamp=1700000000000 if lat else max(ts),
                             base_timestamp=ts[0])
        out += registry.get().format_for(magic).encode(header, records)
        offset += n + draw(st.integers(0, 3))
    tail = draw(st.sampled_from(["none", "zeros", "junk", "flip", "cut"]))
    if tail == "zeros":
        out += bytes(draw(st.integers(1, 40)))
    elif tail == "junk":
        out += draw(st.binary(min_size=1, max_size=40))
    elif tail == "flip" and out:
        i = draw(st.integers(0, len(out) - 1))
        out[i] ^= draw(st.integers(1, 255))
    elif tail == "cut" and out:
        del out[draw(st.integers(0, len(out) - 1)):]
    return bytes(out)


@st.composite
def legacy_runs_of_messages(draw):
    """Uncompressed v0/v1 messages (mixed magics and timestamp types), maybe one damaged."""
    out = bytearray()
    offset = draw(st.integers(0, 2**40))
    for _ in range(draw(st.integers(1, 30))):
        magic = draw(st.sampled_from([0, 1]))
        builder = LegacyRecordBatchBuilder(magic, 0, 10**6)
        ts = None if magic == 0 else draw(st.integers(-1, 2**43))
        builder.append(offset, ts, draw(maybe_bytes), draw(maybe_bytes))
        entry = bytearray(builder.build())
        if magic == 1 and draw(st.integers(0, 5)) == 0:
            entry[17] |= 0x08  # LogAppendTime (CRC redone below)
            import zlib
            entry[12:16] = (zlib.crc32(bytes(entry[16:])) & 0xFFFFFFFF).to_bytes(4, "big")
        out += entry
        offset += draw(st.integers(1, 5))
    damage = draw(st.sampled_from(["none", "none", "crc", "length"]))
    rows = np.concatenate(list(segment.FrameScanner(bytes(out), "x").chunks()))
    if damage != "none":
        i = draw(st.integers(0, len(rows) - 1))
        pos = int(rows["position"][i])
        at = pos + (12 if damage == "crc" else rows["size"][i] - 5)
        out[at] ^= draw(st.integers(1, 255))
    return bytes(out), rows


@st.composite
def plain_v2_batches(draw):
    """(segment bytes, the records written) of uncompressed v2 data batches built with kafka-python's
    DefaultRecordBatchBuilder (an independent encoder) at the offsets a broker assigns: null keys,
    values and header values, transactional or not, LogAppendTime or not, empty ones; then maybe one
    damaged (a byte changed, its CRC left wrong or made right again, or the count changed under a
    right CRC: then only the record parser can tell). The records are (offset, timestamp as a
    consumer reads it, key, value, [(header key, value)]), None when damaged."""
    import crc32c as crc32c_package
    from kafka.record.default_records import DefaultRecordBatchBuilder

    out, records = bytearray(), []
    offset = draw(st.integers(0, 2**40))
    for _ in range(draw(st.integers(1, 8))):
        transactional = draw(st.booleans())
        builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=transactional,
                                            producer_id=draw(st.sampled_from([-1, 7, 2**40])),
                                            producer_epoch=draw(st.sampled_from([-1, 0, 3])),
                                            base_sequence=draw(st.sampled_from([-1, 0, 2**31 - 2])),
                                            batch_size=1 << 20)
        n = draw(st.integers(0, 6))
        base_ts = draw(st.integers(0, 2**42))
        written = []
        for delta in range(n):
            ts = base_ts + draw(st.integers(-1000, 1000))
            key, value = draw(maybe_bytes), draw(maybe_bytes)
            pairs = st.tuples(st.binary(max_size=6).filter(_utf8), maybe_bytes)
            hs = [(k.decode(), v) for k, v in draw(st.lists(pairs, max_size=3))]
            builder.append(delta, ts, key, value, hs)
            written.append([offset + delta, ts, key, value, [(k.encode(), v) for k, v in hs]])
        entry = bytearray(builder.build())
        struct.pack_into(">q", entry, 0, offset)  # the broker's offset (not under the CRC)
        if n and draw(st.integers(0, 4)) == 0:  # LogAppendTime: every record reads the batch's time
            lat = draw(st.integers(0, 2**42))
            struct.pack_into(">h", entry, 21, struct.unpack_from(">h", entry, 21)[0] | 0x08)
            struct.pack_into(">q", entry, 35, lat)  # maxTimestamp holds the append time
            struct.pack_into(">I", entry, 17, crc32c_package.crc32c(bytes(entry[21:])))
            for record in written:
                record[1] = lat
        out += entry
        records += [tuple(r) for r in written]
        offset += max(n, 1) + draw(st.integers(0, 3))
    damage = draw(st.sampled_from(["none", "none", "flip", "flip under a crc", "count under a crc"]))
    if damage != "none":
        starts, at = [], 0
        while at < len(out):
            starts.append(at)
            at += 12 + struct.unpack_from(">i", out, at + 8)[0]
        start = draw(st.sampled_from(starts))
        end = start + 12 + struct.unpack_from(">i", out, start + 8)[0]
        if damage == "count under a crc":
            count = struct.unpack_from(">i", out, start + 57)[0]
            struct.pack_into(">i", out, start + 57, count + draw(st.sampled_from([-1, 1, 2**20])))
        else:
            out[draw(st.integers(start + 21, end - 1))] ^= draw(st.integers(1, 255))
        if damage != "flip":
            struct.pack_into(">I", out, start + 17, crc32c_package.crc32c(bytes(out[start + 21:end])))
        records = None
    return bytes(out), records


def _utf8(key: bytes) -> bool:
    try:
        key.decode()
        return True
    except UnicodeDecodeError:
        return False


@st.composite
def compressed_entries(draw):
    """(segment bytes, the records written) of compressed data entries built with kafka-python's
    builders (independent encoders) at the offsets a broker assigns: v2 batches (gzip, lz4) and v1
    wrappers (gzip) of 1..6 records with null keys and values, maybe one damaged (a byte changed in
    its compressed payload, its CRC made right again: then only the codec or the record parser can
    tell). Records as in plain_v2_batches (v1 records without headers), None when damaged."""
    import zlib

    import crc32c as crc32c_package
    from kafka.record.default_records import DefaultRecordBatchBuilder

    out, records, spans = bytearray(), [], []
    offset = draw(st.integers(0, 2**40))
    for _ in range(draw(st.integers(1, 6))):
        n = draw(st.integers(1, 6))
        kind = draw(st.sampled_from(["v2 gzip", "v2 lz4", "v1 gzip"]))
        base_ts = draw(st.integers(0, 2**42))
        written = []
        if kind.startswith("v2"):
            builder = DefaultRecordBatchBuilder(magic=2, compression_type=1 if kind == "v2 gzip" else 3,
                                                is_transactional=False, producer_id=-1, producer_epoch=-1,
                                                base_sequence=-1, batch_size=1 << 20)
        else:
            builder = LegacyRecordBatchBuilder(1, 1, 1 << 20)
        for delta in range(n):
            ts = base_ts + draw(st.integers(0, 1000))
            # values that compress, mostly: a builder leaves a batch uncompressed when it does not pay
            key, value = draw(maybe_bytes), draw(maybe_bytes | st.integers(8, 200).map(lambda k: b"ab" * k))
            if kind.startswith("v2"):
                builder.append(delta, ts, key, value, [])
            else:
                builder.append(delta, ts, key, value)
            written.append((offset + delta, ts, key, value, []))
        entry = bytearray(builder.build())
        # the broker's offset (outside the CRC): a v2 batch's base offset, a v1 wrapper's last inner one
        struct.pack_into(">q", entry, 0, offset if kind.startswith("v2") else offset + n - 1)
        spans.append((len(out), len(out) + len(entry), kind))
        out += entry
        records += written
        offset += n + draw(st.integers(0, 3))
    if draw(st.booleans()):
        start, end, kind = draw(st.sampled_from(spans))
        payload_at = start + (61 if kind.startswith("v2") else 34)  # v1: the value after its length
        if payload_at < end:
            out[draw(st.integers(payload_at, end - 1))] ^= draw(st.integers(1, 255))
            if kind.startswith("v2"):
                struct.pack_into(">I", out, start + 17, crc32c_package.crc32c(bytes(out[start + 21:end])))
            else:
                struct.pack_into(">I", out, start + 12, zlib.crc32(bytes(out[start + 16:end])))
            records = None
    return bytes(out), records
