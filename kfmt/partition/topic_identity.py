"""Which topic id a written partition carries in `partition.metadata`, and whether a KRaft broker
would set the directory aside as a stray (docs/format.md §10, §12.6).

A KRaft broker (3.7 and later renaming, every 4.x) checks each partition directory it loads against
its metadata image (`LogManager`, `TopicsImage.isStrayReplica`): a directory without a topic id, or
whose topic id names no partition of that number in the image, or whose partition is not assigned to
this broker, is a stray. It is renamed `<topic>-<partition>.<uuid>-stray` and an empty log serves the
partition instead: no error, the data unreachable. `stray_reason` is that rule, in one place, for
the transforms (what they write) and for verify (what a directory holds).

What a transform writes (`TargetTopics.identity`), in order of precedence:
* `--topic-id`: the id given for the partition's topic (or for the only topic of SRC);
* `--cluster-metadata`: the id the target cluster's metadata log gives the topic's name
  (kfmt.partition.cluster_topics);
* otherwise the source's own `partition.metadata`, unchanged: right when the output goes back to the
  cluster it came from (an upgrade of a cluster's own disk), a stray anywhere else.
Whenever the outcome is known to be a stray (no file, a topic the target does not know, a partition
it does not have) the partition's identity carries a warning that says what the broker will do and
how to avoid it; the transform prints it and records it in its report.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from kfmt.errors import DataError, UsageError
from kfmt.partition.checkpoints import (
    checkpoint_text,
    parse_topic_id,
    read_partition_metadata,
    write_partition_metadata,
)
from kfmt.partition.cluster_topics import ClusterTopics, read_cluster_topics
from kfmt.partition.layout import PARTITION_METADATA, PartitionDir
from kfmt.partition.meta_properties import NodeIdentity
from kfmt.storage.store import open_storage

FIX = ("give the target cluster's topic id with --topic-id TOPIC=ID, or a copy of its metadata log with "
       "--cluster-metadata DIR")


def stray_reason(topic: str, partition: int, topic_id: str | None, cluster: ClusterTopics | None,
                 node_id: int | None = None) -> str | None:
    """Why a KRaft broker would set partition directory `topic`-`partition` carrying `topic_id` aside as
    a stray (None: it would not, or nothing says so). Without `cluster` only a missing id is known."""
    if topic_id is None:
        return ("no partition.metadata: a KRaft broker (Kafka 3.8 and later, every 4.x) treats the "
                "directory as a stray; Kafka 3.4 to 3.7 refuse to start")
    if cluster is None:
        return None
    known = cluster.partitions.get(topic_id)
    if known is None:
        named = cluster.ids.get(topic)
        also = f"knows topic {topic} as {named}" if named is not None else f"has no topic {topic}"
        return f"topic id {topic_id} is not in the cluster's metadata ({cluster.source}), which {also}"
    if partition not in known:
        return (f"topic {cluster.topic_of(topic_id)} ({topic_id}) has no partition {partition} in the "
                f"cluster's metadata ({cluster.source}): it has {len(known)}")
    replicas = known[partition]
    if node_id is not None and node_id not in replicas:
        return (f"partition {partition} of {topic} is assigned to broker(s) {replicas}, not to node "
                f"{node_id} whose metadata this is")
    return None


def stray_consequence(name: str) -> str:
    return (f"a KRaft broker renames {name} to {name}.<uuid>-stray and serves an empty log in its "
            f"place (no error; the data is unreachable)")


@dataclass(frozen=True)
class TopicIdentity:
    """What a transform writes as one partition's partition.metadata (picklable)."""

    content: bytes | None  # None: no partition.metadata
    mtime_ms: int | None
    topic_id: str | None
    origin: str  # how the id was chosen, for the report
    warning: str | None = None  # set when a KRaft broker would set the output aside as a stray
    source_id: str | None = None  # the id of the source's own partition.metadata (None: none, or unreadable)
    stamped: bool = False  # the target's id, not the source's file

    @property
    def changes_id(self) -> bool:
        """Whether the output carries another topic id than the source did."""
        return self.stamped and self.topic_id != self.source_id

    @staticmethod
    def of(identity: "TopicIdentity | None", part: PartitionDir) -> "TopicIdentity":
        """`identity`, or (None: no target given) the source's own file."""
        return identity if identity is not None else TargetTopics().identity(part)

    def write_into(self, out, path: str) -> None:
        """partition.metadata at `path` of a staged output (nothing when there is none to write)."""
        if self.content is not None:
            out.write(path, self.content, self.mtime_ms)

    def note(self, name: str) -> str:
        return f"{name}: {PARTITION_METADATA} {self.origin}" + (f"; {self.warning}" if self.warning else "")


def source_topic_id(part: PartitionDir) -> tuple[bytes | None, int | None, str | None]:
    """(content, mtime, topic id) of a partition directory's own partition.metadata (all None
    without one; the id None when it does not parse)."""
    info = part.file(PARTITION_METADATA)
    if info is None:
        return None, None, None
    data = bytes(part.storage.read(info.path))
    try:
        topic_id = read_partition_metadata(checkpoint_text(data, part.display(info)), part.display(info))
    except DataError:
        topic_id = None
    return data, info.mtime_ms, topic_id


