"""Kafka's internal topics in the report, each read by the code that already reads it:
* groups and their committed offsets: `kfmt offsets`' replay of `__consumer_offsets` (and share
  groups' start offsets from `__share_group_state`), kfmt.inspect.dump.consumer_offsets;
* transactional ids: the last state of each in `__transaction_state`, read with the transaction
  log's schemas (kfmt.format.internal_topics.transactions), as the transaction coordinator loads it
  (TransactionStateManager.loadTransactionMetadata: the last record of an id wins, a tombstone
  removes it);
* the KRaft metadata: topic ids, assignments and feature levels (metadata.version first) of a
  `__cluster_metadata-0`, kfmt.partition.cluster_topics.

A section that cannot be read is one line in its `error` field; the rest of the report stands.
"""
from __future__ import annotations

from kfmt.errors import DataError
from kfmt.format.internal_topics.transactions import TRANSACTION_RECORDS
from kfmt.inspect.dump.consumer_offsets import load_group_offsets
from kfmt.inspect.dump.decoders.coordinator import UnknownRecordType, read_record
from kfmt.inspect.dump.decoders.transactions import loaded_partitions, state_name
from kfmt.inspect.dump.share_group_offsets import add_share_offsets
from kfmt.partition.cluster_topics import read_cluster_topics
from kfmt.partition.layout import METADATA_LOG_DIR, PartitionDir
from kfmt.partition.reader import PartitionReader

OFFSETS_TOPIC, SHARE_STATE_TOPIC = "__consumer_offsets", "__share_group_state"
TRANSACTIONS_TOPIC = "__transaction_state"


def internal_topics(parts: list[PartitionDir]) -> dict:
    """{"groups", "transactions", "cluster"}: each None when its topic is not there."""
    def of(topic):
        return [p for p in parts if p.topic == topic]

    offsets, txns = of(OFFSETS_TOPIC), of(TRANSACTIONS_TOPIC)
    metadata = [p for p in parts if p.name == METADATA_LOG_DIR]
    return {"groups": _section(groups, offsets, of(SHARE_STATE_TOPIC)) if offsets else None,
            "transactions": _section(transactions, txns) if txns else None,
            "cluster": _section(cluster, metadata[0]) if metadata else None}


def _section(read, *args) -> dict:
    try:
        return read(*args)
    except DataError as err:
        return {"error": str(err)}


def groups(offset_parts: list[PartitionDir], share_parts: list[PartitionDir]) -> dict:
    """Every group with its kind and committed offsets, as `kfmt offsets --format json` lists them."""
    state = load_group_offsets(offset_parts)
    add_share_offsets(state, share_parts)
    commits = state.sorted_offsets()
    kinds = dict(state.groups)
    for c in commits:
        kinds.setdefault(c.group, c.group_type)
    listed = [{"group": g, "kind": kinds[g],
               "partitions": sum(1 for c in commits if c.group == g),
               "topics": sorted({c.topic for c in commits if c.group == g})} for g in sorted(kinds)]
    return {"groups": listed, "offsets": [c.to_json() for c in commits],
            "open_transactions": sum(state.open_transactions.values())}


def transactions(parts: list[PartitionDir]) -> dict:
    """The last state of every transactional id, by id."""
    latest: dict[str, dict] = {}
    for part in parts:
        for seg, batch, _skip in PartitionReader(part).batches():
            if batch.header.is_control:
                continue
            cols = batch.records.to_pydict()
            for offset, key, value in zip(cols["offset"], cols["key"], cols["value"]):
                try:
                    _apply(latest, key, value)
                except DataError as err:
                    raise err.located(file=part.display(seg.log), base_position=batch.header.position,
                                      offset=offset)
    return {"transactional_ids": [latest[i] for i in sorted(latest)]}


def _apply(latest: dict, key: bytes | None, value: bytes | None) -> None:
    if key is None:
        raise DataError(f"a {TRANSACTIONS_TOPIC} record without a key")
    try:
        _type, k, _version, v = read_record(TRANSACTION_RECORDS, key, value)
    except UnknownRecordType:
        return  # a newer coordinator's record: skipped, as the loader skips it
    tid = k["transactionalId"]
    if v is None:
        latest.pop(tid, None)
        return
    latest[tid] = {"transactional_id": tid, "producer_id": v["producerId"], "producer_epoch": v["producerEpoch"],
                   "state": state_name(v["transactionStatus"]),
                   "partitions": [f"{t}-{p}" for t, p in loaded_partitions(v)],
                   "timeout_ms": v["transactionTimeoutMs"],
                   "last_update_ms": v["transactionLastUpdateTimestampMs"]}


def cluster(part: PartitionDir) -> dict:
    """The metadata image's topics (name, id, partitions) and feature levels."""
    topics = read_cluster_topics(part.storage, part.path)
    listed = [{"name": name, "id": tid, "partitions": len(topics.partitions.get(tid, {}))}
              for name, tid in sorted(topics.ids.items())]
    return {"metadata_version": topics.features.get("metadata.version"), "features": dict(topics.features),
            "cluster_id": topics.cluster_id, "node_id": topics.node_id, "topics": listed}
