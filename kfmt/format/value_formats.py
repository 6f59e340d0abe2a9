"""What a value format provides (the `kfmt_register_value_formats` hook; `--key-format`, `--value-format`).

A value format turns the stored bytes of keys or values into one typed Arrow column: `raw` keeps the
bytes, `string` decodes UTF-8, `json` parses JSON text, and the schema-registry formats (`avro`,
`protobuf`, `json-schema`, `avro-single`, `registry`) decode through the schemas of a
kfmt.rows.schemas.Schemas (docs/typed-export.md). Built in: kfmt.default_plugins.values.

A format is bound on the driver, once per topic and side (key or value), to a Decoder: `bind` decides
the column's Arrow type there (from the registry's schemas, from options, or from a sample of the
data), so that every task of a job writes the same table schema. The Decoder is picklable (tasks
run on other processes) and decodes a whole Arrow column at a time: never one Python call per
record on the way in, whatever the format does inside.

A value that cannot be decoded is not an exception: the decoder returns it as failed, with a reason,
and the caller (kfmt.rows.typed) keeps the record with a null in that column and sends the raw
record to the dead-letter output (`--on-decode-error`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Protocol

import numpy as np

from kfmt.errors import UsageError
from kfmt.plugin.options import Option, declared, settings

if TYPE_CHECKING:
    import pyarrow as pa  # imported where used: not on the paths that hold no record columns


@dataclass(frozen=True)
class Binding:
    """What a format is bound to: a topic's keys or values, the schemas in reach, its options."""

    topic: str
    side: str  # "key" or "value"
    schemas: object = None  # kfmt.rows.schemas.Schemas, or None when no schema source is in reach
    options: dict = field(default_factory=dict)
    # () -> pa.Array: the first stored keys or values of the topic (for a format that needs to look
    # at the data to choose its type), or None
    sampler: object = None

    @property
    def subject(self) -> str:
        """The registry subject of this topic and side by Confluent's default TopicNameStrategy
        (`<topic>-key`, `<topic>-value`), unless the `subject` option names another."""
        return self.options.get("subject") or f"{self.topic}-{self.side}"


@dataclass
class Decoded:
    """A decoded column: one value per input row (null where the input is null or failed), and the
    rows that failed with why."""

    column: pa.Array
    failed: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    reasons: list[str] = field(default_factory=list)
    schema_ids: np.ndarray | None = None  # per row, where the format reads one from the framing (-1: none)


class Decoder(Protocol):
    arrow_type: pa.DataType  # the column's type, the same in every task of a job

    def decode(self, data: pa.Array) -> Decoded:
        """Decode a binary column (nulls stay null)."""


class ValueFormat(Protocol):
    name: str  # the value of --key-format / --value-format
    # the options it takes (kfmt.plugin.options.Option: `--value-format-option NAME=VALUE`, the
    # keyword value_format_options, the data source's valueFormatOption.NAME), checked by kfmt
    options: tuple
    description: str

    def bind(self, binding: Binding) -> Decoder:
        """A decoder for the topic and side of `binding` (a UsageError when it cannot be made, e.g.
        no schema for the subject)."""


def value_formats() -> dict:
    """The value formats the loaded plugins provide, by name."""
    from kfmt.plugin import registry

    return registry.get().value_formats


def value_format(name: str):
    known = value_formats()
    if name not in known:
        raise UsageError(f"unknown value format {name!r} (known: {', '.join(sorted(known))})")
    return known[name]


def check_options(side: str, names: Iterable[str], given: dict) -> None:
    """Refuse, before any work, an option of `side` ("key" or "value") that none of the formats
    chosen for it (`names`) declares, or a value its declaration does not allow."""
    if not given:
        return  # nothing to look up (no plugin loaded for it)
    formats = [value_format(name) for name in dict.fromkeys(names)]
    for key, value in given.items():
        owners = [fmt for fmt in formats if key in _options_of(fmt)]
        if not owners:
            raise UsageError(_no_such_option(side, formats, key))
        for fmt in owners:
            _options_of(fmt)[key].check(value, fmt.name, _where(side, fmt, _options_of(fmt)[key]))


def bound_options(fmt, side: str, given: dict) -> dict:
    """The options `fmt` is bound with (Binding.options): those of `given` it declares, checked, and
    its defaults for the others (another format chosen for the same side may take the rest)."""
    mine = {key: value for key, value in given.items() if key in _options_of(fmt)}
    return settings(fmt.name, declared(fmt), mine, lambda option: _where(side, fmt, option))


def _options_of(fmt) -> dict[str, Option]:
    return {option.name: option for option in declared(fmt)}


def _where(side: str, fmt, option: Option) -> str:
    return f"{side} format {fmt.name!r} option {option.name!r}"


def _no_such_option(side: str, formats: list, key: str) -> str:
    names = ", ".join(repr(fmt.name) for fmt in formats)
    known = ", ".join(sorted({o for fmt in formats for o in _options_of(fmt)})) or "none"
    if len(formats) == 1:
        return f"{side} format {names} has no option {key!r} (its options: {known})"
    return f"{side} formats {names} have no option {key!r} (their options: {known})"


def failed_rows(mask: np.ndarray) -> np.ndarray:
    return np.flatnonzero(mask).astype(np.int64)
