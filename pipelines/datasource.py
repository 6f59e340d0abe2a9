"""`spark.read.format("kafka-log").load(PATH)`: partition directories as a DataFrame.

A Python Data Source (Spark 4): the driver lists segments and plans one task per segment, splitting
big segments into byte ranges at batch boundaries (the positions in their `.index`, which are batch
starts); each task reads its range through kfmt's storage layer (any fsspec URL: Spark here has no
s3a) and yields Arrow record batches with kfmt.export's schema (Spark's Kafka source columns plus the
on-disk ones).

Options: `topic` (glob), `partition`, `includeControl` (default false), `maxBytesPerSplit`
(default 128 MiB), and `storage.<key>` for fsspec storage options (e.g. storage.endpoint_url).
"""
from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from kfmt.export import EXPORT_DDL

DEFAULT_SPLIT_BYTES = 128 << 20
ROWS_PER_ARROW_BATCH = 32768


@dataclass
class SegmentSlice(InputPartition):
    """One task: the byte range [start, end) of one segment (ranges start at batch boundaries)."""

    url: str
    storage_options: tuple
    partition_path: str
    topic: str
    partition: int
    segment_base: int
    log_path: str
    start: int
    end: int
    include_control: bool


def storage_options_of(options) -> dict:
    return {k[len("storage."):]: v for k, v in options.items() if k.lower().startswith("storage.")}


def _truthy(value) -> bool:
    return str(value).lower() in ("1", "true", "yes")


class KafkaLogDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "kafka-log"

    def schema(self) -> str:
        return EXPORT_DDL

    def reader(self, schema) -> "KafkaLogReader":
        return KafkaLogReader(dict(self.options))


class KafkaLogReader(DataSourceReader):
    def __init__(self, options: dict):
        self.options = options

    def partitions(self):
        from kfmt.layout import find_partitions
        from kfmt.partition import PartitionReader
        from kfmt.storage import open_storage

        url = self.options["path"]
        storage_options = storage_options_of(self.options)
        storage, path = open_storage(url, storage_options)
        partition = self.options.get("partition")
        parts = find_partitions(storage, path, self.options.get("topic"),
                                int(partition) if partition is not None else None)
        split = int(self.options.get("maxBytesPerSplit", DEFAULT_SPLIT_BYTES))
        include_control = _truthy(self.options.get("includeControl", "false"))
        slices = []
        for part in parts:
            reader = PartitionReader(part)
            for seg in part.segments:
                if seg.size == 0:
                    continue
                cuts = split_points(seg.size, [e.position for e in reader.offset_index(seg)], split)
                for start, end in zip(cuts, cuts[1:]):
                    slices.append(SegmentSlice(url, tuple(sorted(storage_options.items())), part.path,
                                               part.topic, part.partition, seg.base_offset,
                                               seg.log.path, start, end, include_control))
        return slices or [SegmentSlice(url, (), "", "", 0, 0, "", 0, 0, False)]

    def read(self, piece: SegmentSlice):
        if piece.end <= piece.start:
            return
        from kfmt.export import export_batch
        from kfmt.segment import decode, scan
        from kfmt.storage import open_storage

        storage, _ = open_storage(piece.url, dict(piece.storage_options))
        data = storage.read(piece.log_path, piece.start, piece.end)
        file = storage.url_of(piece.log_path)
        pending, rows = [], 0
        for header in scan(data, file, piece.start, piece.end, piece.start):
            if header.is_control and not piece.include_control:
                continue
            batch = decode(data, header, file, base=piece.start)
            pending.append((batch, piece.segment_base))
            rows += len(batch)
            if rows >= ROWS_PER_ARROW_BATCH:
                yield export_batch(pending, piece.topic, piece.partition)
                pending, rows = [], 0
        if pending:
            yield export_batch(pending, piece.topic, piece.partition)


def split_points(size: int, batch_starts: list[int], split_bytes: int) -> list[int]:
    """Range boundaries [0, ..., size] cutting a segment near every `split_bytes`, only at known batch
    starts (index positions), so each range begins on a batch boundary."""
    cuts = [0]
    for position in batch_starts:
        if position - cuts[-1] >= split_bytes and position < size:
            cuts.append(position)
    cuts.append(size)
    return cuts


def register(spark) -> None:
    """Make `spark.read.format("kafka-log")` available in this session."""
    spark.dataSource.register(KafkaLogDataSource)
