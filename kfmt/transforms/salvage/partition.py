"""One partition: its segments scanned in turn, the intact entries written in offset order through the
PartitionWriter, with the checks a broker's replay makes (leader epochs, producer transactions)."""
from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Callable

from kfmt.errors import DataError
from kfmt.format.control import ControlType
from kfmt.format.layout import MAGIC_AT, MAGIC_V2
from kfmt.format.message_formats import STRICT, ReadOptions
from kfmt.format.model import INT32_MAX, Batch
from kfmt.partition.checkpoints import EpochEntry, checkpoint_text, read_partition_metadata
from kfmt.partition.companions import CompanionOptions, control_facts, existing_leader_epochs
from kfmt.partition.layout import (
    LEADER_EPOCH_CHECKPOINT,
    PARTITION_METADATA,
    SEGMENT_NAME,
    PartitionDir,
    Segment,
)
from kfmt.partition.summary import PartitionCounts, PartitionTally
from kfmt.partition.topic_identity import TopicIdentity
from kfmt.plugin import registry
from kfmt.storage.staging import StagedOutput
from kfmt.write.planner import RollPolicy
from kfmt.write.writer import PartitionWriter

from .facts import EPOCH, TXN_STATE, UNREADABLE, Dropped, OffsetBounds, Offsets, merge_ranges
from .scan import scan_segment


@dataclass(frozen=True)
class SalvageOptions(CompanionOptions):
    read: ReadOptions = STRICT  # its max_decompressed caps every batch (KFMT_MAX_DECOMPRESSED_BYTES)

    def writer_options(self) -> dict:
        return {"now_ms": self.now_ms, "producer_expiration_ms": self.producer_expiration_ms}


@dataclass
class PartitionSalvage:
    """What salvaging one partition found and did."""

    name: str
    source: str
    destination: str
    input: PartitionCounts  # the intact entries found
    output: PartitionCounts  # what was written
    dropped: list[Dropped] = field(default_factory=list)
    moved: list[str] = field(default_factory=list)
    skipped_files: list[str] = field(default_factory=list)  # neither read nor carried over
    notes: list[str] = field(default_factory=list)
    log_end_offset: int | None = None  # of the output
    missing: list[Dropped] = field(default_factory=list)  # reported unless the log was compacted
    compacted: bool = False  # some entry's records do not fill its offsets (docs/format.md §4.7)

    @property
    def affected_offsets(self) -> list[Offsets]:
        """The offset ranges the dropped ranges may have held, merged (None: to the log's end)."""
        return merge_ranges([r for d in self.dropped for r in d.offsets])

    def to_json(self) -> dict:
        return {"name": self.name, "source": self.source, "destination": self.destination,
                "kept": {"batches": self.output.batches, "records": self.output.records,
                         "control_records": self.output.control_records},
                "log_end_offset": self.log_end_offset,
                "dropped_bytes": sum(d.length for d in self.dropped),
                "dropped": [d.to_json() for d in self.dropped],
                "affected_offsets": [{"first": a, "last": b} for a, b in self.affected_offsets],
                "moved": self.moved, "skipped_files": self.skipped_files, "notes": self.notes}


class _TxnReplay:
    """Which batches a broker's producer-state replay accepts (docs/format.md §8): a producer with an open
    transaction must not write a non-transactional batch, and a control batch of a producer is an
    ABORT or COMMIT marker (or empty, after compaction)."""

    def __init__(self):
        self.open: dict[int, int] = {}  # producer id -> first offset of its open transaction

    def refusal(self, batch: Batch) -> str | None:
        h = batch.header
        if h.magic < MAGIC_V2 or not h.has_producer_id:
            return None
        pid = h.producer_id
        if h.is_control:
            kind = control_facts(batch)[0]
            if kind is None:
                return None
            if kind not in (ControlType.ABORT, ControlType.COMMIT):
                return f"a control batch of producer {pid} holding a {kind.name} record, not a marker"
            self.open.pop(pid, None)
        elif h.is_transactional:
            self.open.setdefault(pid, h.base_offset)
        elif pid in self.open:
            return (f"a non-transactional batch of producer {pid} while its transaction from offset "
                    f"{self.open[pid]} is open (its marker was lost): Kafka refuses to load a log "
                    f"holding it (InvalidTxnStateException)")
        return None


@dataclass
class _Planned:
    """An intact entry to write, in the output's order."""

    segment: Segment
    file: str
    buf: object
    position: int
    size: int
    epoch: int | None  # a v2 batch's partition leader epoch; None for legacy entries


