"""kfmt resegment: the same batches, byte for byte, in segments cut by other topic configs, on Spark
(kfmt.transforms.resegment)."""
from __future__ import annotations

from kfmt.cli._transform import (
    add_companion_arguments,
    add_target_arguments,
    add_transform_arguments,
    run_transform_command,
)
from kfmt.defaults import DEFAULT_MAX_INDEX_BYTES, DEFAULT_SEGMENT_MS

NAME = "resegment"
HELP = ("copy partitions byte for byte into segments cut by the broker's roll rules for the given "
        "segment.bytes / segment.ms, with every companion file regenerated")


def add_arguments(p):
    add_transform_arguments(p, include_deleted=True)
    p.add_argument("--segment-bytes", type=int, required=True, metavar="N",
                   help="the topic's segment.bytes: no segment grows past it (a larger batch gets a "
                        "segment of its own)")
    p.add_argument("--segment-ms", type=int, default=DEFAULT_SEGMENT_MS, metavar="MS",
                   help="the topic's segment.ms, measured in record time as Kafka does "
                        f"(default {DEFAULT_SEGMENT_MS}, 7 days)")
    p.add_argument("--segment-index-bytes", type=int, default=DEFAULT_MAX_INDEX_BYTES, metavar="N",
                   help="the topic's segment.index.bytes: a segment rolls when its index is full "
                        f"(default {DEFAULT_MAX_INDEX_BYTES})")
    p.add_argument("--kafka-version", metavar="VERSION",
                   help="the Kafka version of the broker the output is for (default: 4.x, whose "
                        "segment.bytes is at least 1048576); 3.9 or older allows segments down to 14 bytes")
    add_target_arguments(p)
    add_companion_arguments(p)


def run(args) -> int:
    from kfmt.api.commands import resegment

    return run_transform_command(args, resegment, segment_bytes=args.segment_bytes,
                                 segment_ms=args.segment_ms, segment_index_bytes=args.segment_index_bytes,
                                 kafka_version=args.kafka_version)
