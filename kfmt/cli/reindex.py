"""kfmt reindex: copy partitions with their index, snapshot and checkpoint files regenerated exactly
as Kafka's log recovery builds them (kfmt.reindex)."""
from __future__ import annotations

import sys

from kfmt.cli._common import dumps, progress
from kfmt.cli._transform import add_companion_arguments, add_transform_arguments, companion_options, run_arguments
from kfmt.reindex import reindex

NAME = "reindex"
HELP = ("copy partitions with .index, .timeindex, .txnindex, producer snapshots and "
        "leader-epoch-checkpoint regenerated as Kafka's log recovery builds them")


def add_arguments(p):
    add_transform_arguments(p, spark=False)
    add_companion_arguments(p)


def run(args) -> int:
    with progress(args, unit="B", unit_scale=True, desc="reindex") as bar:
        plan, report = reindex(args.src, args.dst, options=companion_options(args),
                               **run_arguments(args, spark=False), on_progress=bar.update)
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
