"""Rewriting segments batch by batch, as upgrade and recompress do (resegment copies them whole):
a Rewriter says what becomes of each source batch; RewriteSegmentsTask runs it over a group of source
segments and writes the output segments; RewriteTransform plans those tasks for kfmt.transforms.run
(its dry run counts what each partition holds with kfmt.transforms.census)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np

from kfmt.errors import DataError, KfmtError
from kfmt.format import batch_runs, legacy_runs, segment, wrapper_runs
from kfmt.format.batch_runs import CheckedRun
from kfmt.format.frames import header_of
from kfmt.format.layout import MAGIC_AT
from kfmt.format.legacy_runs import RunUpgrader, UpgradedRun
from kfmt.format.model import INT32_MAX, Batch, BatchHeader
from kfmt.partition.companions import CompanionOptions, control_facts
from kfmt.plugin import registry
from kfmt.storage.staging import StagingTarget
from kfmt.transforms.census import Census, CensusTask
from kfmt.transforms.run import PartitionWork, SourceSegment, TaskResult, Transform, new_tally, task_groups
from kfmt.write.planner import RollPolicy
from kfmt.write.segment_writer import SegmentRunWriter
from kfmt.write.writer import WrittenSegment

# --- transforms that rewrite batches one source segment at a time (upgrade, recompress) ---

@dataclass(frozen=True)
class Output:
    """One batch a Rewriter produces: its entry bytes, the input batch it comes from (errors name its
    position), and the decoded input itself when the bytes are a copy."""

    entry: object  # bytes, or a view of the source's
    source: BatchHeader
    copied: Batch | None = None


class Rewriter:
    """The per-batch rule of a rewriting transform (picklable: it travels with every task)."""

    #: uncompressed v2 data batches are copied as they are: they are checked and digested where they
    #: lie and written many at a time (kfmt.format.batch_runs), never decoded into columns
    copies_uncompressed_v2 = False

    def outputs(self, header: BatchHeader, entry, batch: Batch) -> Iterator[Output]:
        """The output batches for one source entry (its header, bytes and decoded batch)."""
        raise NotImplementedError

    #: runs of uncompressed v2 data batches that `kept` leaves out go, checked in place, through
    #: rewrite_run instead of `outputs`
    rewrites_plain_v2 = False

    def rewrite_run(self, entries, rows: np.ndarray) -> tuple[bytes, np.ndarray]:
        """The output batches (bytes, rows of frames positioned from rows' first position) of a run
        of uncompressed v2 data batches (rows of frames and their bytes), where rewrites_plain_v2."""
        raise NotImplementedError

    def kept(self, rows: np.ndarray) -> np.ndarray | None:
        """Which rows of frames (v2 batches) `outputs` copies as they are, as a bool array, or None
        (only uncompressed v2 data batches, where copies_uncompressed_v2 says so): runs of them are
        checked and digested where they lie (kfmt.format.batch_runs, compressed ones too) and written
        many at a time, never decoded into columns."""
        return None

    def converts_wrappers(self) -> tuple[int | None, dict] | None:
        """How compressed v0/v1 wrappers become v2 batches a block at a time (kfmt.format.wrapper_runs:
        the bytes `outputs` would give them): (the codec of the batches made, None for each wrapper's
        own; codec id -> level), or None: one by one through `outputs`."""
        return None

    def run_upgrader(self, data, file: str) -> RunUpgrader | None:
        """What converts runs of uncompressed v0/v1 messages many at a time (kfmt.format.legacy_runs),
        or None: they go through `outputs` one by one."""
        return None

    def in_kernels(self, magic: int, codec: int) -> bool:
        """Whether entries of this format and codec are rewritten a run at a time by kernels that
        release the GIL (RewriteTransform.threads_suffice), not one by one in Python."""
        return False

    def describe(self, census: Census) -> list[str]:
        """Dry-run lines: what the rule will do with a partition holding these entries."""
        raise NotImplementedError


@dataclass(frozen=True)
class RewriteSegmentsTask:
    """Consecutive source segments of a partition, each rewritten into one or more output segments,
    the first at its base offset (later ones only where Kafka's roll rules demand,
    kfmt.write.writer.SegmentRunWriter)."""

    partition: int
    sources: tuple[SourceSegment, ...]
    target: StagingTarget
    rel: str
    policy: RollPolicy
    rewriter: Rewriter
    floor: int | None = None  # batches ending below it (below the log start offset) are left out
    start: int | None = None  # the first segment's base offset, when it carries the log start offset

    def run(self) -> TaskResult:
        files = self.target.files()
        result = TaskResult(self.partition, before=new_tally(), after=new_tally())
        for src in self.sources:
            result.segments += _SegmentRewrite(self, src, files, result).run()
        result.files = list(files.records.values())
        return result


class _SegmentRewrite:
    """One source segment through a Rewriter, in file order, a chunk of frames at a time: runs of
    uncompressed legacy messages through the rewriter's RunUpgrader (if it has one), uncompressed
    v2 data batches it copies as runs (kfmt.format.batch_runs), every other entry decoded and rewritten
    one by one. Both tallies come from what is read and what is written: "after" from the output's
    own bytes, walked (or decoded) again, so it checks the encoder's work, not its intentions."""

    def __init__(self, task: RewriteSegmentsTask, src: SourceSegment, files, result: TaskResult):
        self.src, self.rewriter, self.floor = src, task.rewriter, task.floor
        self.notes = result.notes
        self.before, self.after = result.before, result.after
        self.data = src.read()
        start = src.base_offset if task.start is None else max(src.base_offset, task.start)
        self.writer = SegmentRunWriter(files, task.rel, task.policy, start_offset=start)
        self.runs = self.rewriter.run_upgrader(self.data, src.file)

    def run(self) -> list[WrittenSegment]:
        self.before.add_segment(len(self.data))
        try:
            scanner = segment.FrameScanner(self.data, self.src.file)
            for rows in scanner.chunks():
                if self.floor is not None:
                    rows = rows[rows["last_offset"] >= self.floor]  # a prefix: offsets increase
                    if not len(rows):
                        continue
                self._chunk(rows)
            if self.runs is not None:
                self._converted(self.runs.finish(self.writer.position), self.runs.waiting)
            self.src.check_tail(scanner.tail, self.notes)
            return self.writer.close(empty_mtime_ms=self.src.mtime_ms)
        except BaseException:
            self.writer.abort()
            raise

    def _chunk(self, rows: np.ndarray) -> None:
        spans = legacy_runs.message_runs(rows) if self.runs is not None else []
        if self.runs is not None and (not spans or spans[0][0] > 0):
            self._converted(self.runs.finish(self.writer.position),  # the last chunk's run ended
                            self.runs.waiting)
        done = 0
        for start, stop in spans + [(len(rows), len(rows))]:
            if start > done:
                self._entries(rows[done:start])
            if stop > start:
                waiting, run = self.runs.waiting, rows[start:stop]
                source = run if waiting is None else np.concatenate([waiting, run])
                self._converted(self.runs.pieces(run, more=stop == len(rows),
                                                 out_position=self.writer.position), source)
            done = stop

    def _entries(self, rows: np.ndarray) -> None:
        """Entries other than runs of legacy messages: runs of compressed wrappers converted a block at
        a time where the rewriter says how (converts_wrappers), the rest as _others says."""
        wrappers = self.rewriter.converts_wrappers()
        if wrappers is None:
            return self._others(rows)
        is_wrapper = (rows["magic"] < 2) & (rows["compression"] != 0)
        for start, stop in _runs_of(is_wrapper):
            if is_wrapper[start]:
                self._wrappers(rows[start:stop], *wrappers)
            else:
                self._others(rows[start:stop])

    def _wrappers(self, rows: np.ndarray, codec: int | None, levels: dict) -> None:
        """Compressed wrappers converted a block at a time (kfmt.format.wrapper_runs); the tallies from
        the records read and from the batches made, walked again before compression."""
        for item in wrapper_runs.upgraded_wrappers(self.data, rows, self.src.file, levels, codec):
            if isinstance(item, Batch):
                self._one(item)
                continue
            self._append_frames(item.rows, item.entries, item.source_rows)
            self.before.add(CheckedRun(item.source_rows, item.before, item.first_offset))
            self.after.add(CheckedRun(item.rows, item.after, item.first_offset))

    def _others(self, rows: np.ndarray) -> None:
        """The batches the rewriter keeps (`kept`) copied as runs, uncompressed v2 data batches it
        changes through its rewrite_run as runs (where it has one), everything else one by one."""
        kept = self.rewriter.kept(rows)
        if kept is not None:
            for start, stop in _runs_of(kept):
                if kept[start]:
                    self._items(batch_runs.checked(self.data, rows[start:stop], self.src.file,
                                                   messages=True))
                elif self.rewriter.rewrites_plain_v2:
                    self._items(batch_runs.checked(self.data, rows[start:stop], self.src.file), kept=False)
                else:
                    self._items(segment.decode(self.data, header_of(row), self.src.file)
                                for row in rows[start:stop].tolist())
            return
        if self.rewriter.copies_uncompressed_v2:
            items = batch_runs.checked(self.data, rows, self.src.file)
        else:
            items = (segment.decode(self.data, header_of(row), self.src.file) for row in rows.tolist())
        self._items(items)

    def _items(self, items, kept: bool = True) -> None:
        """Write checked runs (copied where `kept`, else through the rewriter's rewrite_run) and
        decoded batches (through its outputs)."""
        for item in items:
            if isinstance(item, CheckedRun) and not kept:
                first, last = item.span()
                entries, rows = self.rewriter.rewrite_run(self.data[first:last], item.rows)
                self._append_frames(rows, entries, item.rows)
                self.before.add(item)
                for out in walked(UpgradedRun(entries, rows, item.digest)):
                    self.after.add(out)
            elif isinstance(item, CheckedRun):
                first, last = item.span()
                self._append_frames(item.rows, self.data[first:last], item.rows)
                self.before.add(item)
                self.after.add(item)
            else:
                self._one(item)

    def _one(self, batch: Batch) -> None:
        header = batch.header
        self.before.add_batch(batch)
        for out in self.rewriter.outputs(header, segment.entry_bytes(self.data, header), batch):
            try:
                written_header, written = _decoded_output(out)
                self.writer.append(written_header, out.entry, facts=control_facts(written),
                                   mtime_ms=self.src.mtime_ms)
            except DataError as err:
                raise err.located(file=self.src.file, base_position=out.source.position,
                                  offset=out.source.last_offset)
            self.after.add_batch(written)

    def _converted(self, pieces, source_rows: np.ndarray | None) -> None:
        """Write the v2 batches of legacy messages (legacy_runs.UpgradedRun) and tally them: the
        messages read (the piece's digest is of the records converted) and the batches written,
        walked again from their bytes."""
        for piece in pieces:
            self._append_frames(piece.rows, piece.entries, source_rows)
            s = self.before.summary
            s.batches += piece.digest.records  # one message, one record
            s.records += piece.digest.records
            if s.first_offset is None:
                s.first_offset = int(piece.rows["base_offset"][0])
            s.next_offset = int(piece.rows["last_offset"][-1]) + 1
            self.before.digest.merge(piece.digest)
            for out in walked(piece):
                self.after.add(out)

    def _append_frames(self, rows: np.ndarray, entries, source_rows: np.ndarray | None) -> None:
        try:
            self.writer.append_frames(rows, entries, mtime_ms=self.src.mtime_ms)
        except DataError as err:
            at = source_rows if source_rows is not None and len(source_rows) else rows
            named = at[at["last_offset"] == err.offset] if err.offset is not None else at[:0]
            row = named[0] if len(named) else at[0]
            raise err.located(file=self.src.file, base_position=int(row["position"]),
                              offset=int(row["last_offset"]))


def _runs_of(mask: np.ndarray) -> list[tuple[int, int]]:
    """(start, stop) of the maximal runs of equal values of a bool array, in order."""
    if not len(mask):
        return []
    edges = (np.flatnonzero(np.diff(mask.view(np.int8))) + 1).tolist()
    return list(zip([0, *edges], [*edges, len(mask)]))


def walked(piece: UpgradedRun) -> list[CheckedRun | Batch]:
    """The batches a conversion wrote, as a reader sees them: checked and digested again from their
    bytes (kfmt.format.batch_runs), not taken from the converter's own account. Compressed ones
    (kfmt recompress) are inflated and checked as a strict read checks them (batch_runs.checked)."""
    base = int(piece.rows["position"][0])
    if (piece.rows["compression"] != 0).any():
        return list(batch_runs.checked(piece.entries, piece.rows, "the converted batches", base=base,
                                       messages=True))
    at, digest, first = batch_runs.digest_run(piece.entries, piece.rows, 0, len(piece.rows),
                                              base=base)
    if at < len(piece.rows):
        row = piece.rows[at]
        segment.decode(piece.entries, header_of(row.item()), "the converted batches",
                       base=base)  # raises what is wrong with it
        raise KfmtError(f"the converted batch at offset {int(row['base_offset'])} does not match "
                        f"the frame the converter gave for it")
    return [CheckedRun(piece.rows, digest, first)]


def _decoded_output(out: Output) -> tuple[BatchHeader, Batch]:
    """The header to write an output under, and its records as a reader will see them: a copy is the
    input batch; new bytes are decoded again (strictly) through their format plugin, so the "after"
    digest checks the encoder's work, not its intentions."""
    if out.copied is not None:
        return out.source, out.copied
    entry = memoryview(out.entry)
    fmt = registry.get().format_for(entry[MAGIC_AT])
    header = fmt.read_header(entry, 0)
    return header, fmt.decode(entry, header)


class RewriteTransform(Transform):
    """A transform whose tasks rewrite one source segment each with a Rewriter; the output keeps the
    source's segments (base offsets, empty segments, modification times). `options` and `notes` go
    to the report."""

    def __init__(self, command: str, rewriter: Rewriter, companions: CompanionOptions = CompanionOptions(),
                 *, options: dict | None = None, notes: Sequence[str] = (), policy: RollPolicy | None = None):
        super().__init__(companions)
        self.command, self.description = command, f"{command}: segments"
        self.rewriter = rewriter
        self._options, self._notes = dict(options or {}), list(notes)
        self._policy = policy

    def notes(self) -> list[str]:
        return self._notes

    def policy(self) -> RollPolicy:
        # Source segments are kept; the roll rules only split one whose output Kafka could not keep
        # in one segment: positions past 2^31-1 bytes, a full index, int32 relative offsets.
        return self._policy or RollPolicy(segment_bytes=INT32_MAX,
                                          index_interval_bytes=self.companions.index_interval_bytes)

    def options(self) -> dict:
        p = self.policy()
        return {**self._options, **super().options(), "segment_bytes": p.segment_bytes}

    def preparation_tasks(self, work, dry_run):
        return [CensusTask(w.index, g) for w in work for g in task_groups(w.sources)] if dry_run else []

    def prepared(self, work, results):
        for w in work:
            w.detail = Census()
        for r in results:
            work[r.partition].detail.merge(r.detail)

    def write_tasks(self, work, target):
        policy = self.policy()
        return [RewriteSegmentsTask(w.index, g, target, w.plan.rel, policy, self.rewriter, w.floor, w.start)
                for w in work for g in task_groups(w.sources)]

    def describe(self, work: PartitionWork) -> list[str]:
        return self.rewriter.describe(work.detail) if work.detail is not None else []

    def threads_suffice(self, work: list[PartitionWork]) -> bool:
        """When the rewriter takes every partition's first entry in its kernels: a producer writes a
        partition in one format and codec, so the first entry stands for the rest; a guess that can
        only make the run slower, never different."""
        kinds = [first_entry_kind(w.sources[0]) for w in work if w.sources]
        return bool(kinds) and all(k is None or self.rewriter.in_kernels(*k) for k in kinds)


def first_entry_kind(source: SourceSegment) -> tuple[int, int] | None:
    """(magic, codec) of a segment's first entry (kfmt.format.segment.entry_kind); None for a segment
    too short to hold an entry."""
    if source.size < segment.KIND_BYTES:
        return None
    return segment.entry_kind(bytes(source.read(0, segment.KIND_BYTES)))
