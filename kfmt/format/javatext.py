"""Bytes to text exactly as Java's `new String(bytes, StandardCharsets.UTF_8)` decodes them.

Kafka's Java clients and tools decode header keys (`DefaultRecord.readHeaders`, `Utils.utf8`), and
kafka-dump-log keys and values, this way (docs/format.md §15.2); Spark's Kafka source hands on the header
key strings the consumer made. Valid UTF-8 decodes the same everywhere, but malformed input does not:
Java's decoder (JDK 17 `String.decodeUTF8_UTF16`, the same rules as `sun.nio.cs.UTF_8`) replaces an
encoded surrogate (ED A0 80) with ONE U+FFFD where Python's "replace" gives three, and drops a
truncated sequence at the very end with one U+FFFD. `java_string` registers a codec error handler
that applies Java's step at each malformed position, so valid stretches still decode at C speed.
"""
from __future__ import annotations

import codecs

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
