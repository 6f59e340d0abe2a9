"""kfmt restore URL DST: an archive back to a broker-ready directory, companion files regenerated as
Kafka's log recovery builds them (kfmt.transforms.archive.restore, docs/archive.md)."""
from __future__ import annotations

from kfmt.cli._transform import (
    add_companion_arguments,
    add_transform_arguments,
    companion_arguments,
    print_outcome,
    run_arguments,
)

NAME = "restore"
HELP = ("restore an archive (kfmt archive) to a broker-ready partition or log directory, checksums "
        "checked and companion files regenerated as Kafka's log recovery builds them")


def add_arguments(p):
    add_transform_arguments(p, src=("URL", "a published archive (fsspec URL or local path); only read"))
    add_companion_arguments(p)


def run(args) -> int:
    from kfmt.api.commands import restore
    from kfmt.pipelines.engine import engine_note

    outcome = restore(args.src, args.dst, **companion_arguments(args), **run_arguments(args))
    result = outcome.plan  # the RestoreResultSet: its plan and the archive restored
    return print_outcome(result, None if outcome.is_plan else outcome, args.format == "json",
                         lambda r: f"restored {r['totals']['partitions']} partition(s): "
                                   f"{r['totals']['output_batches']} batches, {r['totals']['output_records']} "
                                   f"records, content digests equal to the archive's, into "
                                   f"{result.plan.destination}{engine_note(r)}")
