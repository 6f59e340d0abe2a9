"""kfmt upgrade: message formats v0/v1 to v2 by Kafka 4.0's own conversion rules (reference §16.3,
kfmt.convert), one Spark task per source segment.

Every legacy entry becomes the v2 batch Kafka 4.0's log cleaner makes of it: a compressed wrapper one
batch with all its records, an uncompressed message a single-record batch; offsets kept; the codec
kept and re-encoded in v2 framing (LZ4 with the correct header checksum); v0 CreateTime with
timestamp -1; a LogAppendTime wrapper a LogAppendTime batch; producer fields and leader epoch -1.
Batches already in v2 are copied byte for byte. `rebatch=True` groups consecutive uncompressed legacy
messages of one source segment into v2 batches of up to `max_batch_bytes` instead (smaller output,
offsets still kept; not what a broker writes).

Output segments keep the source's base offsets, empty segments and `.log` modification times; a
source segment whose v2 form Kafka could not hold in one segment (more than 2^31-1 bytes, a full
index) continues in another, rolled by the broker's rules (kfmt.writer). The companion files are
regenerated for the v2 data (kfmt.companions) and the log directory's files kept (as kfmt reindex).
"""
from __future__ import annotations

from typing import Iterator

from kfmt import registry
from kfmt.convert import convert_batch, convert_run, rebatchable
from kfmt.errors import UsageError
from kfmt.model import Batch, BatchHeader
from kfmt.pipelines.transform import (Census, CompanionOptions, Output, Rewriter, RewriteTransform,
                                      RunPlan, run_transform)

# Kafka's default message.max.bytes (1 MiB + the 12-byte log overhead): the broker accepts batches
# up to this size, and consumers' default fetch sizes are made for them.
DEFAULT_MAX_BATCH_BYTES = 1024 * 1024 + 12
V2_BATCH_OVERHEAD = 61


def encode_v2(header: BatchHeader, records, level: int | None = None) -> bytes:
    return registry.get().format_for(2).encode(header, records, level=level)


class UpgradeRewriter(Rewriter):
    def __init__(self, rebatch: bool = False, max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES):
        if max_batch_bytes < V2_BATCH_OVERHEAD:
            raise UsageError(f"--max-batch-bytes must be at least {V2_BATCH_OVERHEAD}, got {max_batch_bytes}")
        self.rebatch = rebatch
        self.max_batch_bytes = max_batch_bytes

    def outputs(self, batches: Iterator[tuple[BatchHeader, object, Batch]]) -> Iterator[Output]:
        run: list[Batch] = []
        run_bytes = 0
        for header, entry, batch in batches:
            if self.rebatch and run and self._joins(run, run_bytes, batch):
                run.append(batch)
                run_bytes += header.size
                continue
            if run:
                yield self._run_output(run)
                run, run_bytes = [], 0
            if header.magic >= 2:
                yield Output(bytes(entry), header, batch)  # already v2: byte for byte
            elif self.rebatch and rebatchable(batch, batch):
                run, run_bytes = [batch], header.size
            else:
                v2_header, records = convert_batch(batch)
                yield Output(encode_v2(v2_header, records), header)
        if run:
            yield self._run_output(run)

    def _joins(self, run: list[Batch], run_bytes: int, batch: Batch) -> bool:
        # A legacy message is larger than the v2 record it becomes (it carries its own CRC, magic,
        # attributes and fixed-width lengths), so the legacy bytes bound the v2 batch's size.
        return (rebatchable(run[-1], batch)
                and V2_BATCH_OVERHEAD + run_bytes + batch.header.size <= self.max_batch_bytes)

    @staticmethod
    def _run_output(run: list[Batch]) -> Output:
        if len(run) == 1:  # alone, a message becomes what Kafka makes of it
            v2_header, records = convert_batch(run[0])
        else:
            v2_header, records = convert_run(run)
        return Output(encode_v2(v2_header, records), run[-1].header)

    def describe(self, census: Census) -> list[str]:
        def verb(magic: int, codec: int, control: bool) -> str:
            if magic >= 2:
                return "copied byte for byte"
            if codec:
                return "one v2 batch each, same codec (Kafka 4.0)"
            if self.rebatch:
                return f"grouped into v2 batches of up to {self.max_batch_bytes} bytes (--rebatch)"
            return "one single-record v2 batch each (Kafka 4.0)"
        return census.lines(verb)


def upgrade(src: str, dst: str, *, rebatch: bool = False,
            max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
            companions: CompanionOptions = CompanionOptions(), **run) -> tuple[RunPlan, dict | None]:
    """Upgrade SRC (a partition or log directory) into DST. `run`: run_transform's arguments
    (src_options, dst_options, topic, partition, master, dry_run, progress)."""
    notes = ["legacy (v0/v1) entries converted to v2 by Kafka 4.0's rules (reference §16.3): one batch "
             "per compressed wrapper, one single-record batch per uncompressed message"
             + (", except runs of uncompressed messages grouped into larger batches (--rebatch)"
                if rebatch else "")
             + "; v2 batches copied byte for byte; source segments kept"]
    options = {"rebatch": rebatch, "max_batch_bytes": max_batch_bytes if rebatch else None}
    transform = RewriteTransform("upgrade", UpgradeRewriter(rebatch, max_batch_bytes), companions,
                                 options=options, notes=notes)
    return run_transform(transform, src, dst, **run)
