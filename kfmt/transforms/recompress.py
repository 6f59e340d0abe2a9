"""kfmt recompress: every data batch in v2 with another codec (or level), one Spark task per source
segment.

What happens to each entry:
* a v2 data batch is re-encoded with the target codec and level: same offsets (gaps and
  lastOffsetDelta kept), timestamps, base timestamp (a delete horizon included), producer id, epoch
  and sequence, leader epoch, transactional flag, keys, values, headers. A batch already in the
  target codec is copied byte for byte unless a level is given (a level cannot be read from the bytes,
  so asking for one re-encodes everything);
* a control batch (transaction marker) is copied byte for byte: Kafka always writes them
  uncompressed (MemoryRecords.withEndTransactionMarker), and so does kfmt;
* an empty v2 batch (compaction leaves them, docs/format.md §4.7) is copied: it has no records to compress;
* a legacy (v0/v1) entry is first converted by Kafka 4.0's rules (kfmt.format.convert, docs/format.md §16.3:
  one v2 batch per wrapper or message, offsets kept, v0 CreateTime -1) and then encoded with the
  target codec: the output is v2 throughout.

Output segments keep the source's base offsets, empty segments and `.log` modification times; one
whose output Kafka could not hold in one segment continues in another (kfmt.write.writer's roll rules).
"""
from __future__ import annotations

from typing import Iterator

import numpy as np

from kfmt.format import compress_runs, wrapper_runs
from kfmt.format.codecs import Level, compression_levels
from kfmt.format.layout import ATTR_CONTROL, MAGIC_V2
from kfmt.format.legacy_runs import RunUpgrader, UpgradedRun
from kfmt.format.model import Batch, BatchHeader
from kfmt.partition.companions import CompanionOptions
from kfmt.plugin import registry
from kfmt.transforms.census import Census
from kfmt.transforms.rewrite import Output, Rewriter, RewriteTransform
from kfmt.transforms.job_options import JobOptions
from kfmt.transforms.run import RunPlan, run_transform
from kfmt.transforms.upgrade import encode_v2

class RecompressRewriter(Rewriter):
    def __init__(self, compression: str, level: Level | None = None):
        # The codec and its levels are what its plugin declares (kfmt.format.codecs.Compression.levels).
        codec = registry.get().compression_named(compression)
        self.codec = codec.id
        self.codec_name = codec.name
        self.level = None if level is None else compression_levels([level], codec.name)[self.codec]
        self._levels = {} if self.level is None else {self.codec: self.level}

    def converts_wrappers(self) -> tuple[int | None, dict] | None:
        return (self.codec, self._levels) if wrapper_runs.available() else None

    def keeps(self, header: BatchHeader) -> bool:
        """Whether a v2 batch is copied as it is."""
        return (header.is_control or header.records_count == 0
                or (header.compression == self.codec and self.level is None))

    def kept(self, rows: np.ndarray) -> np.ndarray:
        """keeps() for rows of frames, many at a time (legacy rows are never kept)."""
        v2 = rows["magic"] >= MAGIC_V2
        control = (rows["attributes"] & ATTR_CONTROL) != 0
        same = (rows["compression"] == self.codec) if self.level is None else np.zeros(len(rows), bool)
        return v2 & (control | (rows["records_count"] == 0) | same)

    @property
    def rewrites_plain_v2(self) -> bool:
        return self.codec != 0

    def rewrite_run(self, entries, rows: np.ndarray) -> tuple[bytes, np.ndarray]:
        """Uncompressed v2 data batches compressed where they lie, one codec call per batch: the bytes
        outputs() would give them (kfmt.format.compress_runs)."""
        return compress_runs.compressed(entries, rows, self.codec, self.level)

    def run_upgrader(self, data, file: str):
        """Runs of uncompressed legacy messages: Kafka 4.0's single-record batches made by the run
        kernels, then each compressed with the target codec (kfmt.format.compress_runs)."""
        upgrader = RunUpgrader(data, file)
        if self.codec == 0:
            return upgrader
        return _CompressingUpgrader(upgrader, self.codec, self.level)

    def outputs(self, header: BatchHeader, entry, batch: Batch) -> Iterator[Output]:
        if header.magic < MAGIC_V2:
            yield Output(wrapper_runs.convert_wrapper_reference(batch, self._levels, self.codec), header)
        elif self.keeps(header):
            yield Output(entry, header, batch)
        else:
            yield Output(encode_v2(batch.header.replace(compression=self.codec), batch.records,
                                   self.level), header)

    def describe(self, census: Census) -> list[str]:
        target = self.codec_name + (f" level {self.level}" if self.level is not None else "")

        def verb(magic: int, codec: int, control: bool) -> str:
            if control:
                return "copied byte for byte (Kafka never compresses control batches)"
            if magic < MAGIC_V2:
                return f"converted by Kafka 4.0's rules, then {target}"
            if codec == self.codec and self.level is None:
                return "copied byte for byte (already " + self.codec_name + ")"
            return f"re-encoded with {target} (empty batches copied)"
        return census.lines(verb)


class _CompressingUpgrader:
    """A RunUpgrader whose batches come out compressed (the same interface)."""

    def __init__(self, upgrader: RunUpgrader, codec: int, level: Level | None):
        self.upgrader, self.codec, self.level = upgrader, codec, level

    @property
    def waiting(self) -> np.ndarray | None:
        return self.upgrader.waiting

    def pieces(self, rows: np.ndarray, *, more: bool = False, out_position: int = 0) -> Iterator[UpgradedRun]:
        return self._compressed(self.upgrader.pieces(rows, more=more, out_position=out_position))

    def finish(self, out_position: int = 0) -> Iterator[UpgradedRun]:
        return self._compressed(self.upgrader.finish(out_position))

    def _compressed(self, pieces) -> Iterator[UpgradedRun]:
        for piece in pieces:
            entries, rows = compress_runs.compressed(piece.entries, piece.rows, self.codec, self.level)
            yield UpgradedRun(entries, rows, piece.digest)


def recompress(src: str, dst: str, *, compression: str, level: Level | None = None,
               companions: CompanionOptions = CompanionOptions(),
               job: JobOptions = JobOptions()) -> tuple[RunPlan, dict | None]:
    """Recompress SRC (a partition or log directory) into DST as `job` says (kfmt.transforms.job_options)."""
    rewriter = RecompressRewriter(compression, level)
    notes = [f"v2 data batches re-encoded with {compression}"
             + (f" at level {rewriter.level}" if level is not None else " at the codec's default level")
             + "; control batches, empty batches"
             + (f" and batches already in {compression}" if level is None else "")
             + " copied byte for byte; legacy entries converted by Kafka 4.0's rules first; "
               "source segments kept"]
    transform = RewriteTransform("recompress", rewriter, companions,
                                 options={"compression": compression, "level": rewriter.level}, notes=notes)
    return run_transform(transform, src, dst, job)
