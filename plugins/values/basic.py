"""The value formats that need no schema: `raw` (the stored bytes, today's columns), `string` (UTF-8
text) and `json` (JSON text parsed into the struct inferred from the topic's first values,
plugins/values/json_infer.py; with the `schema` option, the struct a JSON Schema file describes,
plugins/values/json_values.py, or with `schema=text` the checked text)."""
from __future__ import annotations

import json
from typing import TYPE_CHECKING

import numpy as np

from kfmt.format.value_formats import Decoded
from kfmt.plugin.hookspecs import hookimpl
from kfmt.plugin.options import Option

if TYPE_CHECKING:
    import pyarrow as pa  # imported on first use: every command loads this plugin, few decode values


class RawDecoder:
    @property
    def arrow_type(self):
        import pyarrow as pa

        return pa.binary()

    def decode(self, data: pa.Array) -> Decoded:
        return Decoded(data)


class Raw:
    name = "raw"
    options = ()
    description = "the stored bytes, as they are (the default)"

    def bind(self, binding):
        return RawDecoder()


class StringDecoder:
    @property
    def arrow_type(self):
        import pyarrow as pa

        return pa.string()

    def decode(self, data: pa.Array) -> Decoded:
        import pyarrow as pa

        try:
            return Decoded(data.cast(pa.string()))  # Arrow checks UTF-8 at C speed
        except pa.ArrowInvalid:
            pass
        bad = _invalid_utf8(data)
        failed = np.flatnonzero(bad).astype(np.int64)
        kept = _nulls_where(bad, data)
        return Decoded(kept.cast(pa.string()), failed, ["not UTF-8 text"] * len(failed))


def _invalid_utf8(data: pa.Array) -> np.ndarray:
    bad = np.zeros(len(data), dtype=bool)
    for i, value in enumerate(data.to_pylist()):  # only after Arrow found a value that is not UTF-8
        if value is not None:
            try:
                value.decode("utf-8")
            except UnicodeDecodeError:
                bad[i] = True
    return bad


class Text:
    name = "string"
    options = ()
    description = "UTF-8 text"

    def bind(self, binding):
        return StringDecoder()


class JsonTextDecoder:
    """JSON text, checked: the column holds the text of each value that parses."""

    @property
    def arrow_type(self):
        import pyarrow as pa

        return pa.string()

    def decode(self, data: pa.Array) -> Decoded:
        text = StringDecoder().decode(data)
        failed, reasons = list(text.failed), list(text.reasons)
        bad = np.zeros(len(data), dtype=bool)
        bad[text.failed] = True
        for i, value in enumerate(text.column.to_pylist()):
            if value is None or bad[i]:
                continue
            try:
                json.loads(value)
            except ValueError as err:
                failed.append(i)
                reasons.append(f"not JSON: {err}")
                bad[i] = True
        column = _nulls_where(bad, text.column)
        order = np.argsort(failed, kind="stable")
        return Decoded(column, np.asarray(failed, np.int64)[order], [reasons[i] for i in order])


class Json:
    name = "json"
    options = (Option("schema", "a JSON Schema file whose struct the values are parsed into, or "
                                "`text` to keep the checked JSON text; without it, the struct is "
                                "inferred from the topic's first values"),)
    description = ("JSON text, parsed into the struct inferred from the topic's first values (or one a "
                   "JSON Schema file describes, schema=FILE), or kept as text (schema=text)")

    def bind(self, binding):
        from kfmt.default_plugins.values.json_values import JsonSchemaDecoder, schema_file_decoder

        path = binding.options.get("schema")
        if path == "text":
            return JsonTextDecoder()
        if path:
            return schema_file_decoder(path)
        from kfmt.default_plugins.values.json_infer import infer_struct

        inferred = infer_struct(binding.sampler()) if binding.sampler is not None else None
        return JsonTextDecoder() if inferred is None else JsonSchemaDecoder(inferred, strict=True)


@hookimpl
def kfmt_register_value_formats(register):
    register(Raw())
    register(Text())
    register(Json())


def _nulls_where(bad, column: pa.Array) -> pa.Array:
    """`column` with nulls where `bad` is set. pyarrow.compute is imported here, not with the plugin:
    every command loads the plugins, and that import costs 30 ms of each one's start."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.if_else(pa.array(bad), pa.scalar(None, column.type), column)