class _EpochOrder:
    """Leader epochs never decrease along a log (docs/format.md §9), and the partition leader epoch of a v2 batch is
    outside its CRC (docs/format.md §4.1). An epoch that breaks the order its neighbours agree on is damaged; at the
    ends of the log, where one neighbour is missing, the source's leader-epoch-checkpoint (when it
    reads) says which epoch covers the batch's offsets."""

    def __init__(self, reference: list[EpochEntry] | None):
        self.starts = [e.start_offset for e in reference or []]
        self.epochs = [e.epoch for e in reference or []]
        self.previous: int | None = None  # the epoch of the last v2 batch written

    def refusal(self, epoch: int, base: int, following: int | None) -> str | None:
        before = self.previous
        at = bisect.bisect_right(self.starts, base) - 1
        expected = self.epochs[at] if at >= 0 else None
        if before is not None and following is not None:
            damaged = before <= following and not before <= epoch <= following
        elif before is not None:  # the last v2 batch
            damaged = epoch < before or (epoch > before and expected not in (None, epoch))
        else:  # the first v2 batch
            damaged = following != epoch and expected not in (None, epoch)
        if not damaged:
            self.previous = epoch
            return None
        facts = (("before it", before), ("after it", following), ("checkpoint", expected))
        around = ", ".join(f"{what} {value}" for what, value in facts if value is not None)
        return (f"intact, but its partition leader epoch {epoch} (outside the CRC) breaks the order of "
                f"the epochs around it ({around}): leader epochs never decrease along a log")


def segment_ranges(part: PartitionDir) -> list[OffsetBounds]:
    """The offsets each segment of `part` may hold: up to the next segment's base, and for the last
    one up to the log end offset named by the snapshot a clean shutdown writes there (docs/format.md §8), when the
    directory holds one above the last segment's base."""
    segs = part.segments
    log_end = max(part.snapshots, default=None)
    if log_end is not None and segs and log_end <= segs[-1].base_offset:
        log_end = None
    return [OffsetBounds(seg.base_offset, segs[i + 1].base_offset if i + 1 < len(segs) else log_end)
            for i, seg in enumerate(segs)]


def _planned(part: PartitionDir, options: SalvageOptions, result: "PartitionSalvage", found: PartitionTally,
             on_progress: Callable[[int], None] | None):
    """The segments of `part` (yielded as such when each begins) and their intact entries in the
    order they are written."""
    segs, storage = part.segments, part.storage
    for seg, rng in zip(segs, segment_ranges(part)):
        file = part.display(seg.log)
        found.add_segment(seg.size)
        yield seg
        try:
            buf = storage.map(seg.log.path)
        except OSError as err:
            result.dropped.append(Dropped(file, 0, seg.size, UNREADABLE,
                                          f"cannot read the file: {err.strerror or err}",
                                          [(rng.base, rng.limit if rng.next_base is not None else None)]))
            continue
        scan = scan_segment(buf, file, rng, options.read, found.add_batch)
        result.moved += [f"{file}: {m}" for m in scan.moved]
        result.dropped += scan.dropped
        result.missing += scan.missing
        result.compacted |= scan.found.compacted
        for j in scan.order:
            position = scan.found.positions[j]
            yield _Planned(seg, file, buf, position, scan.found.sizes[j], scan.found.epochs[j]
                           if buf[position + MAGIC_AT] >= MAGIC_V2 else None)
        if on_progress is not None:
            on_progress(seg.size)


