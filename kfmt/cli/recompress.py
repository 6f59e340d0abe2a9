"""kfmt recompress: every data batch in v2 with another codec or level, on Spark
(kfmt.transforms.recompress)."""
from __future__ import annotations

from kfmt.cli._transform import (
    add_companion_arguments,
    add_compression_level_argument,
    add_target_arguments,
    add_transform_arguments,
    run_transform_command,
)
from kfmt.errors import UsageError

NAME = "recompress"
HELP = ("re-encode every data batch in v2 with another compression codec or level (legacy data "
        "converted by Kafka 4.0's rules first; control batches copied)")


def add_arguments(p):
    add_transform_arguments(p, include_deleted=True)
    # The codecs and their levels are the compression plugins' own (kfmt plugins lists them): checked
    # when the command runs, so that building the parser loads none of them.
    p.add_argument("--compression", required=True, metavar="CODEC",
                   help="the codec of the output's data batches, by name (kfmt plugins lists the codecs "
                        "and their levels)")
    p.add_argument("--level", metavar="L",
                   help="the codec's compression level, among those its plugin declares (kfmt plugins "
                        "lists each codec's levels and default); given, batches already in the codec "
                        "are re-encoded too")
    add_compression_level_argument(p, bare=True)
    add_target_arguments(p)
    add_companion_arguments(p)


def run(args) -> int:
    from kfmt.api.commands import recompress

    levels = [args.level] if args.level is not None else []
    levels += args.compression_level or []
    if len(levels) > 1:
        raise UsageError("give the level once (--level or --compression-level)")
    return run_transform_command(args, recompress, compression=args.compression,
                                 level=levels[0] if levels else None)
