"""The cleaner's decisions for a run of uncompressed v0/v1 messages, in columns.

Uncompressed legacy data is one message per log entry (docs/format.md §3), so a segment of it holds
hundreds of thousands of one-record batches; deciding and rebuilding them one by one costs a decode,
an encode and a few dozen Python calls each. A run's records are decoded in one compiled call
(kfmt.format.legacy_runs.decode_run) and the filter's per-record rule (CleanerFilter's
`_retained_records`: latest offset of its key, tombstone retention, keyless) applied to the whole
block at once; per message that gives the same verdict, and the same removal counts, as the filter's
`decide` on its one-record batch. Under Kafka 4.0's rules (the default: no --keep-format) a kept
message is rebuilt as a v2 batch by kfmt.format.convert's rules, which the upgrade kernels
(legacy_runs.upgrade_pieces) write many at a time; a kept tombstone gets a delete horizon and is
left to the one-by-one path.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from kfmt.format import legacy_runs
from kfmt.format.batch_runs import CheckedRun
from kfmt.format.digest import ContentDigest
from kfmt.format.frames import header_of
from kfmt.transforms.cleanup.compaction.filter import CleanerFilter, is_present


@dataclass
class RunVerdict:
    """What becomes of each message of a run (rows of frames, in order)."""

    rows: np.ndarray
    records: pa.RecordBatch  # one row per message
    read: CheckedRun  # the messages as read: their count and content digest
    kept: np.ndarray  # bool per message
    tombstone: np.ndarray  # bool per message: kept with a null value (it needs a delete horizon)


def run_verdict(f: CleanerFilter, data, rows: np.ndarray, file: str, base: int, options) -> RunVerdict:
    """The filter's verdict on every message of a run of uncompressed legacy messages (rows of
    `data`, whose first byte is at file position `base`). Counts its removals on the filter."""
    decoded = legacy_runs.decode_run(data, rows, file, options, base)
    records = decoded.records
    last = header_of(rows[-1].item())
    f.transactions.on_batch(last)  # no legacy batch is transactional: only moves the aborted set on
    has_value = is_present(records.column(3))
    kept = f._retained_records(last, records, has_value)
    digest = ContentDigest()
    digest.update(records)
    first = int(rows["last_offset"][0])
    return RunVerdict(rows, records, CheckedRun(rows, digest, first), kept, kept & ~has_value)


def converted(data, rows: np.ndarray, file: str, base: int, options):
    """Kafka 4.0's v2 batches of the kept messages `rows` (legacy_runs.upgrade_pieces)."""
    yield from legacy_runs.upgrade_pieces(data, rows, file, options=options, base=base)
