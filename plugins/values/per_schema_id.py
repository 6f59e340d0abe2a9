"""One member per schema id (`--value-format-option tables=per-schema-id` of the registry formats): for
a subject whose versions no one table type holds (docs/typed-export.md, "Schema evolution").

The column is a struct with one member per version of the subject, `schema_<id>`, each of the writer
schema's own type: a record's value is in the member of its schema id, the others are null. One stream
(`cat`, `kfmt.read`, the data source, an Iceberg table) carries every version that way; a file export
writes each member as a table of its own, `topic=T/value_schema_id=<id>/` (kfmt.transforms.export_split).
Decoded by RegistryDecoder._decode_members (plugins/values/registry_formats.py).
A record of a schema id that is not a version of the subject does not decode (a dead letter).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from kfmt.plugin.options import Option

if TYPE_CHECKING:
    import pyarrow as pa  # imported where used: not on the paths that hold no record columns

PER_SCHEMA_ID = "per-schema-id"
TABLES_OPTION = Option("tables", "one table type for every version of the subject, or one struct member "
                                 "(and in a file export one table) per schema id, for versions no one "
                                 "table holds", default="one", choices=("one", PER_SCHEMA_ID))
MEMBER_PREFIX = "schema_"


def member_name(schema_id: int) -> str:
    return f"{MEMBER_PREFIX}{schema_id}"


def members_type(writers: list) -> pa.StructType:
    """The struct of the subject's versions (WriterSchema, ... oldest first)."""
    import pyarrow as pa

    return pa.struct([pa.field(member_name(w.id), w.arrow) for w in writers])
