"""kfmt archive SRC URL: what is new in partition directories added to an archive, published as a new
generation of its manifest (kfmt.transforms.archive.upload, docs/archive.md)."""
from __future__ import annotations

import sys

from kfmt.cli._common import dumps
from kfmt.cli._transform import add_fail_on_loss_argument, add_transform_arguments, loss_exit, run_arguments

NAME = "archive"
HELP = ("copy partition directories to object storage with a manifest (sizes, checksums, offset and "
        "time ranges, content digests); each run adds what is new as a new generation")


def add_arguments(p):
    add_transform_arguments(p, dst=("URL", "where the archive goes (an fsspec URL such as "
                                           "s3://bucket/prefix, or a local path): empty, or an "
                                           "archive of SRC to add to"))
    active = p.add_mutually_exclusive_group()
    active.add_argument("--include-active", dest="include_active", action="store_const", const=True,
                        help="archive each partition's active (last) segment, up to its last complete "
                             "batch, even on a running broker (a later run replaces it)")
    active.add_argument("--exclude-active", dest="include_active", action="store_const", const=False,
                        help="leave each partition's active segment for the next run, even where no "
                             "broker runs. By default it is archived unless a broker holds the lock on "
                             "the log directory's .lock file")
    add_fail_on_loss_argument(p)
    p.add_argument("--prune", action="store_true",
                   help="the new generation follows SRC's log start offset: segments SRC no longer holds "
                        "(retention) leave it (older generations keep them); by default they stay")


def run(args) -> int:
    from kfmt.api.commands import archive
    from kfmt.pipelines.engine import engine_note
    from kfmt.transforms.losses import summary_suffix

    outcome = archive(args.src, args.dst, include_active=args.include_active, prune=args.prune,
                      **run_arguments(args))
    result, plan, out = outcome.detail, outcome.plan, sys.stdout
    if args.dry_run:
        out.write(dumps(outcome) + "\n" if args.format == "json" else "\n".join(plan.lines()) + "\n")
        return 0
    left = ", ".join(left.phrase() for left in plan.left())
    if left:
        left = f"; left for the next run, the active segments of a running broker ({plan.active.why}): {left}"
    if result.report is None:  # nothing new
        if args.format == "json":
            out.write(dumps(outcome) + "\n")
        else:
            out.write(f"{plan.plan.destination}: nothing new since generation {result.generation}; "
                      f"nothing uploaded, no generation published{left}\n")
        return 0
    report = result.report
    if args.format == "json":
        out.write(dumps(report) + "\n")
        return loss_exit(args, report)
    files = report["transfer"]["files"]
    segments = sum(p["segments"] for p in report["outputs"])
    records = sum(p["records"] for p in report["outputs"])
    out.write(f"published generation {report['generation']} of {plan.plan.destination}: "
              f"{report['totals']['partitions']} partition(s), {segments} segment(s), {records} records; "
              f"{files['uploaded'] + files['reuploaded']} file(s) uploaded "
              f"({report['transfer']['bytes_uploaded']} bytes), {files['verified']} left by a killed run "
              f"and verified, {files['unchanged'] + files['archived']} already archived"
              f"{engine_note(report)}{left}{summary_suffix(report['lost'])}\n")
    return loss_exit(args, report)
