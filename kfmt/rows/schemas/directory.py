"""Schemas from a directory of schema files (`.avsc`, `.proto`, `.json`) and an id mapping,
`schemas.json` beside them:

    {"schemas": [{"id": 1, "file": "order-key.avsc", "subject": "orders-key", "version": 1},
                 {"id": 6, "file": "user.proto", "subject": "users-value", "version": 1,
                  "references": [{"name": "shop/common.proto", "subject": "shop/common.proto", "version": 1}]}]}

The type comes from the file's extension (`.avsc` Avro, `.proto` Protobuf, `.json` JSON Schema)
unless an entry says `"schemaType"`; `subject` and `version` are optional (a schema only looked up by
id), and references name other entries by subject and version, as the registry's do."""
from __future__ import annotations

import json

from kfmt.errors import UsageError
from kfmt.rows.schemas.registered import AVRO, JSON, PROTOBUF, RegisteredSchema, SchemaReference, Schemas

MAPPING = "schemas.json"
TYPES = {".avsc": AVRO, ".proto": PROTOBUF, ".json": JSON}


def schemas_from_directory(storage, path: str) -> Schemas:
    where = storage.url_of(path)
    mapping = storage.join(path, MAPPING)
    if not storage.exists(mapping):
        raise UsageError(f"{where}: no {MAPPING} (the id mapping of a schema directory)")
    try:
        entries = json.loads(bytes(storage.read(mapping)))["schemas"]
    except (ValueError, KeyError, TypeError) as err:
        raise UsageError(f"{storage.url_of(mapping)}: not a schema mapping ({err})") from None
    out = Schemas(f"the schema directory {where}")
    for entry in entries:
        try:
            name = entry["file"]
            kind = entry.get("schemaType") or next(t for ext, t in TYPES.items() if name.endswith(ext))
            text = bytes(storage.read(storage.join(path, *name.split("/")))).decode("utf-8")
            refs = tuple(SchemaReference(r["name"], r["subject"], int(r["version"]))
                         for r in entry.get("references", ()))
            schema = RegisteredSchema(int(entry["id"]), kind, text, refs)
        except StopIteration:
            raise UsageError(f"{where}: {entry.get('file')}: give schemaType (the extension is none "
                             f"of {', '.join(TYPES)})") from None
        except (KeyError, TypeError, ValueError, OSError) as err:
            raise UsageError(f"{storage.url_of(mapping)}: entry {entry!r}: {err}") from None
        version = entry.get("version")
        out.add(entry.get("subject"), None if version is None else int(version), schema)
    return out
