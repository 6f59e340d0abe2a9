"""kfmt info: a summary per partition."""
from __future__ import annotations

import datetime

from kfmt.cli._common import add_format_argument, add_include_deleted_argument, add_path_arguments, dumps
from kfmt.storage.store import parse_storage_options

NAME = "info"
HELP = "summarise partitions: segments, offsets, times, bytes, batches, records, (magic, codec) census"


def add_arguments(p):
    add_path_arguments(p)
    add_include_deleted_argument(p)
    add_format_argument(p)


def run(args) -> int:
    from kfmt.api.commands import partition_infos

    infos = partition_infos(args.path, storage_options=parse_storage_options(args.storage_option),
                            topic=args.topic, partition=args.partition,
                            include_deleted=args.include_deleted)
    if args.format == "json":
        for info in infos:
            print(dumps(info.to_json()))
        return 0
    for info in infos:
        print(render(info))
    return 0


def _when(ms: int | None) -> str:
    if ms is None:
        return "-"
    try:
        when = datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc)
    except (ValueError, OverflowError, OSError):  # a timestamp outside years 1..9999: the number alone
        return f"{ms}"
    return f"{ms} ({when.isoformat(timespec='milliseconds').replace('+00:00', 'Z')})"


def render(info) -> str:
    name = info.path if info.topic is None else f"{info.topic}-{info.partition}"
    lines = [
        f"{name}",
        f"  segments      {info.segments}   ({info.bytes} bytes of .log)",
        f"  offsets       log start {info.log_start_offset}, log end {info.log_end_offset}; "
        + (f"records {info.first_offset}..{info.last_offset}" if info.first_offset is not None else "no records"),
        f"  records       {info.records} in {info.batches} batches"
        + (f" (+{info.control_records} control)" if info.control_records else ""),
        f"  timestamps    {_when(info.min_timestamp)} .. {_when(info.max_timestamp)}",
        "  formats       magic  compression    batches    records        bytes",
    ]
    for (magic, codec), n in sorted(info.census.items()):
        lines.append(f"                v{magic:<5} {codec:<12} {n.batches:>9} {n.records:>10} {n.bytes:>12}")
    return "\n".join(lines)
