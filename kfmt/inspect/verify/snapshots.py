"""Checks of the producer-state snapshots `<offset>.snapshot` (docs/format.md §8).

The reader (kfmt.partition.snapshots, after ProducerStateManager.readSnapshot) checks the version, the CRC-32C
and the structure; a snapshot Kafka cannot read is deleted on load and producer state is rebuilt from
an older one or from the log. Beyond that:
* a snapshot describes the batches below its offset: its producers' last offsets and open
  transactions lie below it, each producer appears once;
* its offset is plausible: Kafka writes snapshots at segment bases (on roll) and at the log end
  offset (clean shutdown). One beyond the log end offset describes data the log does not hold (the
  broker deletes it on load: a problem); one that is neither a segment base nor the latest snapshot is
  a stray that the broker deletes (`removeStraySnapshots`), as is one below the log start: notes;
* the latest snapshot, at or after the last segment's base, holding fewer bytes than its header
  needs is one a running broker is writing (kfmt.partition.live): a note.
"""
from __future__ import annotations

from kfmt.errors import DataError
from kfmt.partition.layout import PartitionDir
from kfmt.partition.snapshots import ENTRY, HEADER, read_snapshot

from .problems import VerifyReport


def check_snapshots(part: PartitionDir, report: VerifyReport, log_end: int | None,
                    recovered: bool = False) -> None:
    """`recovered`: log recovery truncates the last segment's tail on load, and with it the
    snapshots beyond the new log end offset (ProducerStateManager.truncateAndReload): notes."""
    bases = {seg.base_offset for seg in part.segments}
    log_start = part.segments[0].base_offset if part.segments else None
    last_base = part.segments[-1].base_offset if part.segments else None
    latest = max(part.snapshots, default=None)
    for offset, info in sorted(part.snapshots.items()):
        file = part.display(info)
        report.counts.files += 1
        data = part.storage.read(info.path)
        try:
            entries = read_snapshot(data, file)
        except DataError as err:
            if offset == latest and last_base is not None and offset >= last_base and _cut_short(data):
                report.note("snapshot-in-progress", f"the latest snapshot is shorter than its header "
                            f"says ({len(data)} bytes): a running broker is writing it (taken at the "
                            f"roll, ProducerStateManager.takeSnapshot); a broker that cannot read it "
                            f"on load deletes it and rebuilds from an older one or the log", file, 0,
                            offset)
            else:
                report.data_error("snapshot", err, file, 0, offset)
            entries = []
        if log_end is not None and offset > log_end and recovered:
            report.note("snapshot-name", f"snapshot at offset {offset} is beyond the log end offset "
                        f"{log_end} that log recovery leaves after truncating the last segment's "
                        f"tail: Kafka deletes it on load and rebuilds producer state from the log",
                        file, None, offset)
        elif log_end is not None and offset > log_end:
            report.error("snapshot-name", f"snapshot at offset {offset} is beyond the log end offset "
                         f"{log_end}: it describes batches this log does not hold (expected a segment base "
                         f"or the log end offset)", file, None, offset)
        elif log_start is not None and offset < log_start:
            report.note("snapshot-name", f"snapshot at offset {offset} is below the log start offset "
                        f"{log_start}: Kafka deletes it on load", file, None, offset)
        elif last_base is not None and offset not in bases and not (offset == latest and offset > last_base):
            report.note("snapshot-name", f"snapshot at offset {offset} is neither a segment base nor the "
                        f"latest snapshot: Kafka deletes it on load as a stray", file, None, offset)
        seen = set()
        for i, entry in enumerate(entries):
            position = HEADER.size + i * ENTRY.size
            pid = entry.producer_id
            if pid < 0:
                report.error("snapshot-entry", f"entry {i} names producer {pid}, expected a producer id "
                             f">= 0", file, position, offset)
            if pid in seen:
                report.error("snapshot-entry", f"producer {pid} appears twice (expected one entry per "
                             f"producer)", file, position, offset)
            seen.add(pid)
            if entry.last_offset >= offset:
                report.error("snapshot-entry", f"producer {pid}'s last offset {entry.last_offset} is not "
                             f"below the snapshot offset {offset} (a snapshot reflects the batches below "
                             f"its offset)", file, position, entry.last_offset)
            if entry.current_txn_first_offset >= offset:
                report.error("snapshot-entry", f"producer {pid}'s open transaction starts at "
                             f"{entry.current_txn_first_offset}, not below the snapshot offset {offset}",
                             file, position, entry.current_txn_first_offset)


def _cut_short(data) -> bool:
    """A snapshot with fewer bytes than its header (or its declared entries) needs: one being written."""
    if len(data) < HEADER.size:
        return True
    _, _, count = HEADER.unpack_from(data)
    return 0 <= count and len(data) < HEADER.size + count * ENTRY.size
