"""kfmt report: one self-contained HTML page (and the same facts as JSON) of what is on a broker's disk."""
from __future__ import annotations

import os
import sys

from kfmt.cli._common import add_format_argument, add_path_arguments, add_progress_argument
from kfmt.cli._transform import show_progress
from kfmt.defaults import DEFAULT_SAMPLE_BYTES
from kfmt.errors import UsageError
from kfmt.storage.store import parse_storage_options

NAME = "report"
HELP = ("one self-contained HTML page of a log directory, partition or archive: census of formats and "
        "codecs, segments on a time axis, internal topics, verify's findings, what upgrade, export and "
        "archive would take (--format json: the same facts)")
DEFAULT_OUTPUT = "report.html"


def add_arguments(p):
    add_path_arguments(p, help="a log directory, a partition directory or a kfmt archive (local path or "
                               "fsspec URL)")
    p.add_argument("-o", "--output", metavar="FILE",
                   help=f"where to write the page (default {DEFAULT_OUTPUT}; with --format json the JSON "
                        "goes there instead of stdout); replaced whole, never inside PATH")
    add_format_argument(p, ("html", "json"))
    p.add_argument("--no-verify", action="store_true",
                   help="leave out verify's checks (the findings): about the time of `kfmt info` alone")
    p.add_argument("--deep", action="store_true",
                   help="verify at `kfmt verify --deep`'s depth: every compressed batch inflated and its "
                        "records checked (default: what a broker's log recovery checks)")
    p.add_argument("--no-estimate", action="store_true",
                   help="leave out the estimate of upgrade, export and archive (no sample is run)")
    p.add_argument("--sample-bytes", type=int, metavar="N",
                   help=f"bytes of the input the estimate runs the commands on (default "
                        f"{DEFAULT_SAMPLE_BYTES >> 20} MiB)")
    add_progress_argument(p)


def run(args) -> int:
    from kfmt.api.report import report

    output = args.output if args.output is not None else (DEFAULT_OUTPUT if args.format == "html" else None)
    if output is not None:
        _check_output(output, args.path)
    if args.sample_bytes is not None and args.sample_bytes < 1:
        raise UsageError(f"--sample-bytes {args.sample_bytes}: give a positive number of bytes")
    extra = {} if args.sample_bytes is None else {"sample_bytes": args.sample_bytes}
    outcome = report(args.path, storage_options=parse_storage_options(args.storage_option), topic=args.topic,
                     partition=args.partition, verify=not args.no_verify, estimate=not args.no_estimate,
                     progress=show_progress(args), deep=args.deep, **extra)
    if args.format == "json":
        import json

        text = json.dumps(outcome, indent=1) + "\n"
    else:
        text = outcome.detail
    if output is None:
        sys.stdout.write(text)
        return 0
    _write_whole(output, text)
    t = outcome["totals"]
    found = "not verified" if t["errors"] is None else f"{t['errors']} problem(s), {t['notes']} note(s)"
    print(f"kfmt report: {output}: {t['partitions']} partition(s), {t['segments']} segment(s), {found}",
          file=sys.stderr)
    return 0


def _check_output(output: str, path: str) -> None:
    """The page is never written into the input (inputs are never modified), nor onto a directory."""
    if "://" in path or "://" in output:
        return
    out, src = os.path.realpath(output), os.path.realpath(path)
    if out == src or out.startswith(src.rstrip(os.sep) + os.sep):
        raise UsageError(f"-o {output}: inside PATH {path}, which kfmt never writes into")
    if os.path.isdir(out):
        raise UsageError(f"-o {output}: a directory; give a file name")


def _write_whole(output: str, text: str) -> None:
    """Written beside its place and renamed onto it: a reader sees the old page or the new one."""
    if "://" in output:
        from kfmt.storage.store import open_storage

        storage, path = open_storage(output, {})
        storage.write(path, text.encode("utf-8"))
        return
    import tempfile

    directory = os.path.dirname(os.path.abspath(output))
    fd, staged = tempfile.mkstemp(prefix=".kfmt-report-", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(staged, 0o644)  # mkstemp's 0600 is for secrets; a page is for sharing
        os.replace(staged, output)
    except BaseException:
        if os.path.exists(staged):
            os.unlink(staged)
        raise
