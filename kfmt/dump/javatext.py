"""How Kafka's Java tool turns bytes and paths into text, reproduced exactly.

kafka-dump-log prints keys, values and header keys as `new String(bytes, UTF_8)` (reference §15.2:
StringDecoder, `Utils.utf8`). Valid UTF-8 decodes the same everywhere, but malformed input does not:
Java's decoder (JDK 17 `String.decodeUTF8_UTF16`, the same rules as `sun.nio.cs.UTF_8`) replaces an
encoded surrogate (ED A0 80) with ONE U+FFFD where Python's "replace" gives three, and drops a
truncated sequence at the very end with one U+FFFD. `java_string` registers a codec error handler
that applies Java's step at each malformed position, so valid stretches still decode at C speed.

File names are printed as `java.io.File` shows them: `toString()` is the path as given with repeated
and trailing slashes removed; `getAbsolutePath()` joins a relative path to the working directory
without resolving `.` or `..`.
"""
from __future__ import annotations

import codecs
import os
import re

REPLACEMENT = "\ufffd"
_HANDLER = "kfmt-java-utf8"


def _not_continuation(b: int) -> bool:
    return (b & 0xC0) != 0x80


def _malformed_step(data, p: int) -> tuple[int, bool]:
    """Java's handling of the malformed sequence starting at data[p]: (bytes consumed, stop).

    Each call stands for one U+FFFD. `stop` means Java ends decoding there (a truncated sequence
    at the end of the input: its remaining bytes produce nothing more).
    """
    n = len(data)
    b1 = data[p]
    if 0xC2 <= b1 <= 0xDF:  # two-byte lead
        if p + 1 < n:
            return 1, False  # the next byte is not a continuation (else it would be valid)
        return 1, True
    if 0xE0 <= b1 <= 0xEF:  # three-byte lead
        if p + 2 < n:
            b2, b3 = data[p + 1], data[p + 2]
            if ((b1 == 0xE0 and (b2 & 0xE0) == 0x80) or _not_continuation(b2)
                    or _not_continuation(b3)):
                # malformed3: skip the lead alone if b2 cannot belong to it, else lead + b2
                if (b1 == 0xE0 and (b2 & 0xE0) == 0x80) or _not_continuation(b2):
                    return 1, False
                return 2, False
            return 3, False  # well-formed shape but a surrogate: one U+FFFD for all three
        if p + 1 < n and ((b1 == 0xE0 and (data[p + 1] & 0xE0) == 0x80)
                          or _not_continuation(data[p + 1])):
            return 1, False
        return n - p, True
    if 0xF0 <= b1 <= 0xF7:  # four-byte lead (F5-F7 are never valid)
        if p + 3 < n:
            b2 = data[p + 1]
            if (b1 > 0xF4 or (b1 == 0xF0 and not 0x90 <= b2 <= 0xBF)
                    or (b1 == 0xF4 and (b2 & 0xF0) != 0x80) or _not_continuation(b2)):
                return 1, False
            if _not_continuation(data[p + 2]):
                return 2, False
            return 3, False
        if b1 > 0xF4 or (p + 1 < n and _malformed4_2(b1, data[p + 1])):
            return 1, False
        # lead and second byte consumed; a third byte that continues them is dropped with them
        if p + 2 < n and _not_continuation(data[p + 2]):
            return 2, False
        return n - p, True
    return 1, False  # a stray continuation byte, C0, C1 or F8-FF


def _malformed4_2(b1: int, b2: int) -> bool:
    return ((b1 == 0xF0 and not 0x90 <= b2 <= 0xBF) or (b1 == 0xF4 and (b2 & 0xF0) != 0x80)
            or _not_continuation(b2))


def _java_errors(err: UnicodeDecodeError):
    consumed, stop = _malformed_step(err.object, err.start)
    return REPLACEMENT, len(err.object) if stop else err.start + consumed


codecs.register_error(_HANDLER, _java_errors)


def java_string(data) -> str:
    """`new String(data, StandardCharsets.UTF_8)` as Java 17 computes it."""
    return codecs.utf_8_decode(data, _HANDLER, True)[0]


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
