"""kfmt dump: segment, index, snapshot and txn-index files as Kafka's kafka-dump-log.sh prints them
(Kafka 4.1's, or 3.6's with --kafka-version 3.6)."""
from __future__ import annotations

import io
import sys

from kfmt.cli._common import add_format_argument, add_storage_arguments
from kfmt.defaults import (
    DEFAULT_DUMP_KAFKA_VERSION,
    DEFAULT_DUMP_MAX_BYTES,
    DEFAULT_MAX_MESSAGE_SIZE,
    DUMP_KAFKA_VERSIONS,
)
from kfmt.errors import EXIT_DATA, KfmtError, UsageError

NAME = "dump"
HELP = ("print .log, .index, .timeindex, .snapshot, .txnindex and KRaft .checkpoint files exactly as "
        f"kafka-dump-log.sh (Kafka {DEFAULT_DUMP_KAFKA_VERSION}, or --kafka-version) does, internal topics "
        "decoded on request (--format json: structured)")


def add_arguments(p):
    p.add_argument("file_args", nargs="*", metavar="FILE",
                   help="files to dump, in order (local paths or fsspec URLs)")
    p.add_argument("--files", action="append", default=[], metavar="F1,F2,...",
                   help="comma-separated files, as kafka-dump-log takes them (after any FILE)")
    p.add_argument("--deep-iteration", action="store_true", help="print every record of every batch")
    p.add_argument("--print-data-log", action="store_true",
                   help="print keys and values too (implies --deep-iteration)")
    p.add_argument("--verify-index-only", action="store_true",
                   help="check .index/.timeindex entries against the log; print only the problems")
    p.add_argument("--index-sanity-check", action="store_true",
                   help="only run Kafka's index sanity check on .index/.timeindex files")
    p.add_argument("--skip-record-metadata", action="store_true",
                   help="leave out the per-record metadata of deep iteration")
    p.add_argument("--max-bytes", type=int, default=DEFAULT_DUMP_MAX_BYTES, metavar="N",
                   help="read only the first N bytes of each .log (a batch crossing N is not shown)")
    p.add_argument("--max-message-size", type=int, default=DEFAULT_MAX_MESSAGE_SIZE, metavar="N",
                   help="bytes read at each .index entry's position to check it "
                        f"(default {DEFAULT_MAX_MESSAGE_SIZE})")
    decoders = p.add_mutually_exclusive_group()
    decoders.add_argument("--offsets-decoder", dest="decoder", action="store_const", const="offsets",
                          help="decode __consumer_offsets records (implies --print-data-log)")
    decoders.add_argument("--transaction-log-decoder", dest="decoder", action="store_const",
                          const="transaction-log",
                          help="decode __transaction_state records (implies --print-data-log)")
    decoders.add_argument("--cluster-metadata-decoder", dest="decoder", action="store_const",
                          const="cluster-metadata",
                          help="decode KRaft __cluster_metadata records, in .log segments and "
                               ".checkpoint snapshots (implies --print-data-log)")
    decoders.add_argument("--share-group-state-decoder", dest="decoder", action="store_const",
                          const="share-group-state",
                          help="decode __share_group_state records (Kafka 4.x; implies --print-data-log)")
    decoders.add_argument("--remote-log-metadata-decoder", dest="decoder", action="store_const",
                          const="remote-log-metadata",
                          help="decode __remote_log_metadata records of tiered storage (Kafka 4.x; "
                               "implies --print-data-log)")
    p.add_argument("--kafka-version", choices=DUMP_KAFKA_VERSIONS, default=DEFAULT_DUMP_KAFKA_VERSION,
                   metavar="VERSION",
                   help="the Kafka version whose kafka-dump-log output to reproduce: "
                        f"{' or '.join(DUMP_KAFKA_VERSIONS)} (default {DEFAULT_DUMP_KAFKA_VERSION}, the "
                        "newest); it decides the internal topics' decoded text and the KRaft control "
                        "records' lines")
    add_format_argument(p)
    add_storage_arguments(p)


def run(args) -> int:
    from kfmt.inspect.dump import DumpOptions, dump_files
    from kfmt.inspect.dump.decoders import decoder_for
    from kfmt.inspect.dump.json_form import JsonSink
    from kfmt.inspect.dump.text import TextSink
    from kfmt.storage.store import parse_storage_options

    files = list(args.file_args) + [f for csv in args.files for f in csv.split(",") if f]
    if not files:
        raise UsageError("no files to dump: give FILE... or --files F1,F2")
    for flag in ("max_bytes", "max_message_size"):
        if getattr(args, flag) < 0:
            raise UsageError(f"--{flag.replace('_', '-')} must be >= 0")
    options = DumpOptions(
        deep_iteration=args.deep_iteration, print_data_log=args.print_data_log,
        verify_index_only=args.verify_index_only, index_sanity_check=args.index_sanity_check,
        skip_record_metadata=args.skip_record_metadata, max_bytes=args.max_bytes,
        max_message_size=args.max_message_size, decoder=args.decoder, kafka_version=args.kafka_version)
    if args.decoder is not None:
        decoder_for(args.decoder, args.kafka_version)  # a UsageError when that version has no such decoder
    out = _utf8(sys.stdout)
    sink = JsonSink(out, options) if args.format == "json" else TextSink(out, sys.stderr, options)
    try:
        clean = dump_files(files, options, sink, parse_storage_options(args.storage_option))
    except (KfmtError, OSError):
        out.flush()  # what was dumped before the error comes out before its message
        raise
    return 0 if clean else EXIT_DATA


def _utf8(stream):
    """Java prints through a UTF-8 stdout; so must we, whatever the locale says."""
    encoding = (getattr(stream, "encoding", None) or "utf-8").lower().replace("_", "-")
    if encoding not in ("utf-8", "utf8") and isinstance(stream, io.TextIOWrapper):
        stream.reconfigure(encoding="utf-8")
    return stream
