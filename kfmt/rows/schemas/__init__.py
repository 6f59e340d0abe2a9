"""Schemas from where they live: the registry's own storage topic (`_schemas`) in a log directory or
archive (kfmt.rows.schemas.storage_topic), a schema registry's REST API (kfmt.rows.schemas.rest), or
a directory of schema files with an id mapping (kfmt.rows.schemas.directory). Each gives a
kfmt.rows.schemas.registered.Schemas: schemas by id, subjects and their versions, references."""
from kfmt.rows.schemas.registered import RegisteredSchema, Schemas, SchemaReference  # noqa: F401
from kfmt.rows.schemas.sources import open_schemas  # noqa: F401
