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
from typing import Protocol

import numpy as np
import pyarrow as pa

from kfmt.errors import UsageError


@dataclass(frozen=True)
class FormatOption:
    """One option a format takes (`--format-option NAME.KEY=VALUE`), declared next to the format so
    that the command line and the docs list it."""

    name: str
    help: str
    default: str | None = None


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
    options: tuple  # FormatOption, ...
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


def check_options(fmt, options: dict) -> dict:
    """`options` with the format's defaults, refusing one it does not declare."""
    declared = {o.name: o for o in getattr(fmt, "options", ())}
    unknown = sorted(set(options) - set(declared))
    if unknown:
        raise UsageError(f"value format {fmt.name!r} has no option {', '.join(unknown)} (its options: "
                         f"{', '.join(declared) or 'none'})")
    return {**{n: o.default for n, o in declared.items() if o.default is not None}, **options}


def failed_rows(mask: np.ndarray) -> np.ndarray:
    return np.flatnonzero(mask).astype(np.int64)
