"""What `kfmt export` is asked (ExportOptions) and what it plans from that (ExportPlan: per partition,
its segment ranges packed into tasks, the Hive-style directory its files go to, where an appending
run resumes), on the driver, before any task runs (kfmt.transforms.export_job runs the plan)."""
from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from kfmt.defaults import DEFAULT_SPLIT_BYTES, DEFAULT_TARGET_FILE_BYTES
from kfmt.errors import UsageError
from kfmt.partition.layout import PartitionDir, find_partitions
from kfmt.partition.transactions import ISOLATION_LEVELS
from kfmt.rows.columns import EXPORT_SCHEMA
from kfmt.rows.exporters import exporter_named
from kfmt.rows.ranges import SegmentRange, Selection, pack_ranges, partition_identity, plan_ranges
from kfmt.rows.typed import TypingOptions, bind_typing
from kfmt.storage.store import Storage

PARTITION_BY = {"topic,partition": ("topic", "partition"),
                "topic,partition,date": ("topic", "partition", "date")}
# Not data: named as Hadoop's FileInputFormat and Arrow's dataset discovery skip them (a leading `_`),
# unlike the other transforms' `kfmt-report.json`, whose destinations are log directories.
REPORT_NAME = "_kfmt-report.json"
SUCCESS_NAME = "_SUCCESS"  # an empty marker, as Hadoop's FileOutputCommitter leaves after a job


@dataclass(frozen=True)
class ExportOptions:
    format: str = "parquet"  # an exporter's name (kfmt.rows.exporters)
    partition_by: tuple = ("topic", "partition")
    include_control: bool = False
    isolation: str = "read_uncommitted"
    split_bytes: int = DEFAULT_SPLIT_BYTES  # segments bigger than this are cut into ranges
    target_file_bytes: int = DEFAULT_TARGET_FILE_BYTES  # a part file is closed once this big
    include_deleted: bool = False  # also the records below each partition's log start offset
    typing: TypingOptions = TypingOptions()  # how keys and values are decoded (kfmt.rows.typed)
    mode: str = "records"  # or "upsert": one row per key (kfmt.transforms.export_upsert)
    # the exporter's settings: each of its options' value (kfmt.plugin.options.settings)
    settings: dict = field(default_factory=dict)

    def __post_init__(self):
        exporter_named(self.format)
        if ",".join(self.partition_by) not in PARTITION_BY:
            raise UsageError(f"cannot partition by {','.join(self.partition_by)!r} (choose one of: "
                             f"{'; '.join(PARTITION_BY)})")
        if self.isolation not in ISOLATION_LEVELS:
            raise UsageError(f"unknown isolation level {self.isolation!r}")
        if self.split_bytes <= 0:
            raise UsageError(f"the split size must be positive, not {self.split_bytes}")
        if self.target_file_bytes <= 0:
            raise UsageError(f"the target file size must be positive, not {self.target_file_bytes}")
        if self.mode not in ("records", "upsert"):
            raise UsageError(f"unknown export mode {self.mode!r} (records or upsert)")
        if self.typing.active and self.format == "jsonl":
            raise UsageError("--key-format/--value-format write typed columns: export them to parquet "
                             "or iceberg (jsonl keeps the stored bytes only)")

    @property
    def selection(self) -> Selection:
        return Selection(self.include_control, self.isolation == "read_committed", self.include_deleted)

    @property
    def by_date(self) -> bool:
        return "date" in self.partition_by

    @property
    def file_schema(self) -> pa.Schema:
        """The columns of the files: the export schema without the partition-by columns, which
        are in the directory names only (a Hive table's layout)."""
        return pa.schema([f for f in EXPORT_SCHEMA if f.name not in self.partition_by])

    def to_json(self) -> dict:
        return {"format": self.format, "partition_by": list(self.partition_by),
                "include_control": self.include_control, "isolation": self.isolation,
                "split_bytes": self.split_bytes, "target_file_bytes": self.target_file_bytes,
                "include_deleted": self.include_deleted,
                **({"typing": self.typing.to_json()} if self.typing.active else {}),
                **({"mode": self.mode} if self.mode != "records" else {}),
                # only when the exporter has settings: the reports and states of those without stay as they were
                **({"settings": self.settings} if self.settings else {})}


