"""kfmt export: partitions to Parquet or JSON Lines with Spark's Kafka source columns plus the on-disk
ones, in Hive-style topic=/partition=/ directories (kfmt.transforms.export, docs/export.md)."""
from __future__ import annotations

from kfmt.cli._common import (
    add_include_deleted_argument,
    add_progress_argument,
    add_storage_arguments,
    add_typing_arguments,
    typing_arguments,
)
from kfmt.cli._transform import (
    add_fail_on_loss_argument,
    add_master_argument,
    loss_exit,
    print_outcome,
    run_arguments,
)
from kfmt.defaults import DEFAULT_SPLIT_BYTES, DEFAULT_TARGET_FILE_BYTES
from kfmt.plugin import registry
from kfmt.plugin.options import add_flags, declared, from_flags

NAME = "export"
HELP = ("export records to Parquet or JSON Lines (Spark's Kafka source columns plus on-disk columns) in "
        "Hive-style topic=/partition=/ directories")


def add_arguments(p):
    p.add_argument("src", metavar="SRC", help="a partition directory or a log directory (local path or "
                                              "fsspec URL); only read")
    p.add_argument("dst", metavar="DST", help="where to write (must not exist, or be empty, unless "
                                              "--append)")
    p.add_argument("--append", action="store_true",
                   help="add to the export in DST the records after each partition's last exported "
                        "offset (its _kfmt-export-state.json), as new files; writes nothing if there "
                        "is nothing new; an empty or missing DST is exported whole")
    add_storage_arguments(p)
    add_fail_on_loss_argument(p)
    p.add_argument("--dst-storage-option", action="append", metavar="KEY=VALUE",
                   help="fsspec storage option for DST (repeatable; default: the --storage-option values)")
    p.add_argument("--topic", metavar="GLOB", help="only topics matching this glob (log directories)")
    p.add_argument("--partition", type=int, metavar="N", help="only this partition number")
    p.add_argument("--format", default="parquet", metavar="NAME",
                   help="file format: parquet (default), jsonl, or one an exporter plugin provides "
                        "(kfmt plugins lists them)")
    p.add_argument("--partition-by", default="topic,partition", metavar="COLUMNS",
                   help="directory levels: topic,partition (default) or topic,partition,date (the UTC "
                        "date of the record timestamp)")
    p.add_argument("--isolation", choices=("read_uncommitted", "read_committed"),
                   default="read_uncommitted", help="read_committed leaves out aborted transactions "
                                                    "and everything from the last stable offset on")
    p.add_argument("--include-control", action="store_true",
                   help="also export control records (transaction markers)")
    add_include_deleted_argument(p)
    add_typing_arguments(p)
    p.add_argument("--mode", choices=("records", "upsert"), default="records",
                   help="records: every record (default); upsert: a changelog as the table it describes, "
                        "one row per key with its last value, tombstones removing keys (Parquet written "
                        "whole; an Iceberg table replaced in one commit by --append)")
    p.add_argument("--max-bytes-per-task", type=int, default=DEFAULT_SPLIT_BYTES, metavar="N",
                   help="bytes of log per task: bigger segments are cut at batch boundaries, smaller "
                        f"consecutive ones share a task (default {DEFAULT_SPLIT_BYTES})")
    p.add_argument("--target-file-size", type=int, default=DEFAULT_TARGET_FILE_BYTES, metavar="N",
                   help="bytes of output per file: a task's file is closed once this big and the task "
                        f"goes on in a next one (default {DEFAULT_TARGET_FILE_BYTES})")
    add_master_argument(p)
    p.add_argument("--dry-run", action="store_true", help="print the plan and write nothing")
    p.add_argument("--output", choices=("text", "json"), default="text",
                   help="what is printed: text, or JSON (the plan with --dry-run, else the report)")
    add_progress_argument(p)
    # Each exporter's own settings, as it declares them (--iceberg-table...): kfmt.plugin.options.
    for name, exporter in sorted(registry.exporters_declared().items()):
        add_flags(p, name, declared(exporter), f"--format {name}")


def _settings(args) -> dict:
    """The exporters' flags given, as kfmt.export's keywords (which refuses those of another format)."""
    return {k: v for name, exporter in registry.exporters_declared().items()
            for k, v in from_flags(args, name, declared(exporter)).items()}


def run(args) -> int:
    from kfmt.api.commands import export
    from kfmt.pipelines.engine import engine_note
    from kfmt.transforms.losses import summary_suffix

    result = export(args.src, args.dst, format=args.format, partition_by=args.partition_by,
                    include_control=args.include_control, isolation=args.isolation,
                    max_bytes_per_task=args.max_bytes_per_task,
                    target_file_size=args.target_file_size, append=args.append,
                    mode=args.mode, **typing_arguments(args), **_settings(args), **run_arguments(args))
    plan = result.plan

    def summary(r: dict) -> str:
        if "table" in r:
            return (f"exported {r['totals']['output_records']} records of {r['totals']['partitions']} "
                    f"partition(s) into {r['table']['data_files']} data file(s) of {r['destination']}, "
                    f"committed as snapshot {r['table']['snapshot_id']} "
                    f"({r['duration_ms'] / 1000:.1f} s){summary_suffix(r.get('lost', []))}")
        if r.get("written") is False:
            return (f"nothing new to export from {plan.source} since the last run: {r['destination']} "
                    f"left as it was ({r['duration_ms'] / 1000:.1f} s)")
        files = sum(p["files"] for p in r["outputs"]) if r["outputs"] else sum(
            1 for name in r.get("files", {}) if not name.startswith("_"))  # --mode upsert
        return (f"exported {r['totals']['output_records']} records of {r['totals']['partitions']} "
                f"partition(s) into {files} {args.format} file(s) in {plan.destination} "
                f"({r['duration_ms'] / 1000:.1f} s{engine_note(r)}){summary_suffix(r.get('lost', []))}")
    report = None if result.is_plan else result
    return print_outcome(plan, report, args.output == "json", summary) or loss_exit(args, report)
