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
    p.add_argument("--compression", required=True, choices=("none", "gzip", "snappy", "lz4", "zstd"),
                   help="the codec of the output's data batches")
    p.add_argument("--level", type=int, metavar="L",
                   help="the codec's compression level (gzip 1-9, lz4 1-17, zstd up to 22; default "
                        "Kafka's: 6, 9, 3); given, batches already in the codec are re-encoded too")
    add_target_arguments(p)
    add_companion_arguments(p)


def run(args) -> int:
    from kfmt.api.commands import recompress

    return run_transform_command(args, recompress, compression=args.compression, level=args.level)
