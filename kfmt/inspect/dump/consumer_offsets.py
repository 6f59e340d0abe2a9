"""The committed offsets of every consumer group, from a copy of `__consumer_offsets`.

Replays each partition of the topic the way a broker's group coordinator loads it when it becomes
the partition's leader (GroupMetadataManager.doLoadGroupsAndOffsets):

* records in offset order; an offset commit (key version 0/1) replaces the group/topic/partition's
  offset, its tombstone deletes it; a group metadata record (key version 2) sets the group, its
  tombstone deletes the group (its offsets go only by their own tombstones, which Kafka writes);
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
from kfmt.inspect.dump.decoders.offsets import read_group_value, read_key, read_offset_value
from kfmt.partition.layout import PartitionDir
from kfmt.partition.reader import PartitionReader

NO_EPOCH = -1


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
    log_partition: int | None  # the __consumer_offsets partition holding the commit
    log_offset: int  # the commit record's offset there
    batch_offset: int  # its batch's base offset (Kafka orders transactional commits by it)
    transactional: bool = False

    def to_json(self) -> dict:
        return {"group": self.group, "topic": self.topic, "partition": self.partition,
                "offset": self.offset, "leaderEpoch": self.leader_epoch, "metadata": self.metadata,
                "commitTimestamp": self.commit_timestamp, "expireTimestamp": self.expire_timestamp,
                "transactional": self.transactional,
                "logPartition": self.log_partition, "logOffset": self.log_offset}


@dataclass
class GroupInfo:
    """A group's last metadata record (classic groups; simple groups that only commit have none)."""

    group: str
    protocol_type: str
    protocol: str | None
    generation: int
    members: int


@dataclass
class GroupOffsets:
    offsets: dict[tuple[str, str, int], CommittedOffset] = field(default_factory=dict)
    groups: dict[str, GroupInfo] = field(default_factory=dict)
    deleted_groups: set[str] = field(default_factory=set)  # tombstoned and not re-created
    open_transactions: dict[int, int] = field(default_factory=dict)  # producer id -> pending commits

    def sorted_offsets(self) -> list[CommittedOffset]:
        return [self.offsets[k] for k in sorted(self.offsets)]

    def merge(self, other: "GroupOffsets") -> None:
        self.offsets.update(other.offsets)
        self.groups.update(other.groups)
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
    kind, _version, k = read_key(key)
    if kind == "offset_commit":
        gtp = (k["group"], k["topic"], k["partition"])
        target = pending.setdefault(h.producer_id, {}) if h.is_transactional else None
        if value is None:
            if target is not None:
                target.pop(gtp, None)
            else:
                state.offsets.pop(gtp, None)
            return
        _v, v = read_offset_value(value)
        commit = CommittedOffset(
            k["group"], k["topic"], k["partition"], v["offset"],
            None if v["leaderEpoch"] == NO_EPOCH else v["leaderEpoch"], v["metadata"],
            v["commitTimestamp"], None if v["expireTimestamp"] == -1 else v["expireTimestamp"],
            part.partition, offset, h.base_offset, h.is_transactional)
        if target is not None:
            target[gtp] = commit
        else:
            state.offsets[gtp] = commit
    elif kind == "group_metadata":
        group = k["group"]
        if value is None:
            state.groups.pop(group, None)
            state.deleted_groups.add(group)
            return
        _v, g = read_group_value(value)
        state.deleted_groups.discard(group)
        state.groups[group] = GroupInfo(group, g["protocolType"], g["protocol"], g["generation"],
                                        len(g["members"]))
    # other key versions (newer coordinators' records): skipped, as a 3.6 broker skips them


def load_group_offsets(parts: list[PartitionDir]) -> GroupOffsets:
    total = GroupOffsets()
    for part in parts:
        total.merge(load_partition_offsets(part))
    # a group deleted in one partition cannot live in another (a group has one partition), but
    # a group with offsets left is shown with them, as the broker would load it
    total.deleted_groups -= {o.group for o in total.offsets.values()} | set(total.groups)
    return total
