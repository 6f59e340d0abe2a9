"""Arguments every transform shares (CLI.md "Transform"): SRC and DST, storage options for each,
--topic/--partition, --master (the engine: kfmt.pipelines.engine), --dry-run, --format, --no-progress."""
from __future__ import annotations

import sys
from typing import Callable

from kfmt.cli._common import (
    add_format_argument,
    add_include_deleted_argument,
    add_progress_argument,
    add_storage_arguments,
    dumps,
)
from kfmt.defaults import DEFAULT_INDEX_INTERVAL_BYTES, DEFAULT_PRODUCER_EXPIRATION_MS
from kfmt.storage.store import parse_storage_options


def add_transform_arguments(p, *, spark: bool = True, src: tuple[str, str] | None = None,
                            dst: tuple[str, str] | None = None, include_deleted: bool = False) -> None:
    """`src`/`dst`: (metavar, help) for commands whose SRC or DST is something else (an archive);
    `include_deleted`: the command carries what a broker serves and takes --include-deleted."""
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
        add_master_argument(p)
    p.add_argument("--dry-run", action="store_true", help="print the plan and write nothing")
    if include_deleted:
        add_include_deleted_argument(p)
    add_format_argument(p)
    add_progress_argument(p)


MASTER_HELP = ("where the tasks run (default: $KFMT_SPARK_MASTER, else 'auto': in this process for small "
               "inputs, a pool of local worker processes (threads, for work that releases the GIL) below "
               "2 GB per core, embedded Spark local[*] above); 'inprocess', 'threads' or 'local-threads[N]' "
               "(N threads), 'pool' or 'local-pool[N]' (N worker processes), or a Spark master URL: "
               "'local[N]', 'spark://HOST:PORT', 'yarn', 'k8s://...'")


def add_master_argument(p) -> None:
    """--master: which engine runs the tasks (kfmt.pipelines.engine; the report says which ran and why)."""
    p.add_argument("--master", metavar="URL", help=MASTER_HELP)


def run_arguments(args, *, spark: bool = True) -> dict:
    """The keyword arguments add_transform_arguments' flags give every command function of kfmt.api
    (storage options for SRC and DST, --topic, --partition, --dry-run, whether to show progress and,
    for a command run on an engine, --master)."""
    run = dict(storage_options=parse_storage_options(args.storage_option),
               dst_storage_options=(parse_storage_options(args.dst_storage_option)
                                    if args.dst_storage_option is not None else None),
               topic=args.topic, partition=args.partition, dry_run=args.dry_run,
               progress=show_progress(args))
    if spark:
        run["master"] = args.master
    if hasattr(args, "include_deleted"):
        run["include_deleted"] = args.include_deleted
    return run


def show_progress(args) -> bool:
    """Progress bars only on a terminal, and not with --no-progress."""
    return not getattr(args, "no_progress", False) and sys.stderr.isatty()


DEEP_HELP = ("check every record, not only every entry: decode (and inflate) every batch and report the "
             "content digest of the records instead of the entries digest of the bytes copied (as kfmt "
             "verify does); by default the copy is checked as Kafka's log recovery checks a log: each "
             "entry whole and its CRC holding, compressed batches not inflated")


def add_deep_argument(p) -> None:
    """--deep: the record-level check of a command that copies batches byte for byte
    (kfmt.format.copied_runs says what the default checks)."""
    p.add_argument("--deep", action="store_true", help=DEEP_HELP)


COMPRESSION_LEVEL_HELP = (
    "the level of the batches written with a codec, as CODEC=LEVEL (repeatable), e.g. zstd=9; each "
    "codec declares its levels and default (`kfmt plugins` lists them)")


def add_compression_level_argument(p, *, bare: bool = False) -> None:
    """--compression-level: the level per codec of the batches a command compresses anew
    (kfmt.format.codecs.compression_levels); `bare`: a LEVEL without CODEC= is the command's one codec."""
    p.add_argument("--compression-level", action="append", metavar="CODEC=LEVEL" if not bare else "[CODEC=]LEVEL",
                   help=COMPRESSION_LEVEL_HELP if not bare else
                   COMPRESSION_LEVEL_HELP.replace("as CODEC=LEVEL (repeatable)", "as LEVEL or CODEC=LEVEL"))