@dataclass
class TargetTopics:
    """The target cluster's topic ids, as the command line gave them (read on the driver: the tasks
    get each partition's TopicIdentity)."""

    ids: dict[str | None, str] = field(default_factory=dict)  # topic (None: SRC's only topic) -> id
    cluster: ClusterTopics | None = None

    @classmethod
    def of(cls, topic_ids=(), cluster_metadata: str | None = None, storage_options: dict | None = None):
        """From `--topic-id` values (`ID` or `TOPIC=ID`, or a {topic: id} mapping) and
        `--cluster-metadata` (a path or URL)."""
        pairs = topic_ids.items() if isinstance(topic_ids, dict) else (_split(v) for v in topic_ids or ())
        ids = {}
        for topic, value in pairs:
            canonical = parse_topic_id(value)
            if canonical is None:
                raise UsageError(f"--topic-id {value!r} is not a topic id (22 characters of URL-safe "
                                 f"base64, as kafka-topics --describe prints it, not all zero)")
            ids[topic] = canonical
        cluster = None
        if cluster_metadata is not None:
            storage, path = open_storage(str(cluster_metadata), storage_options)
            cluster = read_cluster_topics(storage, path)
        return cls(ids, cluster)

    @property
    def given(self) -> bool:
        return bool(self.ids) or self.cluster is not None

    def check_topics(self, topics: set[str]) -> None:
        """An id without a topic name is only for a SRC of one topic."""
        if None in self.ids and len(topics) > 1:
            raise UsageError(f"--topic-id without a topic name needs a SRC of one topic; this one holds "
                             f"{', '.join(sorted(topics))}: give --topic-id TOPIC=ID for each")
        named = {t for t in self.ids if t is not None}
        if named - topics:
            raise UsageError(f"--topic-id names topic(s) SRC does not hold: "
                             f"{', '.join(sorted(named - topics))}")

    def identity(self, part: PartitionDir) -> TopicIdentity:
        content, mtime, source_id = source_topic_id(part)
        name, topic = part.name, part.topic or ""
        stamped = self.ids.get(topic, self.ids.get(None))
        origin = "stamped with the topic id --topic-id gave"
        if stamped is None and self.cluster is not None:
            stamped = self.cluster.ids.get(topic)
            origin = (f"stamped with topic {topic}'s id in the target cluster's metadata "
                      f"({self.cluster.source})")
        if stamped is not None:
            reason = stray_reason(topic, part.partition or 0, stamped, self.cluster,
                                  self.cluster.node_id if self.cluster is not None else None)
            return TopicIdentity(write_partition_metadata(stamped).encode("ascii"), None, stamped,
                                 f"{origin} ({stamped})", _warning(name, reason), source_id, stamped=True)
        if content is None:
            reason = stray_reason(topic, part.partition or 0, None, None)
            return TopicIdentity(None, None, None, "not written (the source has none)",
                                 _warning(name, reason))
        origin = f"copied from the source (topic id {source_id})"
        if self.cluster is not None:
            reason = f"the target cluster's metadata ({self.cluster.source}) has no topic {topic}"
            fix = (f"create topic {topic} on the target cluster and copy its metadata log again, or give "
                   f"--topic-id {topic}=ID")
            return TopicIdentity(content, mtime, source_id, origin, _warning(name, reason, fix), source_id)
        if not self.given:  # right for the cluster it came from, a stray in any other: said, not warned
            origin += ("; a KRaft cluster that does not know the topic by this id sets the directory "
                       "aside as a stray: " + FIX)
        return TopicIdentity(content, mtime, source_id, origin, source_id=source_id)

    def other_cluster(self, source: NodeIdentity | None, identities: list[TopicIdentity]) -> str | None:
        """Why the output is for another cluster than the node SRC's log directory belongs to (None:
        the same cluster, or no target given). The cluster ids decide when both are known (the
        target metadata's meta.properties against SRC's); else a topic id written that differs from
        the source's own says so (topic ids are random per cluster: a recreated topic in the same
        cluster is the one case that needs --cluster-metadata of that cluster to say so)."""
        if not self.given:
            return None
        target = self.cluster.cluster_id if self.cluster is not None else None
        if target is not None and source is not None and source.cluster_id is not None:
            if target == source.cluster_id:
                return None
            return (f"the target metadata ({self.cluster.source}) is cluster {target}, SRC's log directory "
                    f"cluster {source.cluster_id} ({source.file})")
        changed = [i for i in identities if i.changes_id]
        if not changed:
            return None
        first = changed[0]
        return (f"{len(changed)} partition(s) get another topic id than the source's (as {first.topic_id} "
                f"for {first.source_id or 'none'})")


def _split(value: str) -> tuple[str | None, str]:
    topic, sep, topic_id = str(value).rpartition("=")
    return (topic if sep else None), topic_id


def _warning(name: str, reason: str | None, fix: str = FIX) -> str | None:
    if reason is None:
        return None
    return f"{name}: {reason}: {stray_consequence(name)}; {fix}"
