"""The iteration order of the Scala 2.13 hash collections kafka-dump-log prints from.

A group's members live in a `mutable.HashMap[String, MemberMetadata]` (kfmt.inspect.dump.scalamap replays
it); a transaction's partitions in a `mutable.HashSet[TopicPartition]`. Both iterate bucket by
bucket (bucket = improved hash `h ^ (h >>> 16)` masked by the table size), nodes in a bucket by
ascending (signed) hash, so only the final table size has to be replayed.
"""
from __future__ import annotations

from kfmt.inspect.dump.java_output import java_string_hash
from kfmt.inspect.dump.scalamap import ScalaHashMap

_LOAD_FACTOR = 0.75


def _int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _improved(hash_code: int) -> int:
    h = hash_code & 0xFFFFFFFF
    return _int32(h ^ (h >> 16))


def topic_partition_hash(topic: str, partition: int) -> int:
    """`TopicPartition.hashCode()`: 31 * (31 + partition) + topic.hashCode()."""
    return _int32(31 * (31 + partition) + java_string_hash(topic))


def _table_size_for(capacity: int) -> int:
    return min(1 << (max(capacity - 1, 4).bit_length()), 1 << 30)


def topic_partition_set_order(groups: list[list[tuple[str, int]]]) -> list[tuple[str, int]]:
    """The partitions of a `mutable.HashSet[TopicPartition]` filled by one `++=` per group (what
    TransactionLog.readTxnRecordValue does per topic), in the set's iteration order."""
    slots = 16
    size = 0
    entries: dict[tuple[str, int], tuple[int, int]] = {}  # element -> (hash, insertion number)
    for group in groups:
        elements = list(dict.fromkeys(group))  # an immutable Set of them: duplicates gone
        target = _table_size_for(int((len(elements) + 1) / _LOAD_FACTOR))  # sizeHint
        slots = max(slots, target)
        for element in elements:
            # Set1..Set4 are added one by one (add() grows first when full); a larger immutable
            # HashSet is added without that check
            if len(elements) <= 4 and size + 1 >= int(slots * _LOAD_FACTOR):
                slots *= 2
            if element not in entries:
                entries[element] = (_improved(topic_partition_hash(*element)), len(entries))
                size += 1
    mask = slots - 1
    return sorted(entries, key=lambda e: (entries[e][0] & mask, entries[e][0], entries[e][1]))


def member_order(member_ids: list[str]) -> list[int]:
    """Indexes of members in the iteration order of a `mutable.HashMap` they were put into one by
    one (GroupMetadata.add for each member of a loaded group)."""
    members = ScalaHashMap()
    for i, member_id in enumerate(member_ids):
        members.put(member_id, i)
    return list(members.values())
