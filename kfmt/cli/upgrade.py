"""kfmt upgrade: message formats v0/v1 to v2 by Kafka 4.0's own conversion rules, on Spark
(kfmt.pipelines.upgrade). Also the glue the three Spark transforms share (upgrade, resegment,
recompress): the companion-file arguments and running a transform with the CLI's output."""
from __future__ import annotations

import sys

from kfmt.cli._common import dumps
from kfmt.cli._transform import add_transform_arguments, storage_options
from kfmt.companions import DEFAULT_INDEX_INTERVAL_BYTES
from kfmt.producer_state import DEFAULT_PRODUCER_EXPIRATION_MS

NAME = "upgrade"
HELP = ("convert message formats v0/v1 to v2 by Kafka 4.0's rules (offsets kept, one v2 batch per "
        "legacy entry, v2 batches copied), with every companion file regenerated")


def add_arguments(p):
    add_transform_arguments(p)
    p.add_argument("--rebatch", action="store_true",
                   help="group consecutive uncompressed legacy messages into larger v2 batches (smaller "
                        "output, offsets still kept) instead of Kafka's one batch per message")
    p.add_argument("--max-batch-bytes", type=int, metavar="N",
                   help="with --rebatch: the largest batch to make (default 1048588, Kafka's "
                        "message.max.bytes)")
    add_companion_arguments(p)


def run(args) -> int:
    from kfmt.pipelines.upgrade import DEFAULT_MAX_BATCH_BYTES, upgrade
    from kfmt.errors import UsageError

    if args.max_batch_bytes is not None and not args.rebatch:
        raise UsageError("--max-batch-bytes only applies with --rebatch")
    return run_transform_command(args, upgrade, rebatch=args.rebatch,
                                 max_batch_bytes=args.max_batch_bytes or DEFAULT_MAX_BATCH_BYTES)


def add_companion_arguments(p) -> None:
    """How the regenerated companion files are built (kfmt.companions)."""
    p.add_argument("--index-interval-bytes", type=int, default=DEFAULT_INDEX_INTERVAL_BYTES, metavar="N",
                   help="the topic's index.interval.bytes: bytes of log between index entries "
                        f"(default {DEFAULT_INDEX_INTERVAL_BYTES})")
    p.add_argument("--now", type=int, metavar="MS", dest="now_ms",
                   help="the wall clock, in epoch milliseconds, that producer expiry is judged against "
                        "(default: now); a broker drops idle producers whenever it reloads a snapshot")
    p.add_argument("--producer-expiration-ms", type=int, default=DEFAULT_PRODUCER_EXPIRATION_MS,
                   metavar="MS", help="the broker's producer.id.expiration.ms "
                                      f"(default {DEFAULT_PRODUCER_EXPIRATION_MS})")


def run_transform_command(args, transform, **options) -> int:
    """Run a Spark transform (kfmt.pipelines) for the arguments add_transform_arguments and
    add_companion_arguments defined; print the plan (--dry-run) or what was written."""
    from kfmt.pipelines.transform import CompanionOptions, summary_line

    src_options, dst_options = storage_options(args)
    companions = CompanionOptions(args.index_interval_bytes, args.now_ms, args.producer_expiration_ms)
    plan, report = transform(args.src, args.dst, companions=companions, src_options=src_options,
                             dst_options=dst_options, topic=args.topic, partition=args.partition,
                             master=args.master, dry_run=args.dry_run, progress=not args.no_progress,
                             **options)
    out = sys.stdout
    if report is None:  # dry run
        out.write(dumps(plan.to_json()) + "\n" if args.format == "json" else "\n".join(plan.lines()) + "\n")
    elif args.format == "json":
        out.write(dumps(report) + "\n")
    else:
        out.write(summary_line(report, plan.layout.destination) + "\n")
    return 0
