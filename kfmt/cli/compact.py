"""kfmt compact: Kafka's compact cleanup policy applied to a copy of SRC (kfmt.transforms.cleanup.compaction, run by
kfmt.transforms.cleanup.compact)."""
from __future__ import annotations

import sys

from kfmt.cli._common import dumps
from kfmt.cli._transform import (
    add_companion_arguments,
    add_target_arguments,
    add_transform_arguments,
    run_arguments,
    target_arguments,
)
from kfmt.defaults import (
    DEFAULT_DELETE_RETENTION_MS,
    DEFAULT_MAX_INDEX_BYTES,
    DEFAULT_OFFSET_MAP_LOAD_FACTOR,
    DEFAULT_OFFSET_MAP_MEMORY,
    DEFAULT_SEGMENT_BYTES,
)

NAME = "compact"
HELP = ("keep the latest record of each key as Kafka's log cleaner does (tombstones and transaction "
        "markers until their delete horizon), writing the result to DST")


def add_arguments(p):
    add_transform_arguments(p, include_deleted=True)
    p.add_argument("--delete-retention-ms", type=int, default=DEFAULT_DELETE_RETENTION_MS, metavar="MS",
                   help="the topic's delete.retention.ms: how long tombstones and transaction markers "
                        f"stay once cleaned (default {DEFAULT_DELETE_RETENTION_MS})")
    p.add_argument("--now", type=int, dest="now_ms", metavar="MS",
                   help="the cleaner's clock, in epoch milliseconds: delete horizons are stamped at MS + "
                        "delete.retention.ms and compared with MS (default: now)")
    p.add_argument("--clean-until", type=int, metavar="OFFSET",
                   help="clean no further than OFFSET (the base offset of the segment holding it); by "
                        "default the cleaning stops where a broker's would: the active segment, the last "
                        "stable offset, the high watermark")
    p.add_argument("--min-compaction-lag-ms", type=int, default=0, metavar="MS",
                   help="the topic's min.compaction.lag.ms: segments with records newer than MS before "
                        "--now stay dirty (default 0)")
    p.add_argument("--segment-bytes", type=int, default=DEFAULT_SEGMENT_BYTES, metavar="N",
                   help="the topic's segment.bytes: cleaned segments are grouped to stay under it "
                        f"(default {DEFAULT_SEGMENT_BYTES})")
    p.add_argument("--segment-index-bytes", type=int, default=DEFAULT_MAX_INDEX_BYTES, metavar="N",
                   help=f"the topic's segment.index.bytes (default {DEFAULT_MAX_INDEX_BYTES})")
    p.add_argument("--offset-map-bytes", type=int, default=DEFAULT_OFFSET_MAP_MEMORY, metavar="N",
                   help="memory for each partition's key -> offset map, 24 bytes per key (the broker's "
                        f"log.cleaner.dedupe.buffer.size, default {DEFAULT_OFFSET_MAP_MEMORY}); when it fills up, "
                        "only the part of the dirty range mapped so far is cleaned, as a broker does")
    p.add_argument("--offset-map-load-factor", type=float, default=DEFAULT_OFFSET_MAP_LOAD_FACTOR, metavar="F",
                   help="the share of the map's slots that may fill (log.cleaner.io.buffer.load.factor, "
                        f"default {DEFAULT_OFFSET_MAP_LOAD_FACTOR})")
    p.add_argument("--fail-when-map-full", action="store_true",
                   help="fail (exit 1) instead of cleaning a prefix when the offset map fills up")
    p.add_argument("--keep-format", action="store_true",
                   help="keep v0/v1 batches in their format, as Kafka 3.x's cleaner did (default: rewrite "
                        "them as v2, as Kafka 4.0's cleaner does)")
    p.add_argument("--cleanup-policy", default="compact", metavar="POLICY",
                   help="the topic's cleanup.policy: delete, compact, both (delete,compact), or empty "
                        "('', Kafka 4.2's infinite retention, KIP-1161); without 'compact' nothing is "
                        "cleaned (default compact)")
    add_target_arguments(p)
    add_companion_arguments(p, now=False)


def run(args) -> int:
    from kfmt.api.commands import compact
    from kfmt.partition.log_start import left_out_suffix
    from kfmt.pipelines.engine import engine_note

    report = compact(
        args.src, args.dst, now_ms=args.now_ms, delete_retention_ms=args.delete_retention_ms,
        min_compaction_lag_ms=args.min_compaction_lag_ms, clean_until=args.clean_until,
        segment_bytes=args.segment_bytes, segment_index_bytes=args.segment_index_bytes,
        index_interval_bytes=args.index_interval_bytes, offset_map_bytes=args.offset_map_bytes,
        offset_map_load_factor=args.offset_map_load_factor, fail_when_map_full=args.fail_when_map_full,
        keep_format=args.keep_format, producer_expiration_ms=args.producer_expiration_ms,
        cleanup_policy=args.cleanup_policy,
        **run_arguments(args), **target_arguments(args))
    plan, out = report.plan, sys.stdout
    if args.format == "json":
        out.write(dumps(report) + "\n")
        return 0
    verb = "would remove" if args.dry_run else "removed"
    for e in report["partitions"]:
        if e["first_dirty_offset"] is None:
            out.write(f"{e['partition']}: {e['notes'][0]}\n")
            continue
        if not e["cleanable"]:
            out.write(f"{e['partition']}: nothing to clean (dirty section "
                      f"[{e['first_dirty_offset']}, {e['first_uncleanable_offset']}))\n")
            continue
        removed = e["removed"]
        out.write(f"{e['partition']}: cleaned [{e['first_dirty_offset']}, {e['cleaned_until']}) of "
                  f"[{e['first_dirty_offset']}, {e['first_uncleanable_offset']}); {verb} "
                  f"{removed['records']} of {e['records_read']} records ({removed['tombstones']} "
                  f"tombstones), {e['bytes_removed']} bytes; dirty ratio {e['dirty_ratio_before']:.3f} -> "
                  f"{e['dirty_ratio_after']:.3f}\n")
        for note in e["notes"]:
            out.write(f"  {note}\n")
    if not args.dry_run:
        out.write(f"wrote {plan.layout.destination}{engine_note(report)}{left_out_suffix(report)}\n")
    return 0
