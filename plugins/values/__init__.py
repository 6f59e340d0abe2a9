"""The built-in value formats (kfmt.format.value_formats): raw, string, json (basic.py) and the
schema-registry formats avro, protobuf, json-schema, registry, avro-single (registry_formats.py)."""
