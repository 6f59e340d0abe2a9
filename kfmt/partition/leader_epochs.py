"""The leader-epoch cache log recovery keeps (Kafka's LeaderEpochFileCache, docs/format.md §9): what
the partition's `leader-epoch-checkpoint` holds after recovery (kfmt.partition.companions)."""
from __future__ import annotations

from kfmt.errors import DataError
from kfmt.format.model import BatchHeader
from kfmt.partition.checkpoints import EpochEntry


class LeaderEpochCache:
    """LeaderEpochFileCache (docs/format.md §9): loaded from the partition's existing checkpoint, if any, then fed by
    recovery the (epoch, base offset) of every v2 batch whose leader epoch is above the latest."""

    def __init__(self, initial: list[EpochEntry] | None = None):
        self.entries: list[EpochEntry] = []
        for entry in initial or []:
            self.assign(entry.epoch, entry.start_offset)

    def observe(self, header: BatchHeader) -> None:
        self.observe_epoch(header.partition_leader_epoch, header.base_offset)

    def observe_epoch(self, epoch: int, base_offset: int) -> None:
        if epoch >= 0 and (not self.entries or epoch > self.entries[-1].epoch):
            self.assign(epoch, base_offset)

    def assign(self, epoch: int, start_offset: int) -> None:
        if epoch < 0 or start_offset < 0:
            raise DataError(f"invalid leader epoch entry {epoch} {start_offset}")
        latest = self.entries[-1] if self.entries else None
        if latest is not None and epoch == latest.epoch and start_offset >= latest.start_offset:
            return  # not an update
        # entries that would not stay strictly increasing in epoch and offset are truncated away
        while self.entries and (self.entries[-1].epoch >= epoch
                                or self.entries[-1].start_offset >= start_offset):
            self.entries.pop()
        self.entries.append(EpochEntry(epoch, start_offset))

    def truncate_from_end(self, end_offset: int) -> None:
        self.entries = [e for e in self.entries if e.start_offset < end_offset]

    def truncate_from_start(self, start_offset: int) -> None:
        """The entries starting at or below the log start offset collapse into the last of them,
        moved to the log start offset."""
        before = [e for e in self.entries if e.start_offset <= start_offset]
        if before:
            self.entries = ([EpochEntry(before[-1].epoch, start_offset)]
                            + [e for e in self.entries if e.start_offset > start_offset])
