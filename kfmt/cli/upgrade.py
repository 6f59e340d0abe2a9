"""kfmt upgrade: message formats v0/v1 to v2 by Kafka 4.0's own conversion rules, on Spark
(kfmt.transforms.upgrade)."""
from __future__ import annotations

from kfmt.cli._transform import (
    add_companion_arguments,
    add_target_arguments,
    add_transform_arguments,
    run_transform_command,
)

NAME = "upgrade"
HELP = ("convert message formats v0/v1 to v2 by Kafka 4.0's rules (offsets kept, one v2 batch per "
        "legacy entry, v2 batches copied), with every companion file regenerated")


def add_arguments(p):
    add_transform_arguments(p, include_deleted=True)
    p.add_argument("--rebatch", action="store_true",
                   help="group consecutive uncompressed legacy messages into larger v2 batches (smaller "
                        "output, offsets still kept) instead of Kafka's one batch per message")
    p.add_argument("--max-batch-bytes", type=int, metavar="N",
                   help="with --rebatch: the largest batch to make (default 1048588, Kafka's "
                        "message.max.bytes)")
    add_target_arguments(p)
    add_companion_arguments(p)


def run(args) -> int:
    from kfmt.api.commands import upgrade

    return run_transform_command(args, upgrade, rebatch=args.rebatch, max_batch_bytes=args.max_batch_bytes)
