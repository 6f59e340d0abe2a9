"""kfmt upgrade: message formats v0/v1 to v2 by Kafka 4.0's own conversion rules (docs/format.md §16.3,
kfmt.format.convert), one Spark task per source segment.

Every legacy entry becomes the v2 batch Kafka 4.0's log cleaner makes of it: a compressed wrapper one
batch with all its records, an uncompressed message a single-record batch; offsets kept; the codec
kept and re-encoded in v2 framing (LZ4 with the correct header checksum); v0 CreateTime with
timestamp -1; a LogAppendTime wrapper a LogAppendTime batch; producer fields and leader epoch -1.
Batches already in v2 are copied byte for byte. `rebatch=True` groups consecutive uncompressed legacy
messages of one source segment into v2 batches of up to `max_batch_bytes` instead (smaller output,
offsets still kept; not what a broker writes).

Output segments keep the source's base offsets, empty segments and `.log` modification times; a
source segment whose v2 form Kafka could not hold in one segment (more than 2^31-1 bytes, a full
index) continues in another, rolled by the broker's rules (kfmt.write.writer). The companion files are
regenerated for the v2 data (kfmt.partition.companions) and the log directory's files kept (as kfmt reindex).
"""
from __future__ import annotations

from typing import Iterator

from kfmt.errors import UsageError
from kfmt.format.codecs import Level, named_levels
from kfmt.format import copied_runs, legacy_runs, wrapper_runs
from kfmt.format.layout import MAGIC_V2, V2_BATCH_OVERHEAD
from kfmt.format.legacy_runs import DEFAULT_MAX_BATCH_BYTES, RunUpgrader
from kfmt.format.model import Batch, BatchHeader
from kfmt.partition.companions import CompanionOptions
from kfmt.plugin import registry
from kfmt.transforms.census import Census
from kfmt.transforms.rewrite import Output, Rewriter, RewriteTransform
from kfmt.transforms.job_options import JobOptions
from kfmt.transforms.run import RunPlan, run_transform


def encode_v2(header: BatchHeader, records, level: Level | None = None) -> bytes:
    return registry.get().format_for(MAGIC_V2).encode(header, records, level=level)


class UpgradeRewriter(Rewriter):
    """Runs of uncompressed legacy messages are converted many at a time by the array kernels
    (kfmt.format.legacy_runs.RunUpgrader: Kafka 4.0's single-record batches, or the --rebatch groups of
    legacy_runs.joins: consecutive CreateTime messages whose legacy entries fit max_batch_bytes with
    a v2 batch header, the legacy entry being larger than the v2 record it becomes); uncompressed v2
    batches are copied as runs; wrappers and other v2 batches one by one."""

    copies_uncompressed_v2 = True

    def __init__(self, rebatch: bool = False, max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
                 levels: dict | None = None):
        if max_batch_bytes < V2_BATCH_OVERHEAD:
            raise UsageError(f"--max-batch-bytes must be at least {V2_BATCH_OVERHEAD}, got {max_batch_bytes}")
        self.rebatch = rebatch
        self.max_batch_bytes = max_batch_bytes
        self.levels = dict(levels or {})  # codec id -> level of the wrappers re-encoded (None: the codec's)

    def converts_wrappers(self) -> tuple[int | None, dict] | None:
        return (None, self.levels) if wrapper_runs.available() else None

    def run_upgrader(self, data, file: str) -> RunUpgrader:
        return RunUpgrader(data, file, rebatch=self.rebatch, max_batch_bytes=self.max_batch_bytes)

    def in_kernels(self, magic: int, codec: int) -> bool:
        # runs of messages: the upgrade kernels; of v2 batches: checked and copied in place; of
        # wrappers: the codec (ISA-L, lz4, zstd release the GIL) and the kernels, a few microseconds
        # of Python each (kfmt.format.wrapper_runs: on two threads 4.5 CPU s for the gzip and plain v1
        # gigabyte of bench/'s opaque input, against 5.3 on the pool). Not with the pure-Python
        # references (KFMT_PURE_PYTHON=1, or no compiler): they hold the GIL.
        if codec == 0:
            return legacy_runs.in_kernels() if magic < MAGIC_V2 else copied_runs.in_kernels()
        return magic < MAGIC_V2 and wrapper_runs.available()

    def outputs(self, header: BatchHeader, entry, batch: Batch) -> Iterator[Output]:
        if header.magic >= MAGIC_V2:
            yield Output(entry, header, batch)  # already v2: byte for byte
        else:  # a compressed wrapper (runs of messages go through run_upgrader, of wrappers wrapper_runs)
            yield Output(wrapper_runs.convert_wrapper_reference(batch, self.levels), header)

    def describe(self, census: Census) -> list[str]:
        def verb(magic: int, codec: int, control: bool) -> str:
            if magic >= MAGIC_V2:
                return "copied byte for byte"
            if codec:
                return "one v2 batch each, same codec (Kafka 4.0)"
            if self.rebatch:
                return f"grouped into v2 batches of up to {self.max_batch_bytes} bytes (--rebatch)"
            return "one single-record v2 batch each (Kafka 4.0)"
        return census.lines(verb)


def upgrade(src: str, dst: str, *, rebatch: bool = False,
            max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES, levels: dict | None = None,
            companions: CompanionOptions = CompanionOptions(),
            job: JobOptions = JobOptions()) -> tuple[RunPlan, dict | None]:
    """Upgrade SRC (a partition or log directory) into DST as `job` says (kfmt.transforms.job_options)."""
    notes = ["legacy (v0/v1) entries converted to v2 by Kafka 4.0's rules (docs/format.md §16.3): one batch "
             "per compressed wrapper, one single-record batch per uncompressed message"
             + (", except runs of uncompressed messages grouped into larger batches (--rebatch)"
                if rebatch else "")
             + "; v2 batches copied byte for byte; source segments kept"]
    options = {"rebatch": rebatch, "max_batch_bytes": max_batch_bytes if rebatch else None,
               "compression_levels": named_levels(levels or {})}
    transform = RewriteTransform("upgrade", UpgradeRewriter(rebatch, max_batch_bytes, levels), companions,
                                 options=options, notes=notes)
    return run_transform(transform, src, dst, job)
