"""Schemas from the registry's own storage topic (`_schemas`), as Confluent Schema Registry and
Karapace keep it: a compacted topic of JSON records, replayed in offset order the way the registry
replays it when it starts (Confluent's KafkaStoreReaderThread / SchemaRegistrySerializer; Karapace's
schema_reader):

* key `{"keytype":"SCHEMA","subject":S,"version":V,"magic":1}`, value `{"subject","version","id",
  "schema","schemaType" (absent for Avro),"references","deleted"}`: a version (again with
  `"deleted": true` when it is soft-deleted);
* the same key with a null value -- or an empty one: Karapace 3.16 writes its permanent deletes so --
  removes the version;
* `DELETE_SUBJECT` (value `{"subject","version"}`): every version up to it soft-deleted;
* `CONFIG`, `MODE`, `NOOP`, `DELETE_SUBJECT`'s permanent form: nothing a reader of data needs.

A record that is not JSON of that shape is refused with its offset: a `_schemas` topic that does not
replay is not one to trust for decoding.
"""
from __future__ import annotations

import json

from kfmt.errors import DataError
from kfmt.partition.layout import PartitionDir
from kfmt.partition.reader import PartitionReader
from kfmt.rows.schemas.registered import AVRO, RegisteredSchema, SchemaReference, Schemas

SCHEMAS_TOPIC = "_schemas"


def schemas_from_topic(part: PartitionDir) -> Schemas:
    """Replay a `_schemas` partition (from its log start offset, as the registry's reader does)."""
    where = part.storage.url_of(part.path)
    versions: dict[tuple[str, int], dict] = {}
    reader = PartitionReader(part, from_log_start=True, recover_tail=True)
    for seg, batch, skip in reader.batches():
        if batch.header.is_control:
            continue
        cols = batch.records.slice(skip).to_pydict()
        for offset, key, value in zip(cols["offset"], cols["key"], cols["value"]):
            try:
                _replay(versions, key, value)
            except (ValueError, KeyError, TypeError) as err:
                raise DataError(f"{where}: offset {offset}: not a schema registry record ({err})") from None
    out = Schemas(f"the {SCHEMAS_TOPIC} topic at {where}")
    for (subject, version), entry in versions.items():
        out.add(subject, version, _registered(entry), entry.get("deleted", False))
    return out


def _replay(versions: dict, key: bytes | None, value: bytes | None) -> None:
    if key is None:
        return
    k = json.loads(key)
    kind = k["keytype"]
    if kind == "SCHEMA":
        at = (k["subject"], int(k["version"]))
        if not value:  # a tombstone (null, or empty as Karapace writes it): deleted for good
            versions.pop(at, None)
            return
        versions[at] = json.loads(value)
    elif kind == "DELETE_SUBJECT" and value:
        v = json.loads(value)
        for (subject, version), entry in versions.items():
            if subject == v["subject"] and version <= int(v["version"]):
                entry["deleted"] = True


def _registered(entry: dict) -> RegisteredSchema:
    refs = tuple(SchemaReference(r["name"], r["subject"], int(r["version"]))
                 for r in entry.get("references") or ())
    return RegisteredSchema(int(entry["id"]), entry.get("schemaType") or AVRO, entry["schema"], refs)
