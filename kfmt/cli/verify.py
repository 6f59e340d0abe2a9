"""kfmt verify: check every file of a partition or log directory; exit 65 listing every problem."""
from __future__ import annotations

import json
import sys

from kfmt.cli._common import add_format_argument, add_path_arguments, add_progress_argument
from kfmt.cli._transform import show_progress
from kfmt.errors import EXIT_DATA, EXIT_OK
from kfmt.storage.store import parse_storage_options

NAME = "verify"
HELP = ("check framing, CRCs, offsets, records, indexes, txn index, snapshots and checkpoints; "
        "exit 65 listing every problem")


def add_arguments(p):
    add_path_arguments(p)
    add_format_argument(p)
    add_progress_argument(p)
    p.add_argument("--cluster-metadata", metavar="DIR",
                   help="a copy of a KRaft cluster's metadata log (its __cluster_metadata-0, or the log "
                        "directory holding it): note every partition its brokers would set aside as a "
                        "stray (default: a log directory's own metadata log, if it has one)")
    p.add_argument("--no-notes", action="store_true",
                   help="leave out notes (genuine broker behaviour that is not a problem) in text output")


def run(args) -> int:
    from kfmt.api.commands import verify

    outcome = verify(args.path, storage_options=parse_storage_options(args.storage_option), topic=args.topic,
                     partition=args.partition, progress=show_progress(args),
                     cluster_metadata=args.cluster_metadata)
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
                  f"{s['records']} records, {s['files']} files\n")
    out.flush()
    return EXIT_OK if report.ok else EXIT_DATA
