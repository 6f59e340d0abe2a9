"""One cleaning of one partition, as Kafka's log cleaner does it (`Cleaner.doClean`), into DST.

1. Facts (kfmt.transforms.cleanup.compaction.facts) and the cleanable range (kfmt.transforms.cleanup.compaction.plan).
2. The offset map of the dirty section (kfmt.transforms.cleanup.compaction.dirty_map): the latest
   offset of every key from the first dirty offset to the first uncleanable one. If the map fills
   up, only the part mapped so far is cleaned.
3. Every segment from the start of the log to the end of the mapped range is rewritten, group by
   group (kfmt.transforms.cleanup.compaction.plan.group_segments), batch by batch through the filter
   (kfmt.transforms.cleanup.compaction.filter); each group starts a new segment at its first segment's base offset, even
   if it ends up empty, and gets the modification time of its last segment.
4. The segments after the mapped range are copied byte for byte with their modification times.
The partition writer (kfmt.write.writer) gives every segment its companion files and rolls a group that
would outgrow segment.bytes (possible only when v0/v1 data grows into v2).

Memory: the offset map (fixed size) plus one batch at a time; nothing grows with the partition.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from kfmt.errors import DataError, KfmtError, UsageError
from kfmt.format import batch_runs, legacy_runs
from kfmt.format.batch_runs import CheckedRun
from kfmt.format.frames import header_of
from kfmt.format.layout import MAGIC_V2
from kfmt.format.model import Batch, BatchHeader
from kfmt.partition.companions import control_facts, existing_leader_epochs
from kfmt.partition.layout import PARTITION_METADATA, Segment, segment_file_name
from kfmt.partition.log_start import below_log_start, first_kept_position, kept_segments, segment_start
from kfmt.partition.topic_identity import TopicIdentity
from kfmt.partition.reader import PartitionReader
from kfmt.partition.summary import PartitionCounts, PartitionTally
from kfmt.plugin import registry
from kfmt.transforms.cleanup.compaction import message_runs
from kfmt.transforms.cleanup.compaction.details import cleaning_details
from kfmt.transforms.cleanup.compaction.dirty_map import DirtyMapper, frame_chunks
from kfmt.transforms.cleanup.compaction.facts import (
    PartitionFacts,
    SegmentInfo,
    gather_facts,
)
from kfmt.transforms.cleanup.compaction.filter import Action, BatchRetention, CleanerFilter
from kfmt.format.offset_map import OffsetMap
from kfmt.transforms.cleanup.compaction.outcome import (
    CleanStats,
    CompactOptions,
    CompactResult,
    DrySink,
    OffsetMapFull,
)
from kfmt.transforms.cleanup.compaction.plan import (
    CleanableRange,
    cleanable_range,
    group_segments,
    legacy_delete_horizon,
    segments_between,
)
from kfmt.transforms.cleanup.compaction.rewrite import empty_batch, retained_batch
from kfmt.transforms.cleanup.compaction.transactions import CleanedTransactions
from kfmt.transforms.cleanup.plan import COMPACT, PartitionJob, cleanup_policy
from kfmt.transforms.rewrite import walked
from kfmt.write.writer import PartitionWriter, WriteSummary


def compact_partition(job: PartitionJob, files, options: CompactOptions,
                      dry_run: bool = False) -> CompactResult:
    """Clean one partition, writing the result through `files` (the StagedFiles of DST, or a
    StagingTarget's on an executor) unless `dry_run`."""
    part = job.open()
    if not part.segments:
        return _without_segments(job, part, files, dry_run)
    log_start = max(job.log_start_offset or 0, part.segments[0].base_offset)
    # a partition-directory DST carries the log start offset in its first segment's name: what lies
    # below is left out, as a broker's retention check deletes the segments wholly below it
    start = None if options.include_deleted else segment_start(part, log_start, bool(job.rel))
    below = None if start is None else below_log_start(part, start)
    if start is not None:
        part = replace(part, segments=kept_segments(part, start))
    reader = PartitionReader(part, recover_tail=True)
    facts = gather_facts(reader, options.now_ms, options.producer_expiration_ms)
    stable = facts.log_end_offset
    if facts.first_unstable_offset is not None:
        stable = min(stable, facts.first_unstable_offset)
    if job.high_watermark is not None:
        stable = min(stable, job.high_watermark)
    rng = cleanable_range(facts.segments, log_start_offset=log_start, log_end_offset=facts.log_end_offset,
                          checkpoint=job.cleaner_offset, last_stable_offset=stable,
                          clean_until=options.clean_until,
                          min_compaction_lag_ms=options.min_compaction_lag_ms, now_ms=options.now_ms,
                          compacts=COMPACT in cleanup_policy(options.cleanup_policy))
    cleaner = _Cleaner(job, reader, facts, rng, options, start)
    before = set(files.records) if not dry_run else set()
    sink = DrySink() if dry_run else PartitionWriter(
        files, job.rel, options.roll_policy(), start_offset=start, source=part, identity=job.identity,
        now_ms=options.now_ms,
        producer_expiration_ms=options.producer_expiration_ms, log_start_offset=job.log_start_offset or 0,
        leader_epochs=existing_leader_epochs(part))
    try:
        written = cleaner.run(sink)
    except BaseException:
        sink.abort()
        raise
    if not dry_run:
        cleaner.restore_mtimes(files, written)
    new_files = [] if dry_run else [r for rel, r in files.records.items() if rel not in before]
    output = cleaner.output.finish()
    output.segments, output.log_bytes = len(written.segments), sum(s.size for s in written.segments)
    return CompactResult(job.label, job.rel, part.topic, part.partition, cleaning_details(cleaner, written),
                         cleaner.input.finish(), None if dry_run else output, new_files,
                         cleaner.cleaner_offset, start, below)


def _without_segments(job: PartitionJob, part, files, dry_run: bool) -> CompactResult:
    """A partition directory without segments has nothing to clean; it stays an empty directory
    (with its partition.metadata), as kfmt reindex keeps it."""
    summary = PartitionCounts(part.storage.url_of(part.path), part.topic, part.partition)
    written = []
    if not dry_run:
        before = set(files.records)
        if job.rel:
            files.makedirs(job.rel)
        TopicIdentity.of(job.identity, part).write_into(files, job.rel_path(PARTITION_METADATA))
        written = [r for rel, r in files.records.items() if rel not in before]
    details = {"cleanable": False, "first_dirty_offset": None, "first_uncleanable_offset": None,
               "notes": ["the partition has no segments: nothing to clean"]}
    return CompactResult(job.label, job.rel, part.topic, part.partition, details, summary,
                         None if dry_run else summary, written, job.cleaner_offset)


class _Cleaner:
    def __init__(self, job: PartitionJob, reader: PartitionReader, facts: PartitionFacts,
                 rng: CleanableRange, options: CompactOptions, start: int | None = None):
        self.job, self.reader, self.part, self.facts, self.rng, self.options = \
            job, reader, reader.part, facts, rng, options
        # the first output segment's base offset when it carries the log start offset (None: the
        # first source segment's); the first segment's batches ending below it are left out
        self.start = start
        self._first_kept: int | None = None  # _kept_position of the first segment, once scanned
        self.map = OffsetMap(options.offset_map_bytes, options.offset_map_load_factor)
        self.map_full = False
        self.end_offset = rng.first_dirty_offset  # after the cleaning: the first dirty offset
        label = self.part.storage.url_of(self.part.path)
        self.input = PartitionTally(PartitionCounts(label, self.part.topic, self.part.partition))
        self.output = PartitionTally(PartitionCounts(label, self.part.topic, self.part.partition))
        for seg in self.part.segments:
            self.input.add_segment(seg.size)
        self.stats = CleanStats()
        self.filter: CleanerFilter | None = None
        self.segment_mtimes: dict[int, int] = {}  # output segment base -> its modification time
        self.groups: list[list[SegmentInfo]] = []

    @property
    def cleaner_offset(self) -> int | None:
        if not self.rng.cleanable:
            return self.job.cleaner_offset
        return self.end_offset

    # --- the offset map ---
    def build_offset_map(self) -> None:
        """Cleaner.buildOffsetMap over [first dirty, first uncleanable) (kfmt.transforms.cleanup.compaction.dirty_map)."""
        self.end_offset, self.map_full = DirtyMapper(self.reader, self.facts, self.rng, self.map).build()

    # --- the cleaning ---
    def run(self, sink) -> WriteSummary:
        o = self.options
        horizon = 0
        if self.rng.cleanable:
            self.build_offset_map()
            if self.map_full and o.fail_when_map_full:
                raise OffsetMapFull(
                    f"{self.job.label}: the offset map ({o.offset_map_bytes} bytes, room for "
                    f"{self.map.max_entries} keys) filled up at offset {self.map.latest_offset} of the dirty "
                    f"range [{self.rng.first_dirty_offset}, {self.rng.first_uncleanable_offset}); give a "
                    f"larger --offset-map-bytes, or leave out --fail-when-map-full to clean the part "
                    f"mapped (a later run on the output cleans on from there)")
            self.groups = group_segments(segments_between(self.facts.segments, 0, self.end_offset),
                                         o.segment_bytes, o.segment_index_bytes,
                                         self.rng.first_uncleanable_offset)
            self.filter = CleanerFilter(
                self.map, CleanedTransactions(self.facts.aborted), self.facts.active_producers,
                self.rng.first_uncleanable_offset, o.now_ms, o.delete_retention_ms,
                convert_legacy=not o.keep_format)
            horizon = legacy_delete_horizon(self.facts.segments, self.rng.first_dirty_offset,
                                            o.delete_retention_ms)
        cleaned = {s.base_offset for group in self.groups for s in group}
        by_base = {s.base_offset: s for s in self.part.segments}
        for group in self.groups:
            mtime = group[-1].mtime_ms
            self.segment_mtimes[self._roll(sink, group[0].base_offset)] = mtime
            for info in group:
                self.filter.retain_legacy_deletes = info.mtime_ms > horizon
                self.stats.bytes_read += info.size - self._kept_position(by_base[info.base_offset])
                self._clean_segment(by_base[info.base_offset], sink, mtime)
        copied = 0
        for info in self.facts.segments:
            if info.base_offset not in cleaned:
                self.segment_mtimes[self._roll(sink, info.base_offset)] = info.mtime_ms
                self._copy_segment(by_base[info.base_offset], sink)
                copied += info.size - self._kept_position(by_base[info.base_offset])
        written = sink.close()
        self.stats.bytes_written = sum(s.size for s in written.segments) - copied
        return written

    def _roll(self, sink, base: int) -> int:
        """Start the output segment of a source segment (or group) based at `base`; the first one
        at the log start offset it carries. Returns the base offset it got."""
        if self.start is not None and base < self.start:
            base = self.start
        sink.roll(base)
        return base

    def _kept_position(self, seg: Segment) -> int:
        """Where the entries carried begin: after the first segment's batches ending below the log
        start offset its new name carries (kfmt.partition.log_start.first_kept_position)."""
        if self.start is None or seg is not self.part.segments[0] or seg.base_offset >= self.start:
            return 0
        if self._first_kept is None:
            data = self.reader.data(seg)
            self._first_kept = first_kept_position(data.buf, data.file, self.start)
        return self._first_kept

    def _clean_segment(self, seg: Segment, sink, mtime: int) -> None:
        """The segment's entries through the filter, in order: under Kafka 4.0's rules runs of
        uncompressed legacy messages many at a time (message_runs), every other entry one by one."""
        for data, rows in frame_chunks(self.reader, seg, self._kept_position(seg)):
            spans = legacy_runs.message_runs(rows) if not self.options.keep_format else []
            done = 0
            for start, stop in spans + [(len(rows), len(rows))]:
                for row in rows[done:start].tolist():
                    self._clean_one(seg, header_of(row), sink, mtime)
                if stop > start:
                    self._clean_messages(data, rows[start:stop], sink, mtime)
                done = stop

    def _clean_messages(self, data, rows: np.ndarray, sink, mtime: int) -> None:
        """A run of uncompressed legacy messages, each its own one-record batch (Kafka 4.0: a kept
        one becomes a v2 batch): the filter's rule on their records as one block, the kept ones
        converted by the upgrade kernels, a kept tombstone (it gets a delete horizon) one by one."""
        f, options = self.filter, self.reader.options
        verdict = message_runs.run_verdict(f, data.buf, rows, data.file, data.base, options)
        n, kept = len(rows), int(verdict.kept.sum())
        self.input.add(verdict.read)
        self.stats.batches_read += n
        self.stats.records_read += n
        self.stats.batches[Action.DROP.value] += n - kept
        self.stats.batches[Action.REWRITE.value] += kept
        self.stats.converted_batches += kept
        self.stats.records_written += kept
        ends = rows["last_offset"] + 1
        for i in np.flatnonzero(~verdict.kept & (ends == f.upper_bound_offset)).tolist():
            header = header_of(rows[i].item())  # RETAIN_EMPTY: see CleanerFilter.decide
            f.notes.append(f"batch {header.base_offset}..{header.last_offset}: every record was removed "
                           f"from the last v{header.magic} batch of the cleaning; Kafka's cleaner cannot "
                           f"keep an empty v0/v1 batch and fails this cleaning (IllegalStateException); "
                           f"kfmt drops the batch")
        # in order: stretches of plain kept messages converted together, each tombstone alone
        edges = np.flatnonzero(verdict.tombstone).tolist()
        start = 0
        for stop in edges + [n]:
            plain = rows[start:stop][verdict.kept[start:stop]]
            if len(plain):
                for piece in message_runs.converted(data.buf, plain, data.file, data.base, options):
                    try:
                        sink.append_frames(piece.rows, piece.entries, mtime_ms=mtime)
                    except (DataError, UsageError) as err:
                        raise _located(err, data.file, header_of(plain[0].item()))
                    for out in walked(piece):
                        self.output.add(out)
            if stop < n:
                header = header_of(rows[stop].item())
                one = verdict.records.slice(stop, 1)
                out = retained_batch(Batch(header, one), np.ones(1, bool),
                                     self.options.now_ms + self.options.delete_retention_ms,
                                     convert_legacy=True)
                try:
                    sink.append_batch(out, level=self._level(out), mtime_ms=mtime)
                except (DataError, UsageError) as err:
                    raise _located(err, data.file, header)
                self.output.add_batch(out)
            start = stop + 1

    def _level(self, batch: Batch):
        """The level a batch compressed anew is written at: --compression-level's, else the level
        Kafka's cleaner writes (Levels.kafka), so that the output is the broker's byte for byte."""
        codec = batch.header.compression
        if codec in self.options.compression_levels:
            return self.options.compression_levels[codec]
        plugin = registry.get().compressions.get(codec)
        levels = plugin.levels if plugin is not None else None
        return levels.kafka_level if levels is not None else None

    def _clean_one(self, seg: Segment, header: BatchHeader, sink, mtime: int) -> None:
        f = self.filter
        self.stats.batches_read += 1
        try:
            batch = self.reader.decode(seg, header) if header.is_control else None
            check = f.check_batch(header, control_facts(batch)[0] if batch is not None else None)
            if check.retention == BatchRetention.DELETE:
                self._count_input(seg, header, batch)
                f.count_deleted(header)
                self.stats.batches[Action.DROP.value] += 1
                return
            if batch is None:
                batch = self.reader.decode(seg, header)
            self._count_input(seg, header, batch)
            decision = f.decide(batch, check)
            self.stats.batches[decision.action.value] += 1
            if decision.action == Action.COPY:
                sink.append(batch.header, self._entry(seg, header), mtime_ms=mtime)
                self._count_output(batch)
            elif decision.action == Action.REWRITE:
                out = retained_batch(batch, decision.retained, decision.delete_horizon,
                                     convert_legacy=not self.options.keep_format)
                if self.start is not None and out.header.last_offset < self.start:
                    # a legacy batch holding the log start keeps only records below it: a first
                    # segment named after the log start offset cannot hold it (docs/format.md §12.1)
                    f.notes.append(f"batch {header.base_offset}..{header.last_offset}: the records "
                                   f"the cleaning kept all lie below the log start offset {self.start}: "
                                   f"left out of DST's first segment, which is named after it")
                    return
                if header.magic < MAGIC_V2 and out.header.magic >= MAGIC_V2:
                    self.stats.converted_batches += 1
                sink.append_batch(out, level=self._level(out), mtime_ms=mtime)
                self._count_output(out)
            elif decision.action == Action.EMPTY:
                out = empty_batch(header)
                sink.append_batch(out, level=self._level(out), mtime_ms=mtime)
                self._count_output(out)
        except (DataError, UsageError) as err:
            raise _located(err, self.part.display(seg.log), header)

    def _copy_segment(self, seg: Segment, sink) -> None:
        """A segment beyond the cleaned range, byte for byte: checked and counted by the run kernels
        where they vouch for its entries (kfmt.format.batch_runs, runs of data batches and legacy
        messages checked and digested in place, written many at a time), other entries decoded."""
        for data, rows in frame_chunks(self.reader, seg, self._kept_position(seg)):
            for item in batch_runs.checked(data.buf, rows, data.file, self.reader.options, data.base,
                                           messages=True):
                self.input.add(item)
                self.output.add(item)
                if isinstance(item, CheckedRun):
                    first, last = item.span(data.base)
                    try:
                        sink.append_frames(item.rows, memoryview(data.buf)[first:last],
                                           mtime_ms=seg.log.mtime_ms)
                    except (DataError, UsageError) as err:
                        named = item.rows[item.rows["last_offset"] == err.offset] \
                            if getattr(err, "offset", None) is not None else item.rows[:0]
                        row = named[0] if len(named) else item.rows[0]
                        raise _located(err, data.file, header_of(row.item()))
                    continue
                try:
                    sink.append(item.header, self._entry(seg, item.header), mtime_ms=seg.log.mtime_ms)
                except (DataError, UsageError) as err:
                    raise _located(err, data.file, item.header)

    def _entry(self, seg: Segment, header: BatchHeader) -> memoryview:
        data = self.reader.data(seg, header.position)
        start = header.position - data.base
        return memoryview(data.buf)[start:start + header.size]

    def _count_input(self, seg: Segment, header: BatchHeader, batch: Batch | None) -> None:
        batch = batch if batch is not None else self.reader.decode(seg, header)
        self.input.add_batch(batch)
        self.stats.records_read += len(batch)

    def _count_output(self, batch: Batch) -> None:
        self.output.add_batch(batch)
        self.stats.records_written += len(batch)

    def restore_mtimes(self, files, written: WriteSummary) -> None:
        """A segment nothing was written into still gets the modification time Kafka gives it (the
        last source segment's of its group), as do its index files: time retention and the legacy
        tombstone horizon read it."""
        for seg in written.segments:
            mtime = self.segment_mtimes.get(seg.base_offset)
            if seg.batches or mtime is None:
                continue
            for suffix in ("log", "index", "timeindex"):
                rel = self.job.rel_path(segment_file_name(seg.base_offset, suffix))
                if rel in files.records:
                    files.set_mtime(rel, mtime)


def _located(err: KfmtError, file: str, header: BatchHeader) -> DataError:
    """An error about a source batch, located there. The writer refuses batches that break the
    layout of a log (a batch below its segment's base offset, offsets that do not increase) as a
    caller's mistake; here the caller passes the source's layout on, so the source holds bad data."""
    if not isinstance(err, DataError):
        err = DataError(str(err))
    return err.located(file=file, base_position=header.position, offset=header.last_offset)
