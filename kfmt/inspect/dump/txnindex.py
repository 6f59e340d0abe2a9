"""Dumping a `.txnindex` as kafka-dump-log does (docs/format.md §7, §15.2).

Kafka's TransactionIndex reads whole 34-byte entries (a shorter tail is ignored) and takes the
version from the entry's first byte alone; a version above 0 throws, after the entries before it
were printed.
"""
from __future__ import annotations

from kfmt.errors import DataError
from kfmt.format.wire import INT8
from kfmt.inspect.dump.common import DumpOptions, DumpTarget, Sink
from kfmt.partition.txnindex import ENTRY, VERSION_AT, AbortedTxn

CURRENT_VERSION = 0


def dump_txn_index(target: DumpTarget, options: DumpOptions, sink: Sink) -> None:
    # UnifiedLog.offsetFromFile: the name must start with an offset
    sink.describe_file(target, "txnindex", baseOffset=target.base_offset())
    target.require()
    data = target.read_all()
    for i in range(len(data) // ENTRY.size):
        at = i * ENTRY.size
        # TransactionIndex reads the version's first byte only (docs/format.md §7)
        version = INT8.unpack_from(data, at + VERSION_AT)[0]
        if version > CURRENT_VERSION:
            raise DataError(f"Unexpected aborted transaction version {version} in transaction index "
                            f"{target.absolute}, current version is {CURRENT_VERSION}",
                            file=target.display, position=at)
        _, producer_id, first, last, lso = ENTRY.unpack_from(data, at)
        sink.aborted_txn(target, version, AbortedTxn(producer_id, first, last, lso, version))
