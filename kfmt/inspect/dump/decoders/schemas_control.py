"""KRaft control record values (KIP-595, KIP-630): the messages after a control record's key, each
flexible, its first field the message's own int16 version. Kafka 3.6's dump prints SnapshotHeader
and SnapshotFooter as JSON; LeaderChange only as `controlType: LEADER_CHANGE(2)` (kfmt's JSON
form adds it decoded)."""
from __future__ import annotations

from kfmt.inspect.dump.decoders.protocol import F, message

_VOTER = (F("voterId", "int32"),)

LEADER_CHANGE = message(
    "LeaderChangeMessage", "0", "0+",
    F("version", "int16"),
    F("leaderId", "int32"),
    F("voters", "[]Voter", fields=_VOTER),
    F("grantingVoters", "[]Voter", fields=_VOTER),
)

SNAPSHOT_HEADER = message(
    "SnapshotHeaderRecord", "0", "0+",
    F("version", "int16"),
    F("lastContainedLogTimestamp", "int64"),
)

SNAPSHOT_FOOTER = message(
    "SnapshotFooterRecord", "0", "0+",
    F("version", "int16"),
)
