"""kafka-dump-log's record decoders for Kafka's internal topics (Kafka 3.6):

    --offsets-decoder           __consumer_offsets      offsets.py
    --transaction-log-decoder   __transaction_state     transactions.py
    --cluster-metadata-decoder  __cluster_metadata (KRaft .log segments and .checkpoint snapshots)

Each is `parse(key, value, offset) -> Decoded`: the key and payload text Kafka's tool prints, and
the same content structured for `--format json`. The record schemas are declarative tables
(schemas_*.py) read by one generic reader of Kafka's message protocol (protocol.py).
"""
from __future__ import annotations

from kfmt.inspect.dump.decoders import metadata, offsets, transactions
from kfmt.inspect.dump.decoders.result import Decoded

DECODERS = {
    "offsets": offsets.parse,
    "transaction-log": transactions.parse,
    "cluster-metadata": metadata.parse,
}

__all__ = ["DECODERS", "Decoded"]
