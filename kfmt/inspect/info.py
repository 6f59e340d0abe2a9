"""Per-partition summaries: segments, offset and time ranges, bytes, batches, records, and a census of
(magic, compression) -- the answer to "how much old-format data is still here?".

Batches and records are counted as a consumer sees the partition: from its log start offset
(PartitionDir.log_start_offset) on, unless `include_deleted`; segments and bytes are the files on
disk, whatever they hold."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import pyarrow.compute as pc

from kfmt.format.model import NO_TIMESTAMP
from kfmt.partition.layout import PartitionDir
from kfmt.partition.live import read_whole
from kfmt.partition.reader import PartitionReader
from kfmt.plugin import registry


@dataclass
class FormatCount:
    batches: int = 0
    records: int = 0
    bytes: int = 0


@dataclass
class PartitionInfo:
    topic: str | None
    partition: int | None
    path: str
    segments: int = 0
    bytes: int = 0  # of .log files
    batches: int = 0
    records: int = 0  # data records (control records counted apart)
    control_records: int = 0
    first_offset: int | None = None  # of the first record
    last_offset: int | None = None  # of the last record
    log_start_offset: int | None = None  # where a broker serves from (PartitionDir.log_start_offset)
    log_end_offset: int | None = None  # next offset after the last batch
    min_timestamp: int | None = None  # over records that carry one
    max_timestamp: int | None = None
    census: dict = field(default_factory=dict)  # (magic, codec name) -> FormatCount

    def to_json(self) -> dict:
        out = {k: v for k, v in self.__dict__.items() if k != "census"}
        out["formats"] = [{"magic": m, "compression": c, **vars(n)}
                          for (m, c), n in sorted(self.census.items())]
        return out


def partition_info(part: PartitionDir, include_deleted: bool = False) -> PartitionInfo:
    """The partition's summary; a running broker's partition is read again from a new listing
    when a segment goes while it is counted (kfmt.partition.live)."""
    return read_whole(part, lambda p: _partition_info(p, include_deleted))


def _partition_info(part: PartitionDir, include_deleted: bool) -> PartitionInfo:
    reader = PartitionReader(part, recover_tail=True)
    reg = registry.get()
    info = PartitionInfo(part.topic, part.partition, part.storage.url_of(part.path),
                         segments=len(part.segments), log_start_offset=part.log_start_offset)
    floor = None if include_deleted or info.log_start_offset is None else info.log_start_offset
    census: dict = {}
    for seg in part.segments:
        info.bytes += seg.size
        for header in reader.frames(seg):
            if floor is not None and header.last_offset < floor:
                info.log_end_offset = header.next_offset
                continue  # deleted: a broker no longer serves it
            batch = reader.decode(seg, header)
            if floor is not None and len(batch) and batch.records.column(0)[0].as_py() < floor:
                batch = _from(batch, floor)
            h, n = batch.header, len(batch)
            info.batches += 1
            info.log_end_offset = h.next_offset
            count = census.setdefault((h.magic, reg.codec_name(h.compression)), FormatCount())
            count.batches += 1
            count.records += n
            count.bytes += h.size
            if not n:
                continue
            if h.is_control:
                info.control_records += n
                continue
            info.records += n
            offsets = batch.records.column(0)
            if info.first_offset is None:
                info.first_offset = offsets[0].as_py()
            info.last_offset = offsets[n - 1].as_py()
            timestamps = pc.filter(batch.records.column(1),
                                   pc.not_equal(batch.records.column(1), NO_TIMESTAMP))
            if len(timestamps):
                lo, hi = pc.min_max(timestamps).values()
                info.min_timestamp = _min(info.min_timestamp, lo.as_py())
                info.max_timestamp = _max(info.max_timestamp, hi.as_py())
    info.census = census
    return info


def _from(batch, floor: int):
    """The batch's records at offsets >= floor (the log start offset lies inside the batch)."""
    offsets = batch.records.column(0)
    kept = pc.greater_equal(offsets, floor)
    return dataclasses.replace(batch, records=batch.records.filter(kept))


def _min(a, b):
    return b if a is None else min(a, b)


def _max(a, b):
    return b if a is None else max(a, b)