NOW_HELP = ("the wall clock, in epoch milliseconds, that producer expiry is judged against (default: "
            "now); a broker drops idle producers whenever it reloads a snapshot")


def add_companion_arguments(p, *, now: bool = True) -> None:
    """How regenerated companion files are built (kfmt.partition.companions). Commands whose --now also means
    something else (retain, compact) define --now themselves and pass now=False."""
    p.add_argument("--index-interval-bytes", type=int, default=DEFAULT_INDEX_INTERVAL_BYTES, metavar="N",
                   help="the topic's index.interval.bytes: bytes of log between index entries "
                        f"(default {DEFAULT_INDEX_INTERVAL_BYTES})")
    if now:
        p.add_argument("--now", type=int, metavar="MS", dest="now_ms", help=NOW_HELP)
    p.add_argument("--producer-expiration-ms", type=int, default=DEFAULT_PRODUCER_EXPIRATION_MS,
                   metavar="MS", help="the broker's producer.id.expiration.ms: producers idle longer are "
                                      f"dropped from snapshots (default {DEFAULT_PRODUCER_EXPIRATION_MS})")


def companion_arguments(args) -> dict:
    """The keyword arguments add_companion_arguments' flags give a command function of kfmt.api."""
    return dict(index_interval_bytes=args.index_interval_bytes, now_ms=args.now_ms,
                producer_expiration_ms=args.producer_expiration_ms)


def add_target_arguments(p) -> None:
    """The target cluster's topic ids (kfmt.partition.topic_identity): what partition.metadata the
    output carries, so that a KRaft broker of that cluster loads it instead of setting it aside."""
    p.add_argument("--topic-id", action="append", metavar="[TOPIC=]ID", dest="topic_id",
                   help="the target cluster's id of a topic (as kafka-topics --describe prints it), "
                        "written into partition.metadata; ID alone when SRC holds one topic, TOPIC=ID "
                        "(repeatable) otherwise (default: each partition keeps its own)")
    p.add_argument("--cluster-metadata", metavar="DIR",
                   help="a copy of the target cluster's KRaft metadata log (its __cluster_metadata-0, "
                        "or the log directory holding it): each topic's id is looked up by name, and a "
                        "partition the target cluster would set aside as a stray is warned about")


def target_arguments(args) -> dict:
    """The keyword arguments add_target_arguments' flags give a command function of kfmt.api."""
    return dict(topic_id=args.topic_id, cluster_metadata=args.cluster_metadata)


def print_outcome(plan, report: dict | None, as_json: bool, summary: Callable[[dict], str]) -> int:
    """Print what a transform did: for a dry run (no report) the plan, else the report as JSON or
    `summary(report)` as one line of text. Returns the exit code (0)."""
    out = sys.stdout
    if report is None:
        out.write(dumps(plan.to_json()) + "\n" if as_json else "\n".join(plan.lines()) + "\n")
    elif as_json:
        out.write(dumps(report) + "\n")
    else:
        out.write(summary(report) + "\n")
    return 0


def run_transform_command(args, command, **options) -> int:
    """Run a transform's kfmt.api function (upgrade, resegment, recompress) for the arguments
    add_transform_arguments, add_companion_arguments and add_target_arguments defined; print the plan
    (--dry-run) or what was written."""
    from kfmt.transforms.run import summary_line

    result = command(args.src, args.dst, **companion_arguments(args), **run_arguments(args),
                     **target_arguments(args), **options)
    return print_outcome(result.plan, None if result.is_plan else result, args.format == "json",
                         lambda r: summary_line(r, result.plan.layout.destination))


def add_fail_on_loss_argument(p) -> None:
    p.add_argument("--fail-on-loss", action="store_true",
                   help="exit 3 (after publishing what the run has) when offsets were deleted at the source "
                        "before any run read them; they are reported either way")


def loss_exit(args, report: dict | None) -> int:
    """The exit code of a run that published `report`: 3 with one error line when --fail-on-loss
    is given and the run found offsets lost (kfmt.transforms.losses), else 0."""
    from kfmt.transforms.losses import loss_failure

    failure = loss_failure((report or {}).get("lost") or []) if getattr(args, "fail_on_loss", False) else None
    if failure is None:
        return 0
    message, code = failure
    sys.stderr.write(f"kfmt: error: {message}\n")
    return code
