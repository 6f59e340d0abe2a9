"""Verifying one partition directory: every file kind, each by its own module, against the log."""
from __future__ import annotations

from kfmt.partition.layout import SEGMENT_NAME, PartitionDir
from kfmt.partition.load_recovery import TRUSTED, LoadRecovery

from .checkpoints import LeaderEpochs, PartitionRange, check_partition_metadata
from .indexes import IndexChecker
from .log import LogChecker
from .problems import RebuiltOnLoad, VerifyReport
from .snapshots import check_snapshots
from .txn import TxnChecker

# Suffixes of files a broker leaves in transit (docs/format.md §12.4): it completes or deletes them at startup.
TRANSIENT_SUFFIXES = (".deleted", ".cleaned", ".swap")


def verify_partition(part: PartitionDir, report: VerifyReport, on_segment=None,
                     recovery: LoadRecovery = TRUSTED, walkers=(), deep: bool = False) -> PartitionRange:
    """Check every file of `part`; `on_segment()` is called after each segment (progress).
    `recovery`: which segments a broker recovers on load, whose index problems are notes.
    `walkers` (SegmentWalkers, kfmt.partition.reader) are shown the log's entries as it is checked.
    `deep`: the record-level checks too (kfmt.inspect.verify.log's two depths)."""
    report.counts.partitions += 1
    _check_manifest(part, report)
    _check_file_names(part, report)
    check_partition_metadata(part, report)
    epochs = LeaderEpochs(part, report)
    txns = TxnChecker(part, report)
    log = LogChecker(part, report, observers=(epochs, txns), walkers=walkers, deep=deep)
    index_checker = IndexChecker(part, report)
    ranges: dict[int, tuple[int | None, int | None]] = {}
    log_end = None
    recovered = False  # the last segment's tail is truncated by log recovery on load
    for i, seg in enumerate(part.segments):
        active = i == len(part.segments) - 1
        rebuilt = recovery.rebuilds(part.segments, i)
        index_checker.report = RebuiltOnLoad(report, recovery.why) if rebuilt else report
        if active:
            index_checker.preload(seg)
        facts = log.check_segment(seg, active)
        if facts.recovered_tail:
            recovered = True
            # LogSegment.recover resets the segment's indexes and rebuilds them from the batches it
            # keeps: the entries on disk (some past the cut) never reach a reader.
            report.note("index-rebuilt", "the indexes of this segment are rebuilt by the log "
                        "recovery that truncates its tail (LogSegment.recover): their entries are not "
                        "checked", facts.file)
        else:
            preallocated = index_checker.check_offset_index(facts, active)
            index_checker.check_time_index(facts, active, preallocated)
        ranges[seg.base_offset] = (facts.first_offset, facts.last_offset)
        # The log end offset is the last segment's next offset, or its base when it is empty
        # (LogSegment.readNextOffset).
        log_end = facts.last_offset + 1 if facts.last_offset is not None else seg.base_offset
        if on_segment is not None:
            on_segment()
    txns.finish(ranges, log_end)
    epochs.finish(log_end)
    check_snapshots(part, report, log_end, recovered)
    return PartitionRange(part.topic, part.partition,
                          part.segments[0].base_offset if part.segments else None, log_end)


def _check_manifest(part: PartitionDir, report: VerifyReport) -> None:
    """A kfmt output on object storage is what its manifest lists (kfmt.storage.manifest): a listed file that
    is missing or has another size is lost data; an unlisted one is ignored by every reader."""
    for problem in part.manifest_problems:
        name, _, message = problem.partition(": ")
        if "not listed in" in message:
            report.note("manifest", message, part.display(name))
        else:
            report.error("manifest", message, part.display(name))


def _check_file_names(part: PartitionDir, report: VerifyReport) -> None:
    for name in part.ignored:
        report.error("segment-files", "Kafka takes every file ending in .log for a segment and cannot parse "
                     "this name (expected <20-digit base offset>.log): the partition fails to load",
                     part.display(name))
    bases = {seg.base_offset for seg in part.segments}
    for name in sorted(part.files):
        m = SEGMENT_NAME.match(name)
        if m and m[2] in ("index", "timeindex", "txnindex") and int(m[1]) not in bases:
            report.note("segment-files", f"no {m[1]}.log beside this index: Kafka deletes orphan index "
                        f"files at startup", part.display(name))
        elif name.endswith(TRANSIENT_SUFFIXES):
            report.note("segment-files", "a file in transit (swap/clean/delete): the broker completes or "
                        "deletes it at startup (docs/format.md §12.4)", part.display(name))
