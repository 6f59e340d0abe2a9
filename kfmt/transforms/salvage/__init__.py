"""kfmt salvage: every intact batch of a damaged partition directory, written into a broker-ready one.

People reach for this when something is already wrong (a broker died, a disk filled, a copy was cut
short), so it never stops at bad data: it keeps every batch that is intact, drops what is not, and
reports every byte range it dropped and the offsets that range may have held.

An entry is *intact* when its framing is sound (docs/format.md §2), its CRC checks (v2: CRC-32C over
[21, end), §4.1; v0/v1: CRC-32 over [16, end), §3.1, inner messages included), it decodes strictly
(records, decompression within the configured limit, control records, §4.4-§4.6), and the fields the
CRC does not cover are plausible: its offsets lie inside its segment (at or above the file's base
offset, below the next segment's, within int32 of the base: §12.1), and a v2 partition leader epoch
is -1 or more. After an entry that is not intact, the scan resynchronises: it looks at every later
byte position for the next intact entry (numpy narrows the positions to those whose magic, size and
offset fields are plausible; each survivor is then checked in full), and the bytes in between are
dropped.

A broker needs offsets strictly increasing (docs/format.md §17 item 1). In genuine data the order of the entries in
a file is their offset order, so within a segment the longest chain of intact entries in file order
is kept as it is; an intact entry outside that chain (a region moved by a bad copy) is put back where
its offsets belong if they overlap nothing kept, and dropped otherwise: as a duplicate when it is
byte for byte an entry already kept (no offsets lost), as an overlap when it differs (its offsets are
reported: which version was right cannot be known, since base offsets are not covered by the CRC).
Replaying producer state must succeed too: a non-transactional batch of a producer whose transaction
stays open because its marker was lost makes Kafka refuse the partition (docs/format.md §8, §18 item 14), so it is
dropped and reported.

The offsets a dropped range may have held come from the intact entries around it in its file: from
the offset after the previous one's last (the segment's base offset when there is none) to the offset
before the next one's first (before the next segment's base when there is none; open-ended at the
end of the log). Nothing is invented: kept entries are copied byte for byte, segments keep their base
offsets (one whose every entry was lost stays, empty), and the companion files come from the
PartitionWriter (kfmt.partition.companions), as in every transform. `partition.metadata` is copied when it
parses; the leader-epoch-checkpoint is rebuilt from the batches kept.

Modules: `facts` (what a scan finds), `scan` (a segment file: intact entries, resynchronisation),
`order` (the offsets the CRC does not cover), `partition` (epochs, transactions, writing), `run` (a
whole run and its report). docs/salvage.md is the user's guide.
"""
from __future__ import annotations

from .facts import (
                    CORRUPT,
                    DUPLICATE,
                    EPOCH,
                    MISPLACED,
                    MISSING,
                    OVERLAP,
                    TRUNCATED,
                    TXN_STATE,
                    UNREADABLE,
                    ZEROS,
                    Dropped,
                    OffsetBounds,
                    SegmentScan,
)
from .partition import PartitionSalvage, SalvageOptions, salvage_partition, segment_ranges
from .run import SalvagePlan, plan_salvage, salvage
from .scan import examine, scan_segment

__all__ = ["CORRUPT", "DUPLICATE", "EPOCH", "MISPLACED", "MISSING", "OVERLAP", "TRUNCATED", "TXN_STATE",
           "UNREADABLE", "ZEROS", "Dropped", "PartitionSalvage", "SalvagePlan", "SalvageOptions", "OffsetBounds",
           "SegmentScan", "examine", "plan_salvage", "salvage", "salvage_partition", "scan_segment",
           "segment_ranges"]
