"""kfmt restore URL DST: a generation of an archive back to a broker-ready directory, companion files
regenerated as Kafka's log recovery builds them (kfmt.transforms.archive.restore, docs/archive.md);
`--list-generations` lists the generations instead."""
from __future__ import annotations

import sys
import time

from kfmt.cli._common import dumps
from kfmt.cli._transform import (
    add_companion_arguments,
    add_target_arguments,
    add_transform_arguments,
    companion_arguments,
    print_outcome,
    run_arguments,
    target_arguments,
)
from kfmt.errors import UsageError
from kfmt.storage.store import parse_storage_options

NAME = "restore"
HELP = ("restore a generation of an archive (kfmt archive) to a broker-ready partition or log directory, "
        "checksums checked and companion files regenerated as Kafka's log recovery builds them")


def add_arguments(p):
    add_transform_arguments(p, src=("URL", "a published archive (fsspec URL or local path); only read"),
                            dst=("DST", "where to write (must not exist, or be empty); not with "
                                        "--list-generations"), include_deleted=True)
    next(a for a in p._actions if a.dest == "dst").nargs = "?"
    p.add_argument("--generation", type=int, metavar="N",
                   help="the generation to restore (default: the latest)")
    p.add_argument("--list-generations", action="store_true",
                   help="list the archive's generations (number, time, offsets per partition); DST not given")
    add_target_arguments(p)
    add_companion_arguments(p)


def run(args) -> int:
    from kfmt.api.commands import archive_generations, restore
    from kfmt.partition.log_start import left_out_suffix
    from kfmt.pipelines.engine import engine_note

    if args.list_generations:
        if args.dst is not None:
            raise UsageError("--list-generations takes no DST")
        generations = archive_generations(args.src, storage_options=parse_storage_options(args.storage_option))
        _print_generations(generations, args.format == "json")
        return 0
    if args.dst is None:
        raise UsageError("DST is required (or --list-generations)")
    outcome = restore(args.src, args.dst, generation=args.generation, **companion_arguments(args),
                      **run_arguments(args), **target_arguments(args))
    result = outcome.plan  # the RestoreResultSet: its plan and the archive restored
    return print_outcome(result, None if outcome.is_plan else outcome, args.format == "json",
                         lambda r: f"restored generation {r['archive']['generation']}: "
                                   f"{r['totals']['partitions']} partition(s), "
                                   f"{r['totals']['output_batches']} batches, {r['totals']['output_records']} "
                                   f"records, content digests equal to the archive's, into "
                                   f"{result.plan.destination}{engine_note(r)}{left_out_suffix(r)}")


def _print_generations(generations: list[dict], as_json: bool) -> None:
    out = sys.stdout
    for g in generations:
        if as_json:
            out.write(dumps(g) + "\n")
            continue
        created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime((g["created_ms"] or 0) / 1000))
        offsets = ", ".join(f"{p['dir'] or '.'} {p['log_start_offset']}..{p['next_offset']}"
                            for p in g["partitions"])
        out.write(f"{g['generation']}\t{created}\t{'latest' if g['latest'] else ''}\t"
                  f"{sum(p['segments'] for p in g['partitions'])} segment(s), "
                  f"{sum(p['records'] for p in g['partitions'])} records\t{offsets}\n")
