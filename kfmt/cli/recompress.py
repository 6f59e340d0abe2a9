"""kfmt recompress: every data batch in v2 with another codec or level, on Spark
(kfmt.transforms.recompress)."""
from __future__ import annotations

from kfmt.cli._transform import (
    add_companion_arguments,
    add_target_arguments,
    add_transform_arguments,
    run_transform_command,
)

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
    p.add_argument("--level", type=int, metavar="L",
                   help="the codec's compression level, in the range its plugin declares (default: "
                        "Kafka's); given, batches already in the codec are re-encoded too")
    add_target_arguments(p)
    add_companion_arguments(p)


def run(args) -> int:
    from kfmt.api.commands import recompress

    return run_transform_command(args, recompress, compression=args.compression, level=args.level)
