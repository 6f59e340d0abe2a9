"""KRaft control record values (KIP-595, KIP-630, KIP-853): the messages after a control record's
key, each flexible, its first field the message's own int16 version (the version it is read and
printed at). Kafka 3.6's dump prints SnapshotHeader and SnapshotFooter as JSON and only names the
others; Kafka 4.x's prints LeaderChange, KRaftVersion and KRaftVoters as JSON too."""
from __future__ import annotations

from kfmt.format.internal_topics.protocol import F, message

LEADER_CHANGE = message(
    "LeaderChangeMessage", "0-1", "0+",
    F("version", "int16"),
    F("leaderId", "int32"),
    F("voters", "[]Voter", fields=(F("voterId", "int32"), F("voterDirectoryId", "uuid", "1+"))),
    F("grantingVoters", "[]Voter", fields=(F("voterId", "int32"), F("voterDirectoryId", "uuid", "1+"))),
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

KRAFT_VERSION = message(
    "KRaftVersionRecord", "0", "0+",
    F("version", "int16"),
    F("kRaftVersion", "int16"),
)

VOTERS = message(
    "VotersRecord", "0", "0+",
    F("version", "int16"),
    F("voters", "[]Voter", fields=(
        F("voterId", "int32"),
        F("voterDirectoryId", "uuid"),
        F("endpoints", "[]Endpoint", fields=(F("name", "string"), F("host", "string"), F("port", "uint16"))),
        F("kRaftVersionFeature", "KRaftVersionFeature", fields=(
            F("minSupportedVersion", "int16"), F("maxSupportedVersion", "int16"))))),
)
