"""kfmt restore URL DST: an archive back to a broker-ready directory, companion files regenerated as
Kafka's log recovery builds them (kfmt.pipelines.restore, docs/archive.md)."""
from __future__ import annotations

import sys

from kfmt.cli._common import dumps
from kfmt.cli._transform import add_companion_arguments, add_transform_arguments, companion_options, run_arguments

NAME = "restore"
HELP = ("restore an archive (kfmt archive) to a broker-ready partition or log directory, checksums "
        "checked and companion files regenerated as Kafka's log recovery builds them")


def add_arguments(p):
    add_transform_arguments(p, src=("URL", "a published archive (fsspec URL or local path); only read"))
    add_companion_arguments(p)


def run(args) -> int:
    from kfmt.pipelines.restore import restore

    result = restore(args.src, args.dst, options=companion_options(args), **run_arguments(args))
    out = sys.stdout
    if result.report is None:  # dry run
        out.write(dumps(result.to_json()) + "\n" if args.format == "json"
                  else "\n".join(result.lines()) + "\n")
        return 0
    if args.format == "json":
        out.write(dumps(result.report) + "\n")
        return 0
    t = result.report["totals"]
    out.write(f"restored {t['partitions']} partition(s): {t['output_batches']} batches, "
              f"{t['output_records']} records, content digests equal to the archive's, into "
              f"{result.plan.destination}\n")
    return 0
