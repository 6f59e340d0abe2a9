"""Which schema source a command reads (`--schemas SOURCE`, kfmt.read(schemas=...)):

* an `http://` or `https://` URL: a schema registry (kfmt.rows.schemas.rest);
* a directory holding `schemas.json`: schema files (kfmt.rows.schemas.directory);
* a `_schemas` partition directory, or a log directory or archive holding one: the registry's storage
  topic (kfmt.rows.schemas.storage_topic);
* nothing given: the `_schemas` partition of the source log directory, when it has one.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

from kfmt.errors import UsageError
from kfmt.rows.schemas.registered import Schemas


@dataclass(frozen=True)
class RegistryAuth:
    basic: str | None = None  # user:password
    bearer: str | None = None
    headers: tuple = ()  # (name, value) pairs


def open_schemas(source: str | None, src: str | None = None, storage_options: dict | None = None,
                 auth: RegistryAuth | None = None) -> Schemas | None:
    """The schemas at `source`, or found beside the data at `src` (None when there are none)."""
    from kfmt.rows.schemas.rest import schemas_from_registry

    auth = auth or RegistryAuth()
    if source is not None and source.split("://", 1)[0] in ("http", "https"):
        return schemas_from_registry(source, auth.basic, auth.bearer, dict(auth.headers))
    where = source if source is not None else src
    if where is None:
        return None
    found = _from_storage(where, storage_options, explicit=source is not None)
    if found is None and source is None:  # a partition directory: its log directory may hold _schemas
        parent = where.rstrip("/").rpartition("/")[0]
        if parent:
            found = _from_storage(parent, storage_options, explicit=False)
    if found is None and source is not None:
        raise UsageError(f"{source}: neither a schema registry URL, a schema directory (schemas.json) "
                         f"nor a {_topic()} partition or a log directory holding one")
    return found


def _topic() -> str:
    from kfmt.rows.schemas.storage_topic import SCHEMAS_TOPIC

    return SCHEMAS_TOPIC


def _from_storage(where: str, storage_options: dict | None, explicit: bool) -> Schemas | None:
    from kfmt.partition.layout import find_partitions
    from kfmt.rows.schemas.directory import MAPPING, schemas_from_directory
    from kfmt.rows.schemas.storage_topic import SCHEMAS_TOPIC, schemas_from_topic
    from kfmt.storage.store import open_storage

    storage, path = open_storage(where, storage_options)
    if not storage.isdir(path):
        if explicit:
            raise UsageError(f"{storage.url_of(path)}: no such directory")
        return None
    if storage.exists(storage.join(path, MAPPING)):
        return schemas_from_directory(storage, path)
    try:
        with warnings.catch_warnings():  # about the other directories: the command says them itself
            warnings.simplefilter("ignore")
            parts = [p for p in find_partitions(storage, path, SCHEMAS_TOPIC) if p.topic == SCHEMAS_TOPIC]
    except UsageError:
        parts = []
    if not parts:
        return None
    if len(parts) > 1:  # the registry's topic has one partition (it needs a total order)
        raise UsageError(f"{storage.url_of(path)}: {len(parts)} {SCHEMAS_TOPIC} partitions; the "
                         f"registry's storage topic has one")
    return schemas_from_topic(parts[0])


def describe(schemas: Schemas | None) -> str:
    return "no schema source" if schemas is None else schemas.where

