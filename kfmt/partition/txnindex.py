"""The transaction index `.txnindex`: one entry per aborted transaction (docs/format.md §7), as
kfmt.format.layout declares it (TXN_INDEX_ENTRY: version int16 0, producerId int64, firstOffset int64,
lastOffset int64 (the ABORT marker), lastStableOffset int64; 34 bytes).

An entry lives in the segment that holds the abort marker. Trailing bytes short of an entry are ignored.
"""
from __future__ import annotations

from dataclasses import dataclass

from kfmt.format.layout import TXN_INDEX_ENTRY

ENTRY = TXN_INDEX_ENTRY.struct
VERSION_AT = TXN_INDEX_ENTRY.at("version")


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
