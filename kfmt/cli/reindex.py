"""kfmt reindex: copy partitions with their index, snapshot and checkpoint files regenerated exactly
as Kafka's log recovery builds them (kfmt.transforms.reindex)."""
from __future__ import annotations

from kfmt.cli._transform import (
    add_companion_arguments,
    add_deep_argument,
    add_target_arguments,
    add_transform_arguments,
    companion_arguments,
    print_outcome,
    run_arguments,
    target_arguments,
)
from kfmt.pipelines.engine import engine_note

NAME = "reindex"
HELP = ("copy partitions with .index, .timeindex, .txnindex, producer snapshots and "
        "leader-epoch-checkpoint regenerated as Kafka's log recovery builds them")


def add_arguments(p):
    add_transform_arguments(p, include_deleted=True)
    add_deep_argument(p)
    add_target_arguments(p)
    add_companion_arguments(p)


def run(args) -> int:
    from kfmt.api.commands import reindex
    from kfmt.partition.log_start import left_out_suffix  # numpy: only when the command runs

    result = reindex(args.src, args.dst, deep=args.deep, **companion_arguments(args), **run_arguments(args),
                     **target_arguments(args))
    plan = result.plan
    return print_outcome(plan, None if result.is_plan else result, args.format == "json",
                         lambda r: f"reindexed {r['totals']['partitions']} partition(s): "
                                   f"{r['totals']['input_batches']} batches, {r['totals']['input_records']} "
                                   f"records, into {plan.destination}{engine_note(r)}{left_out_suffix(r)}")
