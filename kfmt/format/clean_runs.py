"""What `kfmt verify`'s checks would find nothing to report in, vouched for by the compiled checks of
kfmt/csrc/verify.c without decoding: runs of entries (`clean_entries`) and a decoded batch's records
(`records_keep_rules`).

The checks themselves are verify's per-entry ones (kfmt.inspect.verify.log: LogChecker, which
reports every finding); these only let it skip the entries they vouch for. Without the kernels they
vouch for nothing (`vouches()` is False), and every entry goes through the checks.
tests/inspect/test_verify_runs.py holds the two paths together.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from kfmt.format.kernels import native
from kfmt.format.layout import MAGIC_V1, MAGIC_V2
from kfmt.format.model import Batch, TimestampType


def vouches() -> bool:
    """Whether runs are vouched for here (the compiled checks are built)."""
    return native is not None


def clean_entries(data, rows: np.ndarray, start: int, stop: int, base: int = 0) -> tuple[int, int]:
    """(where it stopped, records) of the uncompressed messages and uncompressed v2 data batches from
    rows[start] on (frames of `data`, the file from position `base` on) whose CRC, record structure
    and record offsets and timestamps the checks would accept; (start, 0) without the kernels."""
    if native is None:
        return start, 0
    return native.clean_entries(data, rows, start, stop, base)


def records_keep_rules(batch: Batch) -> bool:
    """Whether the record checks would find nothing to report in a decoded batch (offsets increasing
    and inside the batch's, CreateTime timestamps not above its maxTimestamp), judged in one compiled
    call instead of a numpy and a pyarrow call per batch; False (the checks then run and report)
    where it cannot tell."""
    h = batch.header
    if native is None or type(batch.records) is not pa.RecordBatch or h.base_offset is None:
        return False
    create_time = h.magic >= MAGIC_V1 and h.timestamp_type == TimestampType.CREATE_TIME
    verdict = native.records_keep_rules(batch.records, h.base_offset, h.last_offset,
                                        h.magic < MAGIC_V2 and bool(h.compression),
                                        h.max_timestamp if create_time else None)
    return verdict is True
