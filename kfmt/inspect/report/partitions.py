"""One partition's part of the report: what `kfmt info` says of it (kfmt.inspect.info, called, not
redone), where its segments lie (kfmt.inspect.report.segments) and its state as a broker would load it:
the log start offset and the segments wholly below it (deleted by retention or DeleteRecords and not
yet removed), the cleaner's checkpoint (where the dirty section of a compacted log starts), the active
segment, and the offset gaps between segments."""
from __future__ import annotations

import functools

from kfmt.errors import DataError
from kfmt.inspect.info import InfoWalk
from kfmt.inspect.per_partition import map_partitions
from kfmt.inspect.report.segments import SegmentFacts, SegmentWalk
from kfmt.partition.layout import PartitionDir
from kfmt.partition.live import read_whole
from kfmt.partition.reader import PartitionReader


def partition_reports(parts: list[PartitionDir], cleaner_offsets: dict) -> list[dict]:
    """partition_report of each, in parallel where it pays (kfmt.inspect.per_partition), in order."""
    return map_partitions(functools.partial(partition_report, cleaner_offsets=cleaner_offsets), parts,
                          "report")


def partition_report(part: PartitionDir, cleaner_offsets: dict) -> dict:
    """The partition's JSON, from one walk over its entries (ReportWalk)."""
    def attempt(p: PartitionDir) -> dict:
        walk = ReportWalk(p, cleaner_offsets)
        PartitionReader(p, recover_tail=True).walk([walk])
        return walk.result()

    return read_whole(part, attempt)


class ReportWalk:
    """A partition's part of the report as a SegmentWalker (kfmt.partition.reader): `kfmt info`'s
    walk (kfmt.inspect.info.InfoWalk, the same code, not redone) and the segments' own facts
    (kfmt.inspect.report.segments) from the same chunks of entries, shown by PartitionReader.walk or
    by verify's log check (`kfmt report` with verify: one pass over the bytes for all three)."""

    done = False  # every segment is wanted

    def __init__(self, part: PartitionDir, cleaner_offsets: dict):
        self.part, self.cleaner_offsets = part, cleaner_offsets
        self.walkers = (InfoWalk(part), SegmentWalk(part))

    def on_segment(self, seg, d) -> None:
        for w in self.walkers:
            w.on_segment(seg, d)

    def on_chunk(self, seg, d, rows) -> None:
        for w in self.walkers:
            if not w.done:
                w.on_chunk(seg, d, rows)

    def on_tail(self, seg, d, tail) -> None:
        for w in self.walkers:
            w.on_tail(seg, d, tail)

    def result(self) -> dict:
        """info's fields (or `info_error`, the one line info failed with), then `name`,
        `segment_list`, `segment_gaps`, `cleaner_offset`, `transactional_batches`."""
        part, (info, walked) = self.part, self.walkers
        try:
            out = info.result().to_json()
        except DataError as err:  # a damaged partition: verify names every problem, info stops at the first
            out = {"topic": part.topic, "partition": part.partition, "path": part.storage.url_of(part.path),
                   "segments": len(part.segments), "bytes": sum(s.size for s in part.segments),
                   "info_error": str(err)}
        segments = walked.segments
        log_start = out.get("log_start_offset", part.log_start_offset)
        cleaner = self.cleaner_offsets.get((part.topic, part.partition))
        out["name"] = part.label
        out["cleaner_offset"] = cleaner
        out["transactional_batches"] = sum(s.transactional_batches for s in segments)
        out["segment_list"] = [_segment_json(s, i == len(segments) - 1, _next_base(segments, i), log_start,
                                             cleaner) for i, s in enumerate(segments)]
        out["segment_gaps"] = segment_gaps(segments)
        return out


def _next_base(segments: list[SegmentFacts], i: int) -> int | None:
    return segments[i + 1].base_offset if i + 1 < len(segments) else None


def _segment_json(s: SegmentFacts, active: bool, next_base: int | None, log_start: int | None,
                  cleaner: int | None) -> dict:
    out = s.to_json()
    out["active"] = active
    # Retention deletes whole segments, and the log start offset moves past them first
    # (UnifiedLog.deleteOldSegments): a segment whose next one starts at or below it serves nothing.
    out["below_log_start"] = bool(log_start is not None and next_base is not None and next_base <= log_start)
    # The cleaner's checkpoint is where the last cleaning stopped (LogCleanerManager): segments
    # wholly below it are cleaned, the rest is the dirty section (the active segment never is cleaned).
    out["cleaned"] = bool(cleaner is not None and not active and next_base is not None and next_base <= cleaner)
    return out


def segment_gaps(segments: list[SegmentFacts]) -> list[dict]:
    """Offsets no segment holds between one segment's last entry and the next one's first: what
    compaction or a deleted segment leaves ({"after", "before", "missing"})."""
    gaps = []
    for prev, nxt in zip(segments, segments[1:]):
        last = prev.last_offset
        start = nxt.first_offset if nxt.first_offset is not None else nxt.base_offset
        if last is not None and start > last + 1:
            gaps.append({"after": last, "before": start, "missing": start - last - 1})
    return gaps
