"""What `kfmt archive` records about a segment (kfmt.transforms.archive.archive_format.ArchivedSegment),
found many entries at a time.

`archived_segment_reference` is the definition: every batch decoded strictly (framing, CRCs, record
structure), counted and digested, and the least and greatest record timestamp (>= 0) taken from its
timestamp column. Decoding every entry of a producer-shaped log (hundreds of thousands of one-message
v1 entries, tiny v2 batches) into columns was nearly all of what `kfmt archive` spent, so with the
compiled kernels the same facts come from where the bytes lie:
* uncompressed entries: checked and digested a run at a time (kfmt.format.batch_runs.checked), the
  run's timestamps from one `entry_facts` call (kfmt.format.entry_facts);
* compressed data batches and wrappers: inflated once, checked and digested and their timestamps
  taken from the inflated records, without columns, a run at a time (kfmt.format.inflated_runs.walk);
* anything a kernel does not vouch for (control batches, damaged entries, a run holding a negative
  timestamp other than -1, which the kernels do not leave out) is decoded as the reference does,
  so errors are the decoder's own.
tests/transforms/test_archive_segment_facts.py checks both give the same facts.

That is the record-level check (`kfmt archive --deep`). By default an archive copies segments byte
for byte and checks them as Kafka's log recovery does (kfmt.format.copied_runs: every entry whole, its
CRC holding, compressed ones not inflated): `copied_facts` gives the counts the headers hold, the
entries digest of the bytes, and the greatest timestamp the headers give (the least is known only
inflated: None).
"""
from __future__ import annotations

import numpy as np

from kfmt.format import batch_runs, copied_runs, inflated_runs, segment
from kfmt.format.batch_runs import CheckedRun
from kfmt.format.entry_facts import entry_facts
from kfmt.format.frames import header_of
from kfmt.format.inflated_runs import HAS_TS
from kfmt.format.model import Batch
from kfmt.partition.summary import PartitionCounts, PartitionTally


class _Times:
    """The least and greatest record timestamp seen (records without one, < 0, left out)."""

    def __init__(self):
        self.low = self.high = None

    def note(self, lo, hi) -> None:
        if lo is None:
            return
        self.low = lo if self.low is None else min(self.low, lo)
        self.high = hi if self.high is None else max(self.high, hi)

    def add_batch(self, batch: Batch) -> None:
        if batch.header.is_control or not len(batch):
            return
        import pyarrow.compute as pc

        timestamps = batch.records.column(1)
        known = pc.filter(timestamps, pc.greater_equal(timestamps, 0))
        if len(known):
            bounds = pc.min_max(known)
            self.note(bounds["min"].as_py(), bounds["max"].as_py())


def segment_facts(data, file: str, ends_log: bool = False) -> tuple[PartitionTally, int | None, int | None]:
    """(tally, least timestamp, greatest timestamp) of a segment: see the module doc. A bad tail of
    the partition's last segment (`ends_log`) is left out with a warning, as segment.batches does."""
    if not inflated_runs.can_walk():  # no compiled kernels: every batch decoded
        return archived_segment_reference(data, file, ends_log)
    tally = PartitionTally(PartitionCounts(file, None, None))
    tally.add_segment(len(data))
    times = _Times()
    scanner = segment.FrameScanner(data, file)
    for rows in scanner.chunks():
        rows = np.ascontiguousarray(rows)
        compressed = rows["compression"] != 0
        edges = np.flatnonzero(compressed[1:] != compressed[:-1]) + 1
        for start, stop in zip([0, *edges.tolist()], [*edges.tolist(), len(rows)]):
            if compressed[start]:
                _add_compressed(data, rows[start:stop], file, tally, times)
            else:
                _add_uncompressed(data, rows[start:stop], file, tally, times)
    if scanner.tail.is_error:
        if not ends_log:
            raise scanner.tail.error(file)
        scanner.tail.recovered(file)
    return tally, times.low, times.high


def _add_uncompressed(data, rows: np.ndarray, file: str, tally: PartitionTally, times: _Times) -> None:
    for item in batch_runs.checked(data, rows, file, messages=True):
        tally.add(item)
        if isinstance(item, Batch):
            times.add_batch(item)
            continue
        run = np.ascontiguousarray(item.rows)
        at, facts = entry_facts(data, run, 0, len(run), 0)
        if at == len(run) and (facts.min_timestamp is None or facts.min_timestamp >= 0):
            times.note(facts.min_timestamp, facts.max_timestamp)
            continue
        for row in run:  # entries the facts kernel leaves to the decoder (already checked)
            header = header_of(row.item())
            times.add_batch(segment.decode(data, header, file))


def _add_compressed(data, rows: np.ndarray, file: str, tally: PartitionTally, times: _Times) -> None:
    """Compressed data batches and wrappers, each inflated once for its digest and its timestamps, a
    run at a time (kfmt.format.inflated_runs.walk) up to the first the decoder must decide on."""
    i = 0
    while i < len(rows):
        walked = inflated_runs.walk(data, rows, i, len(rows))
        facts = walked.facts
        # a negative timestamp other than -1: the decoder's column decides
        odd = np.flatnonzero((facts["flags"] & HAS_TS != 0) & (facts["min_ts"] < 0))
        if len(odd):
            facts = facts[:odd[0]]
            walked = inflated_runs.walk(data, rows, i, i + len(facts)) if len(facts) else None
        if len(facts):
            tally.add(CheckedRun(rows[i:i + len(facts)], walked.digest, walked.first))
            timed = facts[facts["flags"] & HAS_TS != 0]
            if len(timed):
                times.note(int(timed["min_ts"].min()), int(timed["max_ts"].max()))
            i += len(facts)
        if i < len(rows):
            batch = segment.decode(data, header_of(rows[i].item()), file)
            tally.add(batch)
            times.add_batch(batch)
            i += 1


def copied_facts(data, file: str, ends_log: bool = False) -> tuple[PartitionTally, None, int | None]:
    """(tally of the entries check, None, the greatest timestamp of the data entries' headers, >= 0)
    of a segment (the module doc); a bad tail of the partition's last segment as segment_facts."""
    tally = PartitionTally.of_entries(PartitionCounts(file, None, None))
    tally.add_segment(len(data))
    high = None
    scanner = segment.FrameScanner(data, file)
    for rows in scanner.chunks():
        for run in copied_runs.copied(data, rows, file):
            tally.add(run)
            if run.batch is None or not run.batch.header.is_control:
                stamps = run.rows["max_timestamp"][run.rows["max_timestamp"] >= 0]
                if len(stamps):
                    high = max(int(stamps.max()), high if high is not None else -1)
    if scanner.tail.is_error:
        if not ends_log:
            raise scanner.tail.error(file)
        scanner.tail.recovered(file)
    return tally, None, high


def archived_segment_reference(data, file: str, ends_log: bool = False
                               ) -> tuple[PartitionTally, int | None, int | None]:
    """The definition (see the module doc): every batch decoded."""
    tally = PartitionTally(PartitionCounts(file, None, None))
    tally.add_segment(len(data))
    times = _Times()
    for batch in segment.batches(data, file, recover_tail=ends_log):
        tally.add_batch(batch)
        times.add_batch(batch)
    return tally, times.low, times.high
