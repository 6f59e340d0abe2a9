"""The topics a KRaft cluster knows, read from a copy of its `__cluster_metadata` log: name -> topic
id, as the cluster's metadata image holds them (what `partition.metadata` of a partition directory
must match on a 4.x broker, or it sets the directory aside as stray).

The image is rebuilt the way a controller or broker loads it: the newest snapshot
(`<end offset>-<epoch>.checkpoint`, every record below its end offset), then the log's records from
that offset on; a TopicRecord adds a topic, a RemoveTopicRecord removes the topic with that id.
Records are read with the `--cluster-metadata-decoder`'s schemas; a record that does not decode is
an error naming file, position and offset.
"""
from __future__ import annotations

import re

from kfmt.errors import DataError
from kfmt.format import segment
from kfmt.format.message_formats import LENIENT
from kfmt.inspect.dump.decoders.metadata import read_record
from kfmt.partition.layout import PartitionDir
from kfmt.partition.reader import PartitionReader

SNAPSHOT_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")


def topic_ids(part: PartitionDir) -> dict[str, str]:
    """{topic name: topic id (Kafka's base64 text)} of the cluster whose `__cluster_metadata-0`
    directory `part` is."""
    topics: dict[str, str] = {}  # name -> id
    snapshots = sorted((int(m[1]), name) for name in part.files if (m := SNAPSHOT_NAME.match(name)))
    start = 0
    if snapshots:
        start, name = snapshots[-1]
        data = part.storage.read(part.storage.join(part.path, name))
        for batch in segment.batches(data, part.display(name), LENIENT):
            _apply(topics, batch, part.display(name))
    for seg, batch, _skip in PartitionReader(part).batches(from_offset=start):
        _apply(topics, batch, part.display(seg.log), first=start)
    return topics


def _apply(topics: dict[str, str], batch, file: str, first: int = 0) -> None:
    if batch.header.is_control:
        return
    cols = batch.records.to_pydict()
    for offset, value in zip(cols["offset"], cols["value"]):
        if offset < first:
            continue
        try:
            record = read_record(value)
        except DataError as err:
            raise err.located(file=file, base_position=batch.header.position, offset=offset)
        data = record["data"]
        if record["type"] == "TOPIC_RECORD":
            topics[data["name"]] = data["topicId"]
        elif record["type"] == "REMOVE_TOPIC_RECORD":
            for name in [n for n, i in topics.items() if i == data["topicId"]]:
                del topics[name]
