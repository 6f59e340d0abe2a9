"""kfmt verify: check every file of a partition or log directory; exit 65 listing every problem."""
from __future__ import annotations

import json
import sys

from kfmt.cli._common import add_format_argument, add_path_arguments, add_progress_argument
from kfmt.cli._transform import show_progress
from kfmt.errors import EXIT_DATA, EXIT_OK
from kfmt.storage.store import parse_storage_options

NAME = "verify"
HELP = ("check what a broker's log recovery checks (framing, CRCs over the stored bytes, offsets), "
        "indexes, txn index, snapshots and checkpoints -- with --deep every record too; exit 65 listing "
        "every problem")


def add_arguments(p):
    add_path_arguments(p)
    add_format_argument(p)
    add_progress_argument(p)
    p.add_argument("--cluster-metadata", metavar="DIR",
                   help="a copy of a KRaft cluster's metadata log (its __cluster_metadata-0, or the log "
                        "directory holding it): note every partition its brokers would set aside as a "
                        "stray (default: a log directory's own metadata log, if it has one)")
    p.add_argument("--deep", action="store_true",
                   help="also inflate every compressed batch and check its records (offsets, timestamps, "
                        "inner messages' CRCs), as kafka-dump-log --deep-iteration reads them; the default "
                        "checks what a broker's log recovery does, compressed batches by their CRC")
    p.add_argument("--no-notes", action="store_true",
                   help="leave out notes (genuine broker behaviour that is not a problem) in text output")


def run(args) -> int:
    from kfmt.api.commands import verify

    outcome = verify(args.path, storage_options=parse_storage_options(args.storage_option), topic=args.topic,
                     partition=args.partition, progress=show_progress(args),
                     cluster_metadata=args.cluster_metadata, deep=args.deep)
    report, out = outcome.detail, sys.stdout
    if args.format == "json":
        out.write(json.dumps(outcome, indent=1))
        out.write("\n")
    else:
        for problem in report.problems:
            if problem.is_error or not args.no_notes:
                out.write(problem.text())
                out.write("\n")
        s = report.summary()
        out.write(f"{'OK' if s['ok'] else 'FAILED'}: {s['errors']} problem(s), {s['notes']} note(s) in "
                  f"{s['partitions']} partition(s), {s['segments']} segment(s), {s['batches']} batches, "
                  f"{s['records']} records{_uncounted(s)}, {s['files']} files; {_depth(s)}\n")
    out.flush()
    return EXIT_OK if report.ok else EXIT_DATA


def _uncounted(summary: dict) -> str:
    n = summary["uncounted_wrappers"]
    return f" (and {n} compressed v0/v1 wrapper(s) whose records --deep counts)" if n else ""


def _depth(summary: dict) -> str:
    if summary["depth"] == "deep":
        return "deep: every record checked"
    return "checked as log recovery checks (--deep: every record too)"
