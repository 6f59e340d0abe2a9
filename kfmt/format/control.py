"""Control records: what a control batch's single record means (docs/format.md §4.6). The key is
kfmt.format.layout's CONTROL_KEY (version int16 0, type int16: 0 ABORT, 1 COMMIT, 2 LEADER_CHANGE, 3-6
KRaft); an ABORT or COMMIT marker's value is END_TXN_MARKER (version int16 0, coordinatorEpoch int32).
"""
from __future__ import annotations

import enum

from kfmt.errors import DataError
from kfmt.format.layout import CONTROL_KEY, END_TXN_MARKER

_KEY = CONTROL_KEY.struct
_MARKER = END_TXN_MARKER.struct


class ControlType(enum.IntEnum):
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6
    UNKNOWN = -1


def control_type(key: bytes | None) -> ControlType:
    """The type a control record's key names; UNKNOWN for types this version does not know."""
    if key is None or len(key) < _KEY.size:
        raise DataError(f"control record key of {0 if key is None else len(key)} bytes is shorter "
                        f"than {_KEY.size}")
    version, type_id = _KEY.unpack_from(key)
    if version < 0:
        raise DataError(f"control record key has a negative version {version}")
    try:
        return ControlType(type_id)
    except ValueError:
        return ControlType.UNKNOWN


def control_type_id(key: bytes) -> int:
    return _KEY.unpack_from(key)[1]


def end_txn_marker(value: bytes | None) -> tuple[int, int]:
    """(version, coordinatorEpoch) of an ABORT/COMMIT marker's value."""
    if value is None or len(value) < _MARKER.size:
        raise DataError(f"end transaction marker value of {0 if value is None else len(value)} "
                        f"bytes is shorter than {_MARKER.size}")
    version, coordinator_epoch = _MARKER.unpack_from(value)
    if version < 0:
        raise DataError(f"end transaction marker has a negative version {version}")
    return version, coordinator_epoch


def control_key(kind: ControlType) -> bytes:
    return _KEY.pack(0, int(kind))


def end_txn_marker_value(coordinator_epoch: int) -> bytes:
    return _MARKER.pack(0, coordinator_epoch)
