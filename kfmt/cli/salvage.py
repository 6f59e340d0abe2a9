"""kfmt salvage: every intact batch of a damaged partition (or log) directory, written into a
broker-ready one, with a report of every byte range dropped and the offsets it may have held
(kfmt.transforms.salvage). Exit 0 when DST was written, whatever was dropped: the report says what."""
from __future__ import annotations

import sys

from kfmt.cli._common import dumps
from kfmt.cli._transform import (
    add_companion_arguments,
    add_target_arguments,
    add_transform_arguments,
    companion_arguments,
    run_arguments,
    target_arguments,
)
from kfmt.pipelines.engine import engine_note

NAME = "salvage"
HELP = ("recover every intact batch of a damaged partition directory into a broker-ready one, "
        "reporting every byte range dropped and the offsets affected")


def add_arguments(p):
    add_transform_arguments(p)
    add_companion_arguments(p)
    add_target_arguments(p)


def run(args) -> int:
    from kfmt.api.commands import salvage
    from kfmt.transforms.report import REPORT_NAME

    report = salvage(args.src, args.dst, **companion_arguments(args), **run_arguments(args),
                     **target_arguments(args))
    plan, out = report.plan, sys.stdout
    if args.format == "json":
        out.write(dumps(report) + "\n")
        return 0
    for line in text_lines(report):
        out.write(line + "\n")
    if args.dry_run:
        out.write(f"dry run: nothing written to {plan.destination}\n")
    else:
        out.write(f"written to {plan.destination} (report: {REPORT_NAME}){engine_note(report)}\n")
    return 0


def text_lines(report: dict):
    for part in report["salvage"]["partitions"]:
        found = next(p for p in report["inputs"] if p["path"] == part["source"])
        kept = part["kept"]
        yield (f"{part['name']}: kept {kept['batches']} of {found['batches']} intact batches "
               f"({kept['records']} records); dropped {len(part['dropped'])} range(s), "
               f"{part['dropped_bytes']} bytes; offsets affected: {_ranges(part['affected_offsets'])}")
        for d in part["dropped"]:
            yield (f"  dropped {d['file']} [{d['start']}, {d['end']}) {d['bytes']} bytes, {d['kind']}: "
                   f"{d['reason']}; offsets affected: {_ranges(d['offsets'])}")
        for m in part["moved"]:
            yield f"  moved {m}"
        for s in part["skipped_files"]:
            yield f"  skipped {s}"
    for note in report["notes"][1:]:
        yield f"note: {note}"


def _ranges(ranges: list[dict]) -> str:
    """Offset ranges as text: "10..19, 500.." (an open end: to the end of the log)."""
    return ", ".join(f"{r['first']}..{'' if r['last'] is None else r['last']}" for r in ranges) or "none"
