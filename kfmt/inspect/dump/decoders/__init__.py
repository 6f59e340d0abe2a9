"""kafka-dump-log's record decoders for Kafka's internal topics, per Kafka version whose output they
reproduce (`kfmt dump --kafka-version`, kfmt.defaults.DUMP_KAFKA_VERSIONS):

    --offsets-decoder              __consumer_offsets     3.6: offsets.py (text)       4.1: coordinator.py (JSON)
    --transaction-log-decoder      __transaction_state    3.6: transactions.py (text)  4.1: coordinator.py (JSON)
    --cluster-metadata-decoder     __cluster_metadata     metadata.py, each version with its own record table
    --share-group-state-decoder    __share_group_state    4.1: coordinator.py
    --remote-log-metadata-decoder  __remote_log_metadata  4.1: remote_log.py

Each is `parse(key, value, offset) -> Decoded`: the key and payload text Kafka's tool prints, and
the same content structured for `--format json`. The record schemas are declarative tables read by
one generic reader of Kafka's message protocol, both in kfmt.format.internal_topics (the layers below read
them too: the topic ids of a metadata log); what is printed of a record is decided here
(converter.py: Kafka's generated JsonConverter; jackson.py: its JSON text).
"""
from __future__ import annotations

from kfmt.defaults import DUMP_KAFKA_VERSIONS
from kfmt.errors import UsageError
from kfmt.inspect.dump.decoders import coordinator, metadata, offsets, remote_log, transactions
from kfmt.inspect.dump.decoders.result import Decoded

DECODERS = {
    "3.6": {
        "offsets": offsets.parse,
        "transaction-log": transactions.parse,
        "cluster-metadata": metadata.parse_kafka_36,
    },
    "4.1": {
        "offsets": coordinator.parse_offsets,
        "transaction-log": coordinator.parse_transaction_log,
        "cluster-metadata": metadata.parse,
        "share-group-state": coordinator.parse_share_group_state,
        "remote-log-metadata": remote_log.parse,
    },
}
assert tuple(DECODERS) == DUMP_KAFKA_VERSIONS


def decoder_for(name: str, kafka_version: str):
    """The parse function of decoder `name` as `kafka_version`'s tool has it; a UsageError when that
    version's tool has no such decoder."""
    table = DECODERS.get(kafka_version)
    if table is None:
        raise UsageError(f"--kafka-version {kafka_version}: kfmt reproduces kafka-dump-log of Kafka "
                         f"{', '.join(DUMP_KAFKA_VERSIONS)}")
    if name not in table:
        raise UsageError(f"Kafka {kafka_version}'s kafka-dump-log has no --{name}-decoder")
    return table[name]


__all__ = ["DECODERS", "Decoded", "decoder_for"]
