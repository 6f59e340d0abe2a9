"""JSON text exactly as Kafka's tools write it: Jackson's compact output (`JsonNode.toString()`,
`ObjectMapper.writeValueAsString`).

Where Python's json module differs from Jackson: control characters are escaped as `\\u00XX` with
upper-case hex (json writes lower case), non-ASCII is written raw, and doubles are written as Java's
`Double.toString` writes them (`1.0E7`, `2097152.0`; Python would write `10000000.0`). Values are
plain Python objects: dict (insertion order kept), list, str, int, bool, None and float (the float64
fields of Kafka's messages), a float written as a Java double.
"""
from __future__ import annotations

import math

_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f",
                  "\r": "\\r"}


def _escape_char(c: str) -> str:
    short = _SHORT_ESCAPES.get(c)
    if short is not None:
        return short
    if ord(c) < 0x20:
        return f"\\u{ord(c):04X}"
    return c


_ESCAPES = {chr(i): _escape_char(chr(i)) for i in range(0x20)}
_ESCAPES.update({'"': '\\"', "\\": "\\\\"})
_TABLE = str.maketrans(_ESCAPES)


def json_string(text: str) -> str:
    return '"' + text.translate(_TABLE) + '"'


def java_double(value: float) -> str:
    """`Double.toString(value)`: the shortest digits that round-trip, in Java's layout (plain
    between 10^-3 and 10^7, else `d.dddE±n`; always at least one digit after the point)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign = "-" if value < 0 else ""
    digits, exponent = _shortest_digits(abs(value))  # value = 0.digits * 10^exponent
    magnitude = abs(value)
    if 1e-3 <= magnitude < 1e7:
        if exponent <= 0:
            return f"{sign}0.{'0' * -exponent}{digits}"
        whole = digits[:exponent].ljust(exponent, "0")
        fraction = digits[exponent:] or "0"
        return f"{sign}{whole}.{fraction}"
    fraction = digits[1:] or "0"
    return f"{sign}{digits[0]}.{fraction}E{exponent - 1}"


def _shortest_digits(value: float) -> tuple[str, int]:
    mantissa, _, exp = repr(value).partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = (whole + fraction).lstrip("0")
    exponent = len(whole) + (int(exp) if exp else 0)
    if whole.strip("0") == "":  # 0.000123: the leading zeros of the fraction lower the exponent
        stripped = fraction.lstrip("0")
        exponent = (int(exp) if exp else 0) - (len(fraction) - len(stripped))
        digits = stripped
    return digits.rstrip("0") or "0", exponent


def write(value) -> str:
    """Compact JSON of value, as Jackson writes the equivalent tree."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return json_string(value)
    if isinstance(value, float):
        text = java_double(value)
        return text if math.isfinite(value) else json_string(text)  # Jackson quotes NaN/Infinity
    if isinstance(value, int):
        return str(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{json_string(k)}:{write(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(write(v) for v in value) + "]"
    raise TypeError(f"no JSON form for {type(value).__name__}")
