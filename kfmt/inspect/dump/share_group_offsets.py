"""The start offsets of share groups (KIP-932), from a copy of `__share_group_state`: what
AdminClient's listShareGroupOffsets answers (a share-partition's start offset and leader epoch).

Each share-partition (group, topic id, partition) has its state replayed as the share coordinator
loads it (ShareCoordinatorShard.replay): a ShareSnapshot (record type 0) sets it whole, a
ShareUpdate (type 1) changes the leader epoch and, unless it says -1, the start offset; a tombstone
deletes it. A start offset of -1 (a partition no member has fetched yet) is no offset and is left
out. Topic names come from the group's ShareGroupStatePartitionMetadata records in
`__consumer_offsets`; a topic they do not name is shown by its id.
"""
from __future__ import annotations

from dataclasses import dataclass

from kfmt.errors import DataError
from kfmt.format.internal_topics.protocol import kafka_uuid
from kfmt.format.internal_topics.share_state import SHARE_STATE_RECORDS
from kfmt.inspect.dump.consumer_offsets import CommittedOffset, GroupOffsets
from kfmt.inspect.dump.decoders.coordinator import UnknownRecordType, read_record
from kfmt.partition.layout import PartitionDir
from kfmt.partition.reader import PartitionReader

SHARE_SNAPSHOT = 0
NO_OFFSET = -1
LOG_TOPIC = "__share_group_state"


@dataclass
class SharePartitionState:
    start_offset: int
    leader_epoch: int
    timestamp: int  # of the record that set the start offset
    log_partition: int | None
    log_offset: int


def load_share_states(part: PartitionDir) -> dict[tuple[str, bytes, int], SharePartitionState]:
    states: dict[tuple[str, bytes, int], SharePartitionState] = {}
    for seg, batch, _skip in PartitionReader(part).batches():
        if batch.header.is_control:
            continue
        cols = batch.records.to_pydict()
        for offset, timestamp, key, value in zip(cols["offset"], cols["timestamp"], cols["key"], cols["value"]):
            try:
                _replay(states, part, offset, timestamp, key, value)
            except DataError as err:
                raise err.located(file=part.display(seg.log), base_position=batch.header.position,
                                  offset=offset)
    return states


def _replay(states: dict, part: PartitionDir, offset: int, timestamp: int, key: bytes | None,
            value: bytes | None) -> None:
    if key is None:
        raise DataError(f"a {LOG_TOPIC} record without a key")
    try:
        record_type, k, _version, v = read_record(SHARE_STATE_RECORDS, key, value)
    except UnknownRecordType:
        return
    share_partition = (k["groupId"], k["topicId"], k["partition"])
    if v is None:
        states.pop(share_partition, None)
        return
    state = states.get(share_partition)
    if record_type == SHARE_SNAPSHOT or state is None:
        states[share_partition] = SharePartitionState(v["startOffset"], v["leaderEpoch"], timestamp,
                                                      part.partition, offset)
        return
    state.leader_epoch = v["leaderEpoch"]
    if v["startOffset"] != NO_OFFSET:
        state.start_offset, state.timestamp = v["startOffset"], timestamp
        state.log_partition, state.log_offset = part.partition, offset


def add_share_offsets(total: GroupOffsets, parts: list[PartitionDir]) -> None:
    """The start offsets of the share groups `total` knows, as offsets of group type "share"."""
    states = {}
    for part in parts:
        states.update(load_share_states(part))
    for (group, topic_id, partition), s in states.items():
        if total.groups.get(group) != "share" or s.start_offset == NO_OFFSET:
            continue
        topic = total.topic_names.get(topic_id, kafka_uuid(topic_id))
        total.offsets[(group, topic, partition)] = CommittedOffset(
            group, topic, partition, s.start_offset, s.leader_epoch, "", s.timestamp, None,
            s.log_partition, s.log_offset, s.log_offset, group_type="share", log_topic=LOG_TOPIC)
