"""What kafka-dump-log prints for the records of control batches (docs/format.md §4.6), by the
Kafka version whose tool is reproduced:

* ABORT / COMMIT: ` endTxnMarker: COMMIT coordinatorEpoch: N` (every version);
* KRaft records it parses, ` LABEL JSON` with the record as its JsonConverter writes it, read at the
  version its first int16 says (Kafka 3.6: SnapshotHeader and SnapshotFooter, read at version 0;
  4.x also `LeaderChange:` (the colon is Kafka's), `KRaftVersion` and `KRaftVoters`);
* any other type ` controlType: NAME(ID)`, NAME as the version's ControlRecordType names it
  (UNKNOWN for an id it does not know: Kafka 3.6 knew 0-4).

A record the tool parses and cannot read is an error (Kafka's tool throws); one it only names is
decoded for the JSON form when it can be, and left undecoded when not.
"""
from __future__ import annotations

from kfmt.errors import DataError
from kfmt.format.control import ControlType, control_type, control_type_id, end_txn_marker
from kfmt.format.internal_topics.control import (
    KRAFT_VERSION,
    LEADER_CHANGE,
    SNAPSHOT_FOOTER,
    SNAPSHOT_HEADER,
    VOTERS,
)
from kfmt.format.internal_topics.protocol import read_message
from kfmt.format.wire import INT16
from kfmt.inspect.dump.common import ControlInfo
from kfmt.inspect.dump.decoders import jackson
from kfmt.inspect.dump.decoders.converter import message_json

KAFKA_36_CONTROL_TYPES = {ControlType.ABORT, ControlType.COMMIT, ControlType.LEADER_CHANGE,
                          ControlType.SNAPSHOT_HEADER, ControlType.SNAPSHOT_FOOTER}
SCHEMAS = {ControlType.LEADER_CHANGE: LEADER_CHANGE, ControlType.SNAPSHOT_HEADER: SNAPSHOT_HEADER,
           ControlType.SNAPSHOT_FOOTER: SNAPSHOT_FOOTER, ControlType.KRAFT_VERSION: KRAFT_VERSION,
           ControlType.KRAFT_VOTERS: VOTERS}
_HEADER_FOOTER = {ControlType.SNAPSHOT_HEADER: "SnapshotHeader", ControlType.SNAPSHOT_FOOTER: "SnapshotFooter"}
LABELS = {  # Kafka version -> the control types its dump parses, and the text before their JSON
    "3.6": _HEADER_FOOTER,
    "4.1": {**_HEADER_FOOTER, ControlType.LEADER_CHANGE: "LeaderChange:",
            ControlType.KRAFT_VERSION: "KRaftVersion", ControlType.KRAFT_VOTERS: "KRaftVoters"},
}


def control_info(key: bytes | None, value: bytes | None, kafka_version: str) -> ControlInfo:
    kind = control_type(key)
    type_id = control_type_id(key)
    known = kind != ControlType.UNKNOWN and (kafka_version != "3.6" or kind in KAFKA_36_CONTROL_TYPES)
    name = kind.name if known else "UNKNOWN"
    if kind in (ControlType.ABORT, ControlType.COMMIT):
        _version, coordinator_epoch = end_txn_marker(value)
        return ControlInfo(type_id, name, coordinator_epoch=coordinator_epoch)
    schema = SCHEMAS.get(kind)
    if schema is None:
        return ControlInfo(type_id, name)
    label = LABELS[kafka_version].get(kind)
    what = f"{kind.name.lower().replace('_', ' ')} record"
    if label is None:
        try:
            return ControlInfo(type_id, name, json=_json(schema, value, what, kafka_version))
        except DataError:
            return ControlInfo(type_id, name)
    return ControlInfo(type_id, name, json=_json(schema, value, what, kafka_version), label=label)


def _json(schema, value: bytes | None, what: str, kafka_version: str) -> str:
    if value is None or len(value) < INT16.size:
        raise DataError(f"{what}: a control record value of {0 if value is None else len(value)} bytes")
    # ControlRecordUtils: Kafka 3.6 read the records it knew at version 0; 4.x at their own version
    version = 0 if kafka_version == "3.6" else INT16.unpack_from(value)[0]
    fields = read_message(schema, value, version, what)
    return jackson.write(message_json(schema, fields, version))
