"""kfmt archive SRC URL: what is new in partition directories added to an archive, published as a new
generation of its manifest (kfmt.transforms.archive.upload, docs/archive.md)."""
from __future__ import annotations

import sys

from kfmt.cli._common import dumps
from kfmt.cli._transform import add_deep_argument, add_transform_arguments, run_arguments

NAME = "archive"
HELP = ("copy partition directories to object storage with a manifest (sizes, checksums, offset and "
        "time ranges, content digests); each run adds what is new as a new generation")


def add_arguments(p):
    add_transform_arguments(p, dst=("URL", "where the archive goes (an fsspec URL such as "
                                           "s3://bucket/prefix, or a local path): empty, or an "
                                           "archive of SRC to add to"))
    p.add_argument("--include-active", action="store_true",
                   help="archive each partition's active (last) segment too, up to its last complete "
                        "batch (a later run replaces it); by default only rolled segments are archived")
    p.add_argument("--prune", action="store_true",
                   help="the new generation follows SRC's log start offset: segments SRC no longer holds "
                        "(retention) leave it (older generations keep them); by default they stay")
    add_deep_argument(p)


def run(args) -> int:
    from kfmt.api.commands import archive
    from kfmt.pipelines.engine import engine_note

    outcome = archive(args.src, args.dst, include_active=args.include_active, prune=args.prune,
                      deep=args.deep, **run_arguments(args))
    result, plan, out = outcome.detail, outcome.plan, sys.stdout
    if args.dry_run:
        out.write(dumps(outcome) + "\n" if args.format == "json" else "\n".join(plan.lines()) + "\n")
        return 0
    if result.report is None:  # nothing new
        if args.format == "json":
            out.write(dumps(outcome) + "\n")
        else:
            out.write(f"{plan.plan.destination}: nothing new since generation {result.generation}; "
                      f"nothing uploaded, no generation published\n")
        return 0
    report = result.report
    if args.format == "json":
        out.write(dumps(report) + "\n")
        return 0
    files = report["transfer"]["files"]
    segments = sum(p["segments"] for p in report["outputs"])
    records = sum(p["records"] for p in report["outputs"])
    out.write(f"published generation {report['generation']} of {plan.plan.destination}: "
              f"{report['totals']['partitions']} partition(s), {segments} segment(s), {records} records; "
              f"{files['uploaded'] + files['reuploaded']} file(s) uploaded "
              f"({report['transfer']['bytes_uploaded']} bytes), {files['verified']} left by a killed run "
              f"and verified, {files['unchanged'] + files['archived']} already archived"
              f"{engine_note(report)}\n")
    return 0
