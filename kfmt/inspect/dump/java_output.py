"""How Kafka's Java tool turns bytes and paths into text, reproduced exactly.

kafka-dump-log prints keys, values and header keys as `new String(bytes, UTF_8)` (docs/format.md §15.2:
StringDecoder, `Utils.utf8`): that rule is kfmt.format.javatext's `java_string`, shared with the rest of
kfmt (cat, export) and re-exported here.

File names are printed as `java.io.File` shows them: `toString()` is the path as given with repeated
and trailing slashes removed; `getAbsolutePath()` joins a relative path to the working directory
without resolving `.` or `..`.
"""
from __future__ import annotations

import os
import re

from kfmt.format.javatext import java_string  # noqa: F401  (the dump modules use it from here)

# --- java.io.File ---------------------------------------------------------------------------

_SLASHES = re.compile(r"/{2,}")


def java_file_string(path: str) -> str:
    """`new File(path).toString()` on Unix: repeated slashes collapsed, a trailing slash dropped."""
    path = _SLASHES.sub("/", path)
    if len(path) > 1 and path.endswith("/"):
        path = path[:-1]
    return path


def java_absolute_path(path: str, cwd: str | None = None) -> str:
    """`new File(path).getAbsolutePath()`: relative paths joined to the working directory as is."""
    path = java_file_string(path)
    if path.startswith("/"):
        return path
    base = java_file_string(cwd if cwd is not None else os.getcwd())
    if not path:
        return base
    return f"/{path}" if base == "/" else f"{base}/{path}"


def java_file_name(path: str) -> str:
    """`File.getName()`: the text after the last slash."""
    return java_file_string(path).rsplit("/", 1)[-1]


_JAVA_LONG = re.compile(r"[+-]?[0-9]+")


def java_parse_long(text: str) -> int | None:
    """`Long.parseLong(text)` for the file-name prefixes Kafka parses; None where Java throws."""
    if not _JAVA_LONG.fullmatch(text):
        return None
    value = int(text)
    return value if -2**63 <= value < 2**63 else None


def java_string_hash(text: str) -> int:
    """`String.hashCode()` (over UTF-16 code units), as a signed 32-bit int."""
    h = 0
    units = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h
