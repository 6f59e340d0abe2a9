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
from kfmt.format import batch_runs, segment
from kfmt.partition.layout import PartitionDir, Segment
from kfmt.partition.summary import PartitionTally


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
    first_offset: int | None = None  # where the partition's log begins: its first segment's base offset
    kept_from: int | None = None  # the first offset carried: the batch holding the log start may begin below
    segments: int = 0  # whole segments left out
    records: int = 0  # records left out (in segments left out, and in batches ending below it)
    carried: int = 0  # records below it carried in the batch that holds it

    @property
    def end(self) -> int:
        """The offset after those left out: the first one carried, at most the log start offset."""
        return self.log_start_offset if self.kept_from is None else min(self.kept_from, self.log_start_offset)

    def leaves_out(self) -> bool:
        return self.first_offset is not None and self.first_offset < self.end and (
            self.records > 0 or self.segments > 0)

    def note(self, label: str, log_dir: bool) -> str:
        text = (f"{label}: {self.records} record(s) below the log start offset {self.log_start_offset} "
                f"left out ({self.segments} whole segment(s)), as a broker serves the partition "
                f"(--include-deleted carries them)")
        if self.carried:
            text += (f"; {self.carried} record(s) below it share the batch holding it and are carried "
                     f"with it, " + ("hidden by DST's log-start-offset-checkpoint" if log_dir else
                                     "hidden by the first segment's name, the log start offset"))
        return text

    def to_json(self, label: str) -> dict:
        """The report's `below_log_start` entry (left_out_phrase reads it back)."""
        return {"partition": label, "log_start_offset": self.log_start_offset, "from": self.first_offset,
                "to": self.end, "records": self.records, "segments": self.segments, "carried": self.carried}


def left_out_phrase(entry: dict) -> str:
    """A `below_log_start` entry of a report as the summary line says it."""
    return (f"left out offsets {entry['from']}..{entry['to'] - 1} of {entry['partition']} "
            f"({entry['records']} record(s), {entry['segments']} whole segment(s)): below its log start "
            f"offset {entry['log_start_offset']}, which a broker does not serve")


def left_out_suffix(report: dict) -> str:
    """What a summary line adds for the report's `below_log_start` entries ('' when none)."""
    return "".join(f"; {left_out_phrase(e)}" for e in report.get("below_log_start") or [])


def below_log_start(part: PartitionDir, floor: int, tally: PartitionTally | None = None) -> BelowLogStart:
    """Count what lies below `floor`: records of batches ending below it (from their headers; a
    legacy compressed wrapper's by decompressing it), and those below it in the batch holding it.
    Data a broker no longer serves is not checked: damage there stops the count of its segment.
    With `tally` (restore's check of what it leaves out), every batch left out is checked and
    counted into it as kfmt.partition.summary counts a partition: whole segments, and the bytes
    of the first kept segment's batches ending below `floor`; damage is then an error."""
    out = BelowLogStart(floor, part.segments[0].base_offset if part.segments else None)
    kept = kept_segments(part, floor)
    storage = part.storage
    for seg in part.segments:
        whole = not kept or seg is not kept[0]
        data, file = storage.map(seg.log.path), part.display(seg.log)
        out.segments += whole
        try:
            if tally is not None:
                _tally_below(data, file, floor, tally, whole)
            if _count_below(out, data, file, floor):
                return out
        except DataError:
            if tally is not None:
                raise
        if not whole:
            break
    return out


def _count_below(out: BelowLogStart, data, file: str, floor: int) -> bool:
    """Count one segment's records below `floor` into `out`; True when it holds `floor` (or more)."""
    for header in segment.FrameScanner(data, file):
        if header.last_offset < floor:
            out.records += (header.records_count if header.records_count is not None
                            else len(segment.decode(data, header, file)))
            continue
        if header.base_offset is None or header.base_offset < floor:
            offsets = segment.decode(data, header, file).records.column(0).to_pylist()
            out.carried += sum(1 for o in offsets if o < floor)
            out.kept_from = offsets[0] if offsets else header.base_offset
        else:
            out.kept_from = header.base_offset
        return True
    return False


def _tally_below(data, file: str, floor: int, tally: PartitionTally, whole: bool) -> None:
    """The batches of a segment ending below `floor` (all of a segment left out whole) into `tally`,
    checked and counted as reindex counts what it writes (kfmt.format.batch_runs)."""
    end = len(data) if whole else first_kept_position(data, file, floor)
    if whole:
        tally.add_segment(end)
    else:
        tally.summary.log_bytes += end
    scanner = segment.FrameScanner(data, file, 0, end)
    for rows in scanner.chunks():
        for item in batch_runs.checked(data, rows, file, messages=True):
            tally.add(item)
    if scanner.tail.is_error:
        raise scanner.tail.error(file)


def left_out_entries(pairs) -> list[dict]:
    """The report's `below_log_start`: an entry for each (label, BelowLogStart or None) that leaves
    records out."""
    return [below.to_json(label) for label, below in pairs if below is not None and below.leaves_out()]
