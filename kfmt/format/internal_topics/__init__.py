"""Kafka's message schemas for the records its internal topics hold, declared once as tables, and the
one reader of Kafka's message protocol that decodes them (protocol.py): `__consumer_offsets`
(groups.py, group_kinds.py), `__transaction_state` (transactions.py), `__share_group_state`
(share_state.py), `__cluster_metadata` (metadata.py, metadata_security.py), `__remote_log_metadata`
(remote_log.py) and the KRaft control records (control.py), as Kafka's JSON message definitions
declare them (docs/format.md §15, docs/dump.md).

These are the payloads inside record batches, not the batches themselves (kfmt.format.layout and the
message formats). They live in the format layer so that every layer above reads them the same way:
the partition layer for the topic ids of a metadata log (kfmt.partition.cluster_topics), inspect for
`kfmt dump` and `kfmt offsets`, which alone decide how a record is printed."""