# --- the plan -------------------------------------------------------------------------------------

@dataclass
class ExportPartitionPlan:
    part: PartitionDir
    rel: str  # its directory in DST: topic=<t>/partition=<p>
    ranges: list[SegmentRange]
    units: list[tuple[SegmentRange, ...]]  # the ranges, grouped into tasks
    from_offset: int | None = None  # an appending run: the offset it resumes from
    lost: tuple[int, int] | None = None  # an appending run: offsets deleted before they were exported


@dataclass
class ExportPlan:
    source: str
    destination: str
    options: ExportOptions
    partitions: list[ExportPartitionPlan]
    typing: dict = field(default_factory=dict)  # topic -> TopicTyping (kfmt.rows.typed), bound on the driver

    @property
    def tasks(self) -> int:
        return sum(len(p.units) for p in self.partitions)

    def lines(self) -> list[str]:
        """The plan as text (--dry-run)."""
        o = self.options
        out = [f"export {self.source} -> {self.destination}: {o.format}, partitioned by "
               f"{','.join(o.partition_by)}, {o.isolation}, control records "
               f"{'included' if o.include_control else 'left out'}; {len(self.partitions)} "
               f"partition(s), {self.tasks} task(s) writing files rolled at {o.target_file_bytes} "
               f"bytes"]
        if o.isolation == "read_committed":
            out.append(f"  first {len(self.partitions)} task(s) to find the aborted transactions and "
                       f"last stable offset of each partition")
        for p in self.partitions:
            log_bytes = sum(s.size for s in p.part.segments)
            out.append(f"  {p.part.name} -> {p.rel}/: {len(p.part.segments)} segment(s), {log_bytes} "
                       f"bytes of .log, {len(p.ranges)} range(s) in {len(p.units)} task(s)")
        out.append(f"  then {REPORT_NAME} and {SUCCESS_NAME}")
        return out

    def to_json(self) -> dict:
        return {"source": self.source, "destination": self.destination, "options": self.options.to_json(),
                "partitions": [{"name": p.part.name, "destination": p.rel,
                                "segments": len(p.part.segments),
                                "log_bytes": sum(s.size for s in p.part.segments),
                                "tasks": [[[r.segment_base, r.start, r.end] for r in unit]
                                          for unit in p.units]}
                               for p in self.partitions]}


def hive_value(value) -> str:
    """A partition value as a Hive directory name segment: the characters Spark escapes
    (ExternalCatalogUtils.escapePathName) as %XX; pyarrow and Spark decode them."""
    text = str(value)
    return "".join(f"%{ord(c):02X}" if c in _HIVE_ESCAPED else c for c in text)


_HIVE_ESCAPED = set(map(chr, range(0x01, 0x20))) | set("\"#%'*/:=?\\\x7f{[]^")


def plan_export(src_storage: Storage, src_path: str, dst_storage: Storage, dst_path: str,
                options: ExportOptions, topic: str | None = None, partition: int | None = None,
                resume=None) -> ExportPlan:
    """`resume(part, ranges)`: for an appending run, (the ranges from where it resumes, the offset it
    resumes from, the lost range or None) (kfmt.transforms.export_append)."""
    parts = find_partitions(src_storage, src_path, topic, partition)
    source, destination = src_storage.url_of(src_path), dst_storage.url_of(dst_path)
    plans = []
    for part in parts:
        t, p = partition_identity(part)
        ranges = plan_ranges(part, options.split_bytes)
        from_offset = lost = None
        if resume is not None:
            ranges, from_offset, lost = resume(part, ranges)
        plans.append(ExportPartitionPlan(part, f"topic={hive_value(t)}/partition={p}", ranges,
                                         pack_ranges(ranges, options.split_bytes), from_offset, lost))
    typing = bind_typing(options.typing, [p.part for p in plans], source,
                         src_storage.spec.options if src_storage.spec else None)
    return ExportPlan(source, destination, options, plans, typing)
