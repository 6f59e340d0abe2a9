"""Arguments and helpers shared by the subcommands."""
from __future__ import annotations

import argparse
import base64
import json

from kfmt.partition.layout import PartitionDir, find_partitions
from kfmt.storage.store import open_storage, parse_storage_options


def add_path_arguments(p: argparse.ArgumentParser, name: str = "PATH", help: str | None = None) -> None:
    p.add_argument("path", metavar=name,
                   help=help or "a partition directory or a log directory (local path or fsspec URL)")
    add_storage_arguments(p)
    p.add_argument("--topic", metavar="GLOB", help="only topics matching this glob (log directories)")
    p.add_argument("--partition", type=int, metavar="N", help="only this partition number")


def add_storage_arguments(p: argparse.ArgumentParser) -> None:
    if not any(a.dest == "storage_option" for a in p._actions):
        p.add_argument("--storage-option", action="append", metavar="KEY=VALUE", default=[],
                       help="fsspec storage option (repeatable), e.g. endpoint_url=http://127.0.0.1:8333")


def add_format_argument(p: argparse.ArgumentParser, choices=("text", "json")) -> None:
    p.add_argument("--format", choices=choices, default=choices[0], help="output format")


def add_include_deleted_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--include-deleted", action="store_true",
                   help="also read the records below each partition's log start offset (its entry in "
                        "the log directory's log-start-offset-checkpoint, else its first segment's "
                        "base offset), which DeleteRecords or retention deleted and no broker serves "
                        "(forensics); by default records start at the log start offset, as a "
                        "consumer sees them")


def add_progress_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--no-progress", action="store_true", help="never show progress bars")


def open_partitions(args) -> tuple[list[PartitionDir], bool]:
    """The partitions PATH names, and whether PATH is a log directory."""
    storage, path = open_storage(args.path, parse_storage_options(args.storage_option))
    topic, partition = getattr(args, "topic", None), getattr(args, "partition", None)
    parts = find_partitions(storage, path, topic, partition)
    is_log_dir = not (len(parts) == 1 and parts[0].path == path)
    return parts, is_log_dir


def b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def java_utf8(data: bytes) -> str:
    """Bytes decoded as Java's `new String(bytes, UTF_8)` does (malformed input -> U+FFFD, by Java's
    rules, which differ from Python's "replace": kfmt.format.javatext)."""
    from kfmt.format.javatext import java_string

    return java_string(data)


def dumps(obj) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def add_typing_arguments(p: argparse.ArgumentParser, on_error_default: str = "dead-letter") -> None:
    """--key-format, --value-format and what they need (kfmt.rows.typed, docs/typed-export.md)."""
    for side in ("key", "value"):
        # The formats and their options are the value format plugins' own (kfmt plugins lists them),
        # checked when the command runs, so that building the parser loads none of them.
        p.add_argument(f"--{side}-format", action="append", metavar="[TOPIC_GLOB:]NAME",
                       help=f"decode {side}s with a value format (raw, the stored bytes, by default; "
                            f"kfmt plugins lists the others); TOPIC_GLOB:NAME for the topics the glob "
                            f"matches (repeatable, the last match wins; NAME alone leaves topics "
                            f"starting with _ raw)")
        p.add_argument(f"--{side}-format-option", action="append", metavar="KEY=VALUE", default=[],
                       help=f"an option the {side} format declares (repeatable; kfmt plugins lists "
                            f"them), e.g. subject=NAME")
    p.add_argument("--schemas", metavar="SOURCE",
                   help="where the schemas are: a schema registry URL, a directory with schemas.json, "
                        "or a _schemas partition or a log directory holding one (default: the "
                        "_schemas partition of the source, if it has one)")
    p.add_argument("--schema-registry-auth", metavar="USER:PASSWORD",
                   help="HTTP basic authentication for a registry URL")
    p.add_argument("--schema-registry-token", metavar="TOKEN", help="a bearer token for a registry URL")
    p.add_argument("--on-decode-error", choices=("dead-letter", "fail", "skip"), default=on_error_default,
                   help="a key or value that does not decode is null in its row, and: dead-letter "
                        "(also written with the reason to _errors/), skip (only counted) or fail "
                        f"(exit 65 naming it); default {on_error_default}")
    p.add_argument("--keep-raw", action="store_true",
                   help="also keep the stored bytes as key_bytes and value_bytes")


def typing_arguments(args) -> dict:
    """The typing options of the command line as keyword arguments of kfmt.api.commands."""
    from kfmt.plugin.options import key_value_pairs as pairs

    return {"key_format": args.key_format, "value_format": args.value_format,
            "key_format_options": pairs(args.key_format_option, "--key-format-option"),
            "value_format_options": pairs(args.value_format_option, "--value-format-option"),
            "schemas": args.schemas, "schema_registry_auth": args.schema_registry_auth,
            "schema_registry_token": args.schema_registry_token,
            "on_decode_error": args.on_decode_error, "keep_raw": args.keep_raw}
