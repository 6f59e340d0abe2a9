"""kfmt retain: Kafka's delete cleanup policy (retention.ms, retention.bytes, the log start offset)
applied to a copy of SRC (kfmt.transforms.cleanup.retention, run by kfmt.transforms.cleanup.retain)."""
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

NAME = "retain"
HELP = ("delete the segments Kafka's retention would (retention.ms, retention.bytes, log start "
        "offset), writing what remains to DST")


def add_arguments(p):
    add_transform_arguments(p, include_deleted=True)
    p.add_argument("--retention-ms", type=int, default=-1, metavar="MS",
                   help="delete segments whose largest timestamp (their .log modification time when "
                        "they have no timestamps) lies more than MS before --now (default -1: off)")
    p.add_argument("--retention-bytes", type=int, default=-1, metavar="N",
                   help="delete the oldest segments while the partition stays at least N bytes "
                        "(default -1: off)")
    p.add_argument("--log-start-offset", type=int, metavar="N",
                   help="raise the log start offset to N (as DeleteRecords does): segments wholly below "
                        "it go, the one holding it stays")
    p.add_argument("--now", type=int, dest="now_ms", metavar="MS",
                   help="the wall clock, in epoch milliseconds, of the retention check and of producer "
                        "expiry in the regenerated snapshots (default: now)")
    p.add_argument("--include-active", action="store_true",
                   help="let the last (active) segment go too when it qualifies, as a broker does (an "
                        "empty segment at the log end offset then replaces a log deleted whole)")
    p.add_argument("--cleanup-policy", default="delete", metavar="POLICY",
                   help="the topic's cleanup.policy: delete, compact, both (delete,compact), or empty "
                        "('', Kafka 4.2's infinite retention, KIP-1161); without 'delete' retention.ms "
                        "and retention.bytes do not apply, only the log start offset (default delete)")
    add_target_arguments(p)
    add_companion_arguments(p, now=False)


def run(args) -> int:
    from kfmt.api.commands import retain
    from kfmt.partition.log_start import left_out_suffix
    from kfmt.pipelines.engine import engine_note

    report = retain(args.src, args.dst, retention_ms=args.retention_ms, retention_bytes=args.retention_bytes,
                    log_start_offset=args.log_start_offset, now_ms=args.now_ms,
                    include_active=args.include_active, index_interval_bytes=args.index_interval_bytes,
                    producer_expiration_ms=args.producer_expiration_ms, cleanup_policy=args.cleanup_policy,
                    **run_arguments(args), **target_arguments(args))
    plan, out = report.plan, sys.stdout
    if args.format == "json":
        out.write(dumps(report) + "\n")
        return 0
    verb = "would delete" if args.dry_run else "deleted"
    for entry in report["partitions"]:
        deleted = entry["deleted"]
        line = f"{entry['partition']}: {verb} {len(deleted)} segment(s)"
        if deleted:
            line += (f" ({sum(d['size'] for d in deleted)} bytes, offsets {deleted[0]['base_offset']}.."
                     f"{deleted[-1]['next_offset'] - 1}; "
                     + ", ".join(sorted({d['rule'] for d in deleted})) + ")")
        line += (f", kept {len(entry['kept_base_offsets'])}; log start offset "
                 f"{entry['log_start_offset']}")
        out.write(line + "\n")
        for d in deleted if args.dry_run else []:
            out.write(f"  {d['base_offset']:>20}  {d['rule']}: {d['reason']}\n")
    if not args.dry_run:
        out.write(f"wrote {plan.layout.destination}{engine_note(report)}{left_out_suffix(report)}\n")
    return 0
