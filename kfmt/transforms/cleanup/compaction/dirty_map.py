"""The offset map of a partition's dirty section, as Kafka's log cleaner builds it
(`Cleaner.buildOffsetMap`): from the first dirty offset (found through the offset index, as the
cleaner seeks) to the first uncleanable one, the latest offset of every key, data of aborted
transactions left out. When the map fills up, only the part mapped so far is cleaned
(kfmt.transforms.cleanup.compaction.cleaner)."""
from __future__ import annotations

import numpy as np

from kfmt.format import legacy_runs, segment
from kfmt.format.frames import header_of
from kfmt.format.model import BatchHeader, int64_values
from kfmt.partition.companions import control_facts
from kfmt.partition.layout import Segment
from kfmt.partition.reader import PartitionReader
from kfmt.transforms.cleanup.compaction.facts import PartitionFacts
from kfmt.transforms.cleanup.compaction.filter import is_present
from kfmt.format.offset_map import OffsetMap, record_key_hashes
from kfmt.transforms.cleanup.compaction.plan import CleanableRange, segments_between
from kfmt.transforms.cleanup.compaction.transactions import CleanedTransactions


def frame_chunks(reader: PartitionReader, seg: Segment, position: int = 0):
    """(the segment's bytes, rows of frames) for its entries from `position` on, in order, as
    reader.frames() walks them (a last segment's torn tail left out with a warning, any other
    raises)."""
    data = reader.data(seg, position)
    scanner = segment.FrameScanner(data.buf, data.file, position, None, data.base)
    for rows in scanner.chunks():
        yield data, rows
    if scanner.tail.is_error:
        if not (reader.recover_tail and seg is reader.part.segments[-1]):
            raise scanner.tail.error(data.file)
        scanner.tail.recovered(data.file)


class DirtyMapper:
    """Fills `offset_map` with the keys of the dirty section of `rng`."""

    def __init__(self, reader: PartitionReader, facts: PartitionFacts, rng: CleanableRange,
                 offset_map: OffsetMap):
        self.reader, self.part, self.facts, self.rng, self.map = reader, reader.part, facts, rng, offset_map
        self.end_offset = rng.first_dirty_offset

    def build(self) -> tuple[int, bool]:
        """Map the dirty section; (the offset the cleaning ends before, whether the map filled up)."""
        start, end = self.rng.first_dirty_offset, self.rng.first_uncleanable_offset
        txns = CleanedTransactions([t for t in self.facts.aborted
                                    if t.last_offset >= start and t.first_offset < end])
        dirty = segments_between(self.facts.segments, start, end)
        by_base = {s.base_offset: s for s in self.part.segments}
        seek = self.reader.start_point(from_offset=start)
        for i, info in enumerate(dirty):
            seg = by_base[info.base_offset]
            next_start = dirty[i + 1].base_offset if i + 1 < len(dirty) else end
            position = seek[1] if seg is self.part.segments[seek[0]] else 0
            for data, rows in frame_chunks(self.reader, seg, position):
                # runs of uncompressed legacy messages as one block where the map has room for all
                # their keys (so none can be refused); everything else, and a run near a full map,
                # one batch at a time
                done = 0
                for a, b in legacy_runs.message_runs(rows) + [(len(rows), len(rows))]:
                    if not self._map_each(seg, rows[done:a], txns, start):
                        return self.end_offset, True
                    if b > a and not self._map_messages(data, rows[a:b], txns, start) \
                            and not self._map_each(seg, rows[a:b], txns, start):
                        return self.end_offset, True
                    done = b
            # offset gaps: the mapped range reaches the next segment
            self.map.update_latest_offset(next_start - 1)
        return self.map.latest_offset + 1, False

    def _map_each(self, seg: Segment, rows: np.ndarray, txns: CleanedTransactions, start: int) -> bool:
        """_map_batch for each row, in order; False (the map is full) where it stopped."""
        for row in rows.tolist():
            header = header_of(row)
            if not self._map_batch(seg, header, txns, start):
                self.end_offset = self.map.latest_offset + 1
                return False
            if header.last_offset >= start:
                self.map.update_latest_offset(header.last_offset)
        return True

    def _map_messages(self, data, rows: np.ndarray, txns: CleanedTransactions, start: int) -> bool:
        """_map_batch and the latest-offset update for each message of a run of uncompressed legacy
        messages, on their records as one block (legacy_runs.decode_run); False, with nothing
        done, when the map might fill up among them (they then go one by one)."""
        records = legacy_runs.decode_run(data.buf, rows, data.file, self.reader.options, data.base).records
        offsets = int64_values(records.column(0))
        wanted = np.flatnonzero(is_present(records.column(2)) & (offsets >= start))
        if self.map.full or self.map.entries + wanted.size > self.map.max_entries:
            return False
        txns.on_batch(header_of(rows[-1].item()))  # no legacy batch is transactional
        if wanted.size:
            self.map.put(record_key_hashes(records, wanted), offsets[wanted])
        if int(rows["last_offset"][-1]) >= start:
            self.map.update_latest_offset(int(rows["last_offset"][-1]))
        return True

    def _map_batch(self, seg: Segment, header: BatchHeader, txns: CleanedTransactions, start: int) -> bool:
        """Map one batch's keys; False if the map filled up before all were taken."""
        if header.is_control:
            txns.on_control_batch(header, control_facts(self.reader.decode(seg, header))[0])
            return True
        if txns.on_batch(header):
            return True  # aborted data is never mapped
        records = self.reader.decode(seg, header).records
        keys = records.column(2)
        offsets = int64_values(records.column(0))
        wanted = np.flatnonzero(is_present(keys) & (offsets >= start))
        if not wanted.size:
            return True
        taken = self.map.put(record_key_hashes(records, wanted), offsets[wanted])
        return taken == wanted.size
