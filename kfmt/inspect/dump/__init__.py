"""`kfmt dump`: files printed exactly as Kafka's kafka-dump-log.sh prints them, Kafka 4.1's or 3.6's
(DumpOptions.kafka_version; docs/format.md §15).

    dump_files(["00000000000000000000.log", ...], DumpOptions(deep_iteration=True), sink)

Each file is dispatched on the text after the last '.' of its name, as DumpLogSegments does:
`.log` and `.checkpoint` (KRaft snapshot) -> log.py, `.index` / `.timeindex` -> indexes.py,
`.snapshot` -> producer_state.py, `.txnindex` -> txnindex.py, anything else is ignored with a
message. What is found goes to a Sink: text.TextSink (Kafka's text), json_form.JsonSink.
"""
from __future__ import annotations

from kfmt.inspect.dump.common import DumpOptions, DumpTarget, Sink
from kfmt.inspect.dump.indexes import dump_offset_index, dump_time_index
from kfmt.inspect.dump.log import dump_log
from kfmt.inspect.dump.producer_state import dump_snapshot
from kfmt.inspect.dump.txnindex import dump_txn_index

DUMPERS = {
    ".log": dump_log,
    ".checkpoint": dump_log,
    ".index": dump_offset_index,
    ".timeindex": dump_time_index,
    ".snapshot": dump_snapshot,
    ".txnindex": dump_txn_index,
}


def dump_files(files: list[str], options: DumpOptions, sink: Sink,
               storage_options: dict | None = None) -> bool:
    """Dump each file in order, then let the sink summarise. Returns False when a file held bad
    data that Kafka's tool reports and goes on from (a corrupt snapshot); bad data it throws on
    raises DataError, ending the run there as it ends Kafka's."""
    clean = True
    targets = [DumpTarget.open(arg, storage_options or {}) for arg in files]
    for target in targets:  # a directory is no file Kafka's tool can dump: refused before any output
        if target.storage.exists(target.path) and target.storage.isdir(target.path):
            target.require()
    for target in targets:
        sink.begin_file(target)
        dumper = DUMPERS.get(target.suffix)
        if dumper is None:
            sink.unknown_file(target)
            continue
        if dumper(target, options, sink) is False:
            clean = False
    sink.finish()
    return clean


__all__ = ["DumpOptions", "DumpTarget", "Sink", "dump_files"]
