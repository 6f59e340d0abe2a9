"""The transaction index `.txnindex`: one 34-byte entry per aborted transaction (docs/format.md §7).

    version int16 (0) | producerId int64 | firstOffset int64 | lastOffset int64 (the ABORT marker)
    | lastStableOffset int64

An entry lives in the segment that holds the abort marker. Trailing bytes short of an entry are ignored.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

ENTRY = struct.Struct(">hqqqq")


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int
    version: int = 0


def read_txn_index(data) -> list[AbortedTxn]:
    n = len(data) // ENTRY.size
    return [AbortedTxn(pid, first, last, lso, version)
            for version, pid, first, last, lso in ENTRY.iter_unpack(memoryview(data)[:n * ENTRY.size])]


def write_txn_index(entries) -> bytes:
    return b"".join(ENTRY.pack(e.version, e.producer_id, e.first_offset, e.last_offset,
                               e.last_stable_offset) for e in entries)
