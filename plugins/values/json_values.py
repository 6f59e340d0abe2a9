"""JSON values parsed into the Arrow type a JSON Schema describes (the `json-schema` registry format,
and `json` with a schema file), mapped as Confluent's JSON Schema converter and Spark's `from_json` do:

| JSON Schema | Arrow |
| --- | --- |
| object with properties | struct of the properties, in the schema's order |
| object with only additionalProperties (a schema) | map<string, T> |
| array with items | list |
| string (any format), enum of strings | string |
| integer, number, boolean | int64, float64, bool |
| ["T", "null"], a null type | T, nullable |
| $ref to #/definitions or #/$defs | the type it names |
| anything else (oneOf, anyOf, mixed types, no type) | the JSON text, as a (large) string |

Properties the schema does not name are left out, as a reader with that schema would (a schema with
`additionalProperties: false` never has them). Values are parsed for a whole column at once by
pyarrow's JSON reader where the type allows it (no maps, no JSON-text fields), else one by one.
"""
from __future__ import annotations

import io
import json

import numpy as np
import pyarrow as pa
import pyarrow.json  # noqa: F401  (pa.json)

from kfmt.errors import UsageError
from kfmt.format.value_formats import Decoded

SMALLEST_BLOCK = 8  # a refused block this small is parsed one by one: fewer reader calls, same values
JSON_TEXT = pa.large_string()  # the JSON text of a value no type describes (large: a marker, not only a size)


class SchemaTypeError(ValueError):
    pass


def arrow_type(schema: dict, root: dict | None = None) -> pa.DataType:
    root = root if root is not None else schema
    if not isinstance(schema, dict):
        return JSON_TEXT
    if "$ref" in schema:
        return arrow_type(_resolve(schema["$ref"], root), root)
    kind = schema.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        kind = kinds[0] if len(kinds) == 1 else None
    if kind is None and "enum" in schema and all(isinstance(v, str) for v in schema["enum"]):
        return pa.string()
    if kind == "object":
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        if props:
            return pa.struct([pa.field(name, arrow_type(sub, root)) for name, sub in props.items()])
        if isinstance(extra, dict):
            return pa.map_(pa.string(), arrow_type(extra, root))
        return JSON_TEXT
    if kind == "array":
        items = schema.get("items")
        return pa.list_(arrow_type(items, root)) if isinstance(items, dict) else JSON_TEXT
    return {"string": pa.string(), "integer": pa.int64(), "number": pa.float64(),
            "boolean": pa.bool_(), "null": pa.null()}.get(kind, JSON_TEXT)


def _resolve(ref: str, root: dict) -> dict:
    if not ref.startswith("#/"):
        raise SchemaTypeError(f"a $ref outside the schema ({ref}) is not supported")
    node = root
    for part in ref[2:].split("/"):
        node = node.get(part.replace("~1", "/").replace("~0", "~")) if isinstance(node, dict) else None
    if node is None:
        raise SchemaTypeError(f"$ref {ref} names nothing in the schema")
    return node


