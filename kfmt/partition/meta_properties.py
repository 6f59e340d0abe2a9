"""`meta.properties`, the identity of a log directory (docs/format.md §11.4): which node and which
cluster it belongs to. Read as Java's `Properties.load` reads the file `Properties.store` wrote.

Kafka refuses to start on a log directory whose `cluster.id` differs from the other directories' or
whose `node.id` is not the node's (MetaPropertiesEnsemble.verify), so a transform must know whose
directory it writes (kfmt.partition.topic_identity)."""
from __future__ import annotations

from dataclasses import dataclass

from kfmt.partition.checkpoints import java_lines, java_parse_int
from kfmt.storage.store import Storage

META_PROPERTIES = "meta.properties"


def java_properties(text: str) -> tuple[dict[str, str], dict[str, int]]:
    """The key=value pairs of a Java properties file as Properties.store writes them (comments `#`/`!`,
    separators `=`, `:` or blanks, backslash line continuations); positions of each key's line."""
    props, positions = {}, {}
    lines = java_lines(text)
    i = 0
    while i < len(lines):
        position, line = lines[i]
        i += 1
        stripped = line.lstrip(" \t\f")
        if not stripped or stripped[0] in "#!":
            continue
        while stripped.endswith("\\") and not stripped.endswith("\\\\") and i < len(lines):
            stripped = stripped[:-1] + lines[i][1].lstrip(" \t\f")
            i += 1
        key, value = stripped, ""
        for j, ch in enumerate(stripped):
            if ch in "=: \t\f" and (j == 0 or stripped[j - 1] != "\\"):
                key, value = stripped[:j], stripped[j:].lstrip(" \t\f")
                if value[:1] in ("=", ":") and ch in " \t\f":
                    value = value[1:].lstrip(" \t\f")
                elif ch in "=:":
                    value = stripped[j + 1:].lstrip(" \t\f")
                break
        props[key.replace("\\", "")] = value
        positions[key.replace("\\", "")] = position
    return props, positions


@dataclass(frozen=True)
class NodeIdentity:
    """What a log directory's meta.properties says about whose it is (None: not said)."""

    file: str
    cluster_id: str | None
    node_id: int | None


def read_node_identity(storage: Storage, log_dir: str) -> NodeIdentity | None:
    """The identity `log_dir`'s meta.properties gives (KRaft's node.id, ZooKeeper's broker.id), or
    None without a readable file: a transform only uses it to tell clusters apart, verify checks it."""
    path = storage.join(log_dir, META_PROPERTIES) if log_dir else META_PROPERTIES
    if not log_dir or not storage.exists(path):
        return None
    try:
        props, _ = java_properties(bytes(storage.read(path)).decode("latin-1"))
    except OSError:
        return None
    node = java_parse_int(props.get("node.id", props.get("broker.id", "")))
    return NodeIdentity(storage.url_of(path), props.get("cluster.id") or None, node)
