"""kfmt restore URL DST: an archive back to a broker-ready directory, companion files regenerated as
Kafka's log recovery builds them (kfmt.pipelines.restore, docs/archive.md)."""
from __future__ import annotations

import sys

from kfmt.cli._common import dumps
from kfmt.cli._transform import add_transform_arguments, storage_options
from kfmt.companions import DEFAULT_INDEX_INTERVAL_BYTES
from kfmt.errors import UsageError
from kfmt.producer_state import DEFAULT_PRODUCER_EXPIRATION_MS
from kfmt.reindex import ReindexOptions

NAME = "restore"
HELP = ("restore an archive (kfmt archive) to a broker-ready partition or log directory, checksums "
        "checked and companion files regenerated as Kafka's log recovery builds them")


def add_arguments(p):
    add_transform_arguments(p, src=("URL", "a published archive (fsspec URL or local path); only read"))
    p.add_argument("--index-interval-bytes", type=int, default=DEFAULT_INDEX_INTERVAL_BYTES, metavar="N",
                   help="the topic's index.interval.bytes: bytes of log between index entries "
                        f"(default {DEFAULT_INDEX_INTERVAL_BYTES})")
    p.add_argument("--now", type=int, metavar="MS", dest="now_ms",
                   help="the wall clock, in epoch milliseconds, that producer expiry is judged against "
                        "(default: now); a broker drops idle producers whenever it reloads a snapshot")
    p.add_argument("--producer-expiration-ms", type=int, default=DEFAULT_PRODUCER_EXPIRATION_MS,
                   metavar="MS", help="the broker's producer.id.expiration.ms "
                                      f"(default {DEFAULT_PRODUCER_EXPIRATION_MS})")


def run(args) -> int:
    from kfmt.pipelines.restore import restore

    if args.index_interval_bytes < 0:
        raise UsageError("--index-interval-bytes must be >= 0")
    if args.producer_expiration_ms < 1:
        raise UsageError("--producer-expiration-ms must be >= 1")
    src_options, dst_options = storage_options(args)
    options = ReindexOptions(args.index_interval_bytes, args.now_ms, args.producer_expiration_ms)
    result = restore(args.src, args.dst, src_options=src_options, dst_options=dst_options,
                     topic=args.topic, partition=args.partition, options=options, master=args.master,
                     dry_run=args.dry_run, progress=not args.no_progress)
    out = sys.stdout
    if result.report is None:  # dry run
        out.write(dumps(result.to_json()) + "\n" if args.format == "json"
                  else "\n".join(result.lines()) + "\n")
        return 0
    if args.format == "json":
        out.write(dumps(result.report) + "\n")
        return 0
    t = result.report["totals"]
    out.write(f"restored {t['partitions']} partition(s): {t['output_batches']} batches, "
              f"{t['output_records']} records, content digests equal to the archive's, into "
              f"{result.plan.destination}\n")
    return 0