def salvage_partition(part: PartitionDir, rel: str, out: StagedOutput | None, options: SalvageOptions,
                      log_start_offset: int = 0, destination: str = "",
                      on_progress: Callable[[int], None] | None = None,
                      identity: TopicIdentity | None = None) -> PartitionSalvage:
    """Scan every segment of `part`, then write the intact entries into `out` under `rel` (nothing
    is written when `out` is None: a dry run). `identity`: the target cluster's partition.metadata,
    written instead of the source's when it names the target's id."""
    storage = part.storage
    found_tally = PartitionTally(PartitionCounts(storage.url_of(part.path), part.topic, part.partition))
    written_tally = PartitionTally(PartitionCounts(destination, part.topic, part.partition))
    result = PartitionSalvage(part.name, storage.url_of(part.path), destination, found_tally.summary,
                              written_tally.summary, skipped_files=_skipped_files(part))
    writer = None if out is None else _writer(part, rel, out, options, log_start_offset)
    replay, epochs = _TxnReplay(), _EpochOrder(_reference_epochs(part, result))
    stream = _planned(part, options, result, found_tally, on_progress)
    following = next(stream, None)
    try:
        while following is not None:
            current, following = following, next(stream, None)
            if isinstance(current, Segment):
                if writer is not None:
                    writer.roll(current.base_offset)  # segments keep their base offsets, even emptied
                continue
            entry = memoryview(current.buf)[current.position:current.position + current.size]
            fmt = registry.get().format_for(entry[MAGIC_AT])
            batch = fmt.decode(entry, fmt.read_header(entry, current.position), options.read)
            h = batch.header
            kind, refusal = TXN_STATE, replay.refusal(batch)
            if refusal is None and current.epoch is not None:
                after = following.epoch if isinstance(following, _Planned) else None
                kind, refusal = EPOCH, epochs.refusal(current.epoch, h.base_offset, after)
            if refusal is not None:
                result.dropped.append(Dropped(current.file, current.position, current.position + current.size,
                                              kind, refusal, [(h.base_offset, h.last_offset)]))
                continue
            written_tally.add_batch(batch)
            if writer is not None:
                writer.append(h, entry, mtime_ms=current.segment.log.mtime_ms)
        if writer is not None:
            result.log_end_offset = _close(writer, written_tally)
            if identity is not None and identity.stamped:
                identity.write_into(out, f"{rel}/{PARTITION_METADATA}" if rel else PARTITION_METADATA)
            else:
                _write_partition_metadata(part, rel, out, result)
    except BaseException:
        if writer is not None:
            writer.abort()
        raise
    if not result.compacted:
        result.dropped += result.missing
    result.dropped.sort(key=lambda d: (d.file, d.start))
    found_tally.finish()
    written_tally.finish()
    return result


def _writer(part: PartitionDir, rel: str, out: StagedOutput, options: SalvageOptions,
            log_start_offset: int) -> PartitionWriter:
    """The writer of the salvaged partition: one output segment per source segment, at its base."""
    if rel:
        out.makedirs(rel)
    policy = RollPolicy(segment_bytes=INT32_MAX, segment_ms=2**63 - 1,
                        index_interval_bytes=options.index_interval_bytes)
    segs = part.segments
    # The companion files describe the batches kept; the source's log start offset (its
    # log-start-offset-checkpoint entry, possibly damaged) is only carried in that checkpoint.
    return PartitionWriter(out, rel, policy, start_offset=segs[0].base_offset if segs else log_start_offset,
                           **options.writer_options())


def _close(writer: PartitionWriter, written_tally: PartitionTally) -> int:
    """Close the writer, counting the segments it wrote; the log end offset written."""
    summary = writer.close()
    for written in summary.segments:
        written_tally.add_segment(written.size)
    return summary.log_end_offset


def _reference_epochs(part: PartitionDir, result: PartitionSalvage) -> list[EpochEntry] | None:
    """The source's leader-epoch-checkpoint entries, when it reads and its entries increase (the
    output's is rebuilt from the batches kept)."""
    try:
        entries = existing_leader_epochs(part)
    except (OSError, DataError) as err:
        result.notes.append(f"{LEADER_EPOCH_CHECKPOINT} not used to check leader epochs: "
                            f"{getattr(err, 'message', err)}")
        return None
    if entries and any(b.epoch <= a.epoch or b.start_offset <= a.start_offset
                       for a, b in zip(entries, entries[1:])):
        result.notes.append(f"{LEADER_EPOCH_CHECKPOINT} not used to check leader epochs: its entries "
                            f"do not increase")
        return None
    return entries


def _write_partition_metadata(part: PartitionDir, rel: str, out: StagedOutput,
                              result: PartitionSalvage) -> None:
    info = part.file(PARTITION_METADATA)
    if info is None:
        return
    file = part.display(info)
    try:
        data = bytes(part.storage.read(info.path))
        read_partition_metadata(checkpoint_text(data, file), file)
    except (OSError, DataError) as err:
        result.notes.append(f"{file} not carried over: {getattr(err, 'message', err)}; a broker needs "
                            f"one naming the topic's id (KRaft), write it before loading")
        return
    out.write(f"{rel}/{PARTITION_METADATA}" if rel else PARTITION_METADATA, data, info.mtime_ms)


def _skipped_files(part: PartitionDir) -> list[str]:
    """Files neither salvaged nor regenerated (the companion files are always regenerated)."""
    out = [f"{name}: named like a segment, but Kafka cannot parse its base offset" for name in part.ignored]
    for name in sorted(part.files):
        m = SEGMENT_NAME.match(name)
        if name in (PARTITION_METADATA, LEADER_EPOCH_CHECKPOINT) or m or name in part.ignored:
            continue
        out.append(f"{name}: not a file a broker needs")
    return out
