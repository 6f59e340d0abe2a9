"""kfmt archive SRC URL: partition directories to object storage with a manifest written last;
re-running resumes (kfmt.transforms.archive.upload, docs/archive.md)."""
from __future__ import annotations

import sys
import time

from kfmt.cli._common import dumps
from kfmt.cli._transform import add_transform_arguments, run_arguments

NAME = "archive"
HELP = ("copy partition directories to object storage with a manifest (sizes, checksums, offset and "
        "time ranges, content digests); re-running resumes")


def add_arguments(p):
    add_transform_arguments(p, dst=("URL", "where the archive goes (an fsspec URL such as "
                                           "s3://bucket/prefix, or a local path): empty, or an "
                                           "unfinished archive of SRC to resume"))


def run(args) -> int:
    from kfmt.api.commands import archive
    from kfmt.pipelines.engine import engine_note

    outcome = archive(args.src, args.dst, **run_arguments(args))
    result, plan, out = outcome.detail, outcome.plan, sys.stdout
    if args.dry_run:
        out.write(dumps(outcome) + "\n" if args.format == "json" else "\n".join(plan.lines()) + "\n")
        return 0
    if result.report is None:  # already complete
        published = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime((result.published_ms or 0) / 1000))
        if args.format == "json":
            out.write(dumps(outcome) + "\n")
        else:
            out.write(f"{plan.plan.destination}: already a complete archive of these files (published "
                      f"{published}); nothing to do\n")
        return 0
    report = result.report
    if args.format == "json":
        out.write(dumps(report) + "\n")
        return 0
    t, files = report["totals"], report["transfer"]["files"]
    segments = sum(p["segments"] for p in report["inputs"])
    out.write(f"archived {t['partitions']} partition(s), {segments} segment(s), {t['input_records']} "
              f"records into {plan.plan.destination}: {files['uploaded']} file(s) uploaded, "
              f"{files['verified']} already there and verified, {files['reuploaded']} damaged and "
              f"uploaded again{engine_note(report)}\n")
    return 0
