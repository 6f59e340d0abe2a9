"""The committed offsets of every group, from a copy of `__consumer_offsets`.

Replays each partition of the topic the way a broker's group coordinator loads it when it becomes
the partition's leader (Kafka 3.6's GroupMetadataManager.doLoadGroupsAndOffsets, 4.x's
GroupCoordinatorShard.replay):

* records in offset order; an offset commit (record type 0/1) replaces the group/topic/partition's
  offset, its tombstone deletes it; a group's own record (type 2 for a classic group, 3 for a
  consumer group of KIP-848, 11 for a share group, 17 for a streams group) says what kind of group
  it is, its tombstone deletes the group (its offsets go only by their own tombstones, which Kafka
  writes); a group that only commits (assign() and commitSync) is a classic group, as Kafka says;
  the other record types (members, assignments, ...) are read, which checks them, and not needed;
* offset commits in transactional batches (TxnOffsetCommit, KIP-98) wait, per producer, for that
  producer's end-transaction marker: COMMIT applies them, unless a commit already loaded came from
  a later batch; ABORT drops them; with no marker yet (an open transaction) they do not count;
* groups in different partitions are independent, so the partitions are merged.

Compacted copies give the same answer: the cleaner keeps the last record of each key and the
markers of transactions whose data it keeps.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from kfmt.errors import DataError
from kfmt.format.control import ControlType, control_type
from kfmt.format.internal_topics.group_kinds import GROUP_KIND_OF_TYPE
from kfmt.inspect.dump.decoders.coordinator import GROUP_RECORDS, UnknownRecordType, read_record
from kfmt.partition.layout import PartitionDir
from kfmt.partition.reader import PartitionReader

NO_EPOCH = -1
OFFSET_COMMIT_TYPES = (0, 1)
SHARE_GROUP_STATE_PARTITION_METADATA = 15  # names the topics of a share group's state
CLASSIC = "classic"


@dataclass
class CommittedOffset:
    group: str
    topic: str
    partition: int
    offset: int
    leader_epoch: int | None
    metadata: str
    commit_timestamp: int
    expire_timestamp: int | None
    log_partition: int | None  # the __consumer_offsets (share group: __share_group_state) partition
    log_offset: int  # the commit record's offset there
    batch_offset: int  # its batch's base offset (Kafka orders transactional commits by it)
    transactional: bool = False
    group_type: str = CLASSIC  # classic, consumer, share or streams
    log_topic: str = "__consumer_offsets"

    def to_json(self) -> dict:
        return {"group": self.group, "topic": self.topic, "partition": self.partition,
                "offset": self.offset, "leaderEpoch": self.leader_epoch, "metadata": self.metadata,
                "commitTimestamp": self.commit_timestamp, "expireTimestamp": self.expire_timestamp,
                "transactional": self.transactional,
                "logPartition": self.log_partition, "logOffset": self.log_offset,
                "groupType": self.group_type, "logTopic": self.log_topic}


@dataclass
class GroupOffsets:
    offsets: dict[tuple[str, str, int], CommittedOffset] = field(default_factory=dict)
    groups: dict[str, str] = field(default_factory=dict)  # group -> its kind, from its last own record
    topic_names: dict[bytes, str] = field(default_factory=dict)  # topic id -> name (share groups' records)
    deleted_groups: set[str] = field(default_factory=set)  # tombstoned and not re-created
    open_transactions: dict[int, int] = field(default_factory=dict)  # producer id -> pending commits

    def sorted_offsets(self) -> list[CommittedOffset]:
        return [self.offsets[k] for k in sorted(self.offsets)]

    def merge(self, other: "GroupOffsets") -> None:
        self.offsets.update(other.offsets)
        self.groups.update(other.groups)
        self.topic_names.update(other.topic_names)
        self.deleted_groups |= other.deleted_groups
        for pid, n in other.open_transactions.items():
            self.open_transactions[pid] = self.open_transactions.get(pid, 0) + n


def load_partition_offsets(part: PartitionDir) -> GroupOffsets:
    state = GroupOffsets()
    pending: dict[int, dict[tuple, CommittedOffset | None]] = {}  # producer id -> key -> commit
    reader = PartitionReader(part)
    for seg, batch, _skip in reader.batches():
        h = batch.header
        cols = batch.records.to_pydict()
        if h.is_control:
            if not cols["key"]:
                continue
            kind = control_type(cols["key"][0])
            if kind == ControlType.COMMIT:
                for key, commit in pending.get(h.producer_id, {}).items():
                    if commit is None:
                        continue
                    loaded = state.offsets.get(key)
                    if loaded is None or loaded.batch_offset < commit.batch_offset:
                        state.offsets[key] = commit
            if kind in (ControlType.COMMIT, ControlType.ABORT):
                pending.pop(h.producer_id, None)
            continue
        for offset, key, value in zip(cols["offset"], cols["key"], cols["value"]):
            try:
                _replay(state, pending, part, h, offset, key, value)
            except DataError as err:
                raise err.located(file=part.display(seg.log), base_position=h.position,
                                  offset=offset)
    state.open_transactions = {pid: len(v) for pid, v in pending.items() if v}
    return state


def _replay(state: GroupOffsets, pending: dict, part: PartitionDir, h, offset: int,
            key: bytes | None, value: bytes | None) -> None:
    if key is None:
        raise DataError("a __consumer_offsets record without a key")
    try:
        record_type, k, _version, v = read_record(GROUP_RECORDS, key, value)
    except UnknownRecordType:
        return  # a newer coordinator's record: skipped, as the loader skips it
    if record_type in OFFSET_COMMIT_TYPES:
        gtp = (k["group"], k["topic"], k["partition"])
        target = pending.setdefault(h.producer_id, {}) if h.is_transactional else None
        if v is None:
            if target is not None:
                target.pop(gtp, None)
            else:
                state.offsets.pop(gtp, None)
            return
        expire = v.get("expireTimestamp", -1)
        commit = CommittedOffset(
            k["group"], k["topic"], k["partition"], v["offset"],
            None if v.get("leaderEpoch", NO_EPOCH) == NO_EPOCH else v["leaderEpoch"], v["metadata"],
            v["commitTimestamp"], None if expire == -1 else expire,
            part.partition, offset, h.base_offset, h.is_transactional)
        if target is not None:
            target[gtp] = commit
        else:
            state.offsets[gtp] = commit
    elif record_type in GROUP_KIND_OF_TYPE:
        group = k.get("group", k.get("groupId"))
        if v is None:
            state.groups.pop(group, None)
            state.deleted_groups.add(group)
            return
        state.deleted_groups.discard(group)
        state.groups[group] = GROUP_KIND_OF_TYPE[record_type]
    elif record_type == SHARE_GROUP_STATE_PARTITION_METADATA and v is not None:
        for topic in v["initializingTopics"] + v["initializedTopics"] + v["deletingTopics"]:
            state.topic_names[topic["topicId"]] = topic["topicName"]


def load_group_offsets(parts: list[PartitionDir]) -> GroupOffsets:
    total = GroupOffsets()
    for part in parts:
        total.merge(load_partition_offsets(part))
    # a group deleted in one partition cannot live in another (a group has one partition), but
    # a group with offsets left is shown with them, as the broker would load it
    total.deleted_groups -= {o.group for o in total.offsets.values()} | set(total.groups)
    for commit in total.offsets.values():
        commit.group_type = total.groups.get(commit.group, CLASSIC)
    return total