def _bulk_ok(t: pa.DataType) -> bool:
    """Whether pyarrow's JSON reader converts to `t` (it has no maps, and cannot keep an object's
    text as a string)."""
    if pa.types.is_map(t) or t == JSON_TEXT:
        return False
    if pa.types.is_struct(t):
        return all(_bulk_ok(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_list(t):
        return _bulk_ok(t.value_type)
    return True


def decode_json(payloads: list[bytes], arrow: pa.DataType, strict: bool = False
                ) -> tuple[pa.Array, list[tuple[int, str]]]:
    """(the payloads parsed into `arrow`, [(index, reason)] of those that did not parse or fit);
    `strict`: an object's field that `arrow` does not have does not fit either (an inferred type:
    plugins/values/json_infer.py). A struct type without maps or JSON-text fields goes through
    pyarrow's JSON reader in bulk; the payloads it refuses alone are parsed one by one."""
    if pa.types.is_struct(arrow) and _bulk_ok(arrow) and payloads:
        return _decode_in_bulk(payloads, arrow, strict)
    return _decode_one_by_one(payloads, arrow, strict)


def _decode_in_bulk(payloads: list[bytes], arrow: pa.StructType, strict: bool
                    ) -> tuple[pa.Array, list[tuple[int, str]]]:
    """The reader on the whole chunk; a chunk it refuses is split in halves until the refused
    payloads are alone, and those (with the ones not on one line) go to _decode_one_by_one, whose
    reasons are the reference's."""
    one_line = np.array([b"\n" not in p and p.lstrip().startswith(b"{") for p in payloads], bool)
    lines = np.flatnonzero(one_line)
    pieces, stack = [], [(0, len(lines))] if len(lines) else []
    refused = [np.flatnonzero(~one_line)]
    while stack:
        start, stop = stack.pop()
        block = _read_block([payloads[i] for i in lines[start:stop]], arrow, strict)
        if block is not None:
            pieces.append((lines[start:stop], block))
        elif stop - start <= SMALLEST_BLOCK:
            refused.append(lines[start:stop])
        else:
            middle = (start + stop) // 2
            stack += [(middle, stop), (start, middle)]
    slow = np.sort(np.concatenate(refused)).astype(np.int64)
    if len(slow) == 0 and len(pieces) == 1:
        return pieces[0][1], []
    values, failed = _decode_one_by_one([payloads[i] for i in slow], arrow, strict)
    pieces.append((slow, values))
    rows = np.concatenate([r for r, _ in pieces])
    whole = pa.concat_arrays([a.cast(arrow) for _, a in pieces])
    order = np.empty(len(payloads), np.int64)
    order[rows] = np.arange(len(rows))
    return whole.take(pa.array(order)), [(int(slow[i]), reason) for i, reason in failed]


def _decode_one_by_one(payloads: list[bytes], arrow: pa.DataType, strict: bool
                       ) -> tuple[pa.Array, list[tuple[int, str]]]:
    """The reference: json.loads and _shape per payload, then pa.array (its checks of ranges)."""
    values, failed = [], []
    for i, payload in enumerate(payloads):
        try:
            values.append(_shape(json.loads(payload), arrow, strict))
        except (ValueError, TypeError) as err:
            failed.append((i, f"not JSON of the schema's type: {err}"))
            values.append(None)
    try:
        return pa.array(values, arrow), failed
    except (ValueError, pa.ArrowTypeError, OverflowError) as err:  # ValueError: ArrowInvalid, and
        for i in range(len(values)):  # UnicodeEncodeError (a lone surrogate \ud800 json.loads accepts)
            try:
                pa.array([values[i]], arrow)
            except (ValueError, pa.ArrowTypeError, OverflowError):
                failed.append((i, f"a value does not fit {arrow}: {err}"))
                values[i] = None
        return pa.array(values, arrow), sorted(failed)


def _read_block(payloads: list[bytes], arrow: pa.StructType, strict: bool = False) -> pa.Array | None:
    """The payloads through pyarrow's JSON reader (one object per line), None when a payload is
    not one object on a line of its own or does not convert: then they are parsed one by one."""
    if any(b"\n" in p or not p.lstrip().startswith(b"{") for p in payloads):
        return None
    options = pa.json.ParseOptions(explicit_schema=pa.schema(list(arrow)),
                                   unexpected_field_behavior="error" if strict else "ignore")
    try:
        table = pa.json.read_json(io.BytesIO(b"\n".join(payloads)), parse_options=options)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return None
    if table.num_rows != len(payloads):
        return None
    return table.to_struct_array().combine_chunks() if hasattr(table, "to_struct_array") else \
        pa.StructArray.from_arrays([c.combine_chunks() for c in table.columns], fields=list(arrow))


def _shape(value, arrow: pa.DataType, strict: bool = False):
    """A parsed JSON value made what pa.array takes for `arrow` (JSON text kept as text, an integer
    field refusing a fraction, which pa.array would truncate; `strict`: refusing a field `arrow` has
    not)."""
    if value is None:
        return None
    if arrow == JSON_TEXT:
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if pa.types.is_struct(arrow):
        if not isinstance(value, dict):
            raise TypeError(f"{type(value).__name__} where an object belongs")
        if strict:
            extra = sorted(set(value) - {f.name for f in arrow})
            if extra:
                raise TypeError(f"field {extra[0]!r} is not in the type inferred from the topic's first values")
        return {f.name: _shape(value.get(f.name), f.type, strict) for f in arrow}
    if pa.types.is_map(arrow):
        if not isinstance(value, dict):
            raise TypeError(f"{type(value).__name__} where an object belongs")
        return [(k, _shape(v, arrow.item_type, strict)) for k, v in value.items()]
    if pa.types.is_list(arrow):
        if not isinstance(value, list):
            raise TypeError(f"{type(value).__name__} where an array belongs")
        return [_shape(v, arrow.value_type, strict) for v in value]
    if pa.types.is_integer(arrow) and (isinstance(value, bool) or not isinstance(value, int)):
        raise TypeError(f"{value!r} where an integer belongs")
    if pa.types.is_floating(arrow) and isinstance(value, int) and not isinstance(value, bool):
        return float(value)  # as pyarrow's JSON reader and Spark's from_json read it: the nearest double
    return value


class JsonSchemaDecoder:
    """JSON text of one schema (no framing), parsed into its type."""

    def __init__(self, arrow: pa.DataType, strict: bool = False):
        self.arrow_type = arrow
        self.strict = strict  # an inferred type: a field it has not does not fit

    def decode(self, data: pa.Array) -> Decoded:
        rows = np.flatnonzero(~np.asarray(data.is_null().to_numpy(zero_copy_only=False), dtype=bool))
        payloads = [data[int(i)].as_py() for i in rows]
        column, failed = decode_json(payloads, self.arrow_type, getattr(self, "strict", False))
        index = np.full(len(data), len(column), np.int64)
        index[rows] = np.arange(len(rows))
        whole = pa.concat_arrays([column, pa.nulls(1, self.arrow_type)]).take(pa.array(index))
        return Decoded(whole, rows[[i for i, _ in failed]].astype(np.int64), [r for _, r in failed])


def schema_file_decoder(path: str) -> JsonSchemaDecoder:
    try:
        with open(path, "rb") as f:
            schema = json.load(f)
        return JsonSchemaDecoder(arrow_type(schema))
    except (OSError, ValueError) as err:
        raise UsageError(f"{path}: not a JSON Schema file ({err})") from None
