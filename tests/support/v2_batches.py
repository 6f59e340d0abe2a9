"""Build one v2 record batch from given records (for tests that need a batch with exact field values)."""
from __future__ import annotations

from kfmt.format.model import BatchHeader, TimestampType
from kfmt.plugin import registry


def v2_batch(records, base_offset: int, lat: bool) -> bytes:
    header = BatchHeader(magic=2, base_offset=base_offset,
                         last_offset=base_offset + max(records.num_rows - 1, 0), compression=0,
                         timestamp_type=TimestampType.LOG_APPEND_TIME if lat else TimestampType.CREATE_TIME,
                         max_timestamp=1700000000000, base_timestamp=0)
    return registry.get().format_for(2).encode(header, records)
