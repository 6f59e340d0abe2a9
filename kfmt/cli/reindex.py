"""kfmt reindex: copy partitions with their index, snapshot and checkpoint files regenerated exactly
as Kafka's log recovery builds them (kfmt.reindex)."""
from __future__ import annotations

import sys

from kfmt.cli._common import (add_format_argument, add_progress_argument, add_storage_arguments, dumps,
                              progress)
from kfmt.companions import DEFAULT_INDEX_INTERVAL_BYTES
from kfmt.errors import UsageError
from kfmt.producer_state import DEFAULT_PRODUCER_EXPIRATION_MS
from kfmt.reindex import ReindexOptions, reindex
from kfmt.storage import parse_storage_options

NAME = "reindex"
HELP = ("copy partitions with .index, .timeindex, .txnindex, producer snapshots and "
        "leader-epoch-checkpoint regenerated as Kafka's log recovery builds them")


def add_arguments(p):
    p.add_argument("src", metavar="SRC", help="a partition directory or a log directory (local path or "
                                              "fsspec URL); only read")
    p.add_argument("dst", metavar="DST", help="where to write (must not exist, or be empty)")
    add_storage_arguments(p)
    p.add_argument("--dst-storage-option", action="append", metavar="KEY=VALUE",
                   help="fsspec storage option for DST (repeatable; default: the --storage-option values)")
    p.add_argument("--topic", metavar="GLOB", help="only topics matching this glob (log directories)")
    p.add_argument("--partition", type=int, metavar="N", help="only this partition number")
    p.add_argument("--index-interval-bytes", type=int, default=DEFAULT_INDEX_INTERVAL_BYTES, metavar="N",
                   help="the topic's index.interval.bytes: bytes of log between index entries "
                        f"(default {DEFAULT_INDEX_INTERVAL_BYTES})")
    p.add_argument("--now", type=int, metavar="MS", dest="now_ms",
                   help="the wall clock, in epoch milliseconds, that producer expiry is judged against "
                        "(default: now); a broker drops idle producers whenever it reloads a snapshot")
    p.add_argument("--producer-expiration-ms", type=int, default=DEFAULT_PRODUCER_EXPIRATION_MS,
                   metavar="MS", help="the broker's producer.id.expiration.ms "
                                      f"(default {DEFAULT_PRODUCER_EXPIRATION_MS})")
    p.add_argument("--dry-run", action="store_true", help="print the plan and write nothing")
    add_format_argument(p)
    add_progress_argument(p)


def run(args) -> int:
    if args.index_interval_bytes < 0:
        raise UsageError("--index-interval-bytes must be >= 0")
    if args.producer_expiration_ms < 1:
        raise UsageError("--producer-expiration-ms must be >= 1")
    src_options = parse_storage_options(args.storage_option)
    dst_options = (parse_storage_options(args.dst_storage_option)
                   if args.dst_storage_option is not None else src_options)
    options = ReindexOptions(args.index_interval_bytes, args.now_ms, args.producer_expiration_ms)
    with progress(args, unit="B", unit_scale=True, desc="reindex") as bar:
        plan, report = reindex(args.src, args.dst, src_options=src_options, dst_options=dst_options,
                               topic=args.topic, partition=args.partition, options=options,
                               dry_run=args.dry_run, on_progress=bar.update)
    out = sys.stdout
    if report is None:  # dry run
        out.write(dumps(plan.to_json()) + "\n" if args.format == "json" else "\n".join(plan.lines()) + "\n")
        return 0
    if args.format == "json":
        out.write(dumps(report) + "\n")
    else:
        t = report["totals"]
        out.write(f"reindexed {t['partitions']} partition(s): {t['input_batches']} batches, "
                  f"{t['input_records']} records, into {plan.destination}\n")
    return 0
