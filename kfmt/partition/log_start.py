"""What lies below a partition's log start offset (PartitionDir.log_start_offset), for the transforms.

A broker serves a partition from its log start offset: DeleteRecords (and retention) raise it, and
the next retention check deletes the segments whose *next* segment starts at or below it
(UnifiedLog.deleteOldSegments), so the segment holding it stays, with the records below it inside.
The transforms carry what a broker serves: segments wholly below the log start offset are left out,
and so are the batches of the first kept segment that end below it; the batch holding the log start
offset is carried whole (a batch is one unit on disk: its CRC, its producer sequence numbers and its
offsets cover all its records), and DST's log-start-offset-checkpoint keeps the offset so that a
broker serves DST from the same place.
"""
from __future__ import annotations

from dataclasses import dataclass

from kfmt.errors import DataError
from kfmt.format import segment
from kfmt.partition.layout import PartitionDir, Segment


def transform_floor(part: PartitionDir, include_deleted: bool) -> int | None:
    """The first offset a transform carries: the log start offset when it lies above the first
    segment's base offset (below it there is nothing to leave out); None for everything."""
    start = part.log_start_offset
    if include_deleted or start is None or not part.segments or start <= part.segments[0].base_offset:
        return None
    return start


def first_kept_position(data, file: str, floor: int) -> int:
    """The file position of a segment's first batch ending at or above `floor` (its size when none
    does): where a segment named `floor` begins (segment_start)."""
    for header in segment.FrameScanner(data, file):
        if header.last_offset >= floor:
            return header.position
    return len(data)


def segment_start(part: PartitionDir, floor: int | None, log_dir: bool) -> int | None:
    """Where the first segment of a transform's output begins when the log start offset must travel
    in its name: a partition directory written alone has no log directory, so no
    log-start-offset-checkpoint, and a broker starts its log at the first segment's base offset
    (LogLoader.load: max(checkpoint entry, first segment's base offset)). The segment is named after
    the log start offset and begins with the batch holding it, which may start below it: Kafka loads
    such a segment (LogSegment.recover checks a batch's last offset against the base offset, not its
    first) and serves from its base offset (docs/format.md §12.1). None: nothing to carry."""
    if log_dir or floor is None or not part.segments or floor <= part.segments[0].base_offset:
        return None
    return floor


def segment_start_note(label: str, start: int) -> str:
    return (f"{label}: the first segment written as {start:020d}.log, from the batch holding the log start "
            f"offset {start} on: DST is a partition directory, without a log directory's "
            f"log-start-offset-checkpoint, and a broker starts a log at its first segment's base offset "
            f"(docs/format.md §12.1)")


def kept_segments(part: PartitionDir, floor: int | None) -> list[Segment]:
    """The segments a broker still keeps for log start offset `floor`: all from the last one whose
    base offset is <= floor (the retention check deletes a segment when the next one starts at or
    below the log start offset)."""
    segs = part.segments
    if floor is None:
        return list(segs)
    first = 0
    while first + 1 < len(segs) and segs[first + 1].base_offset <= floor:
        first += 1
    return list(segs[first:])


@dataclass
class BelowLogStart:
    """What a transform leaves out of a partition below its log start offset, and what it carries."""

    log_start_offset: int
    segments: int = 0  # whole segments left out
    records: int = 0  # records left out (in segments left out, and in batches ending below it)
    carried: int = 0  # records below it carried in the batch that holds it

    def note(self, label: str, log_dir: bool) -> str:
        text = (f"{label}: {self.records} record(s) below the log start offset {self.log_start_offset} "
                f"left out ({self.segments} whole segment(s)), as a broker serves the partition "
                f"(--include-deleted carries them)")
        if self.carried:
            text += (f"; {self.carried} record(s) below it share the batch holding it and are carried "
                     f"with it, " + ("hidden by DST's log-start-offset-checkpoint" if log_dir else
                                     "hidden by the first segment's name, the log start offset"))
        return text


def below_log_start(part: PartitionDir, floor: int) -> BelowLogStart:
    """Count what lies below `floor`: records of batches ending below it (from their headers; a
    legacy compressed wrapper's by decompressing it), and those below it in the batch holding it.
    Data a broker no longer serves is not checked: damage there stops the count of its segment."""
    out = BelowLogStart(floor)
    kept = {seg.base_offset for seg in kept_segments(part, floor)}
    storage = part.storage
    for seg in part.segments:
        if seg.base_offset > floor:
            break
        out.segments += seg.base_offset not in kept
        data, file = storage.map(seg.log.path), part.display(seg.log)
        try:
            for header in segment.FrameScanner(data, file):
                if header.last_offset < floor:
                    out.records += (header.records_count if header.records_count is not None
                                    else len(segment.decode(data, header, file)))
                elif header.base_offset is None or header.base_offset < floor:
                    offsets = segment.decode(data, header, file).records.column(0).to_pylist()
                    out.carried += sum(1 for o in offsets if o < floor)
                    return out
                else:
                    return out
        except DataError:
            continue
    return out
