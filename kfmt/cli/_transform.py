"""Arguments every transform shares (CLI.md "Transform"): SRC and DST, storage options for each,
--topic/--partition, --master (Spark), --dry-run, --format, --no-progress."""
from __future__ import annotations

from kfmt.cli._common import add_format_argument, add_progress_argument, add_storage_arguments
from kfmt.storage import parse_storage_options


def add_transform_arguments(p, *, spark: bool = True, src: tuple[str, str] | None = None,
                            dst: tuple[str, str] | None = None) -> None:
    """`src`/`dst`: (metavar, help) for commands whose SRC or DST is something else (an archive)."""
    src_metavar, src_help = src or ("SRC", "a partition directory or a log directory (local path or "
                                           "fsspec URL); only read")
    dst_metavar, dst_help = dst or ("DST", "where to write (must not exist, or be empty)")
    p.add_argument("src", metavar=src_metavar, help=src_help)
    p.add_argument("dst", metavar=dst_metavar, help=dst_help)
    add_storage_arguments(p)
    p.add_argument("--dst-storage-option", action="append", metavar="KEY=VALUE",
                   help="fsspec storage option for DST (repeatable; default: the --storage-option values)")
    p.add_argument("--topic", metavar="GLOB", help="only topics matching this glob (log directories)")
    p.add_argument("--partition", type=int, metavar="N", help="only this partition number")
    if spark:
        p.add_argument("--master", metavar="URL",
                       help="Spark master (default: an embedded local[*] session; 'inprocess' runs the "
                            "same work in this process without Spark)")
    p.add_argument("--dry-run", action="store_true", help="print the plan and write nothing")
    add_format_argument(p)
    add_progress_argument(p)


def storage_options(args) -> tuple[dict, dict]:
    """(SRC options, DST options); DST defaults to the SRC options."""
    src = parse_storage_options(args.storage_option)
    dst = parse_storage_options(args.dst_storage_option) if args.dst_storage_option is not None else src
    return src, dst
