"""kfmt export: partitions to Parquet (or JSON Lines) with Spark's Kafka source columns plus the
on-disk ones (kfmt.rows.columns), in Hive-style `topic=<t>/partition=<p>[/date=<d>]/` directories.

The destination is what a Spark writer's `df.write.partitionBy(...).parquet(DST)` would leave, so that
every reader opens it as it is (`spark.read.parquet`, `pyarrow.dataset.dataset(partitioning="hive")`,
`pandas.read_parquet`, DuckDB's `read_parquet(..., hive_partitioning=true)`): the partition-by columns
live only in the directory names, never in the files (a reader would otherwise see each twice, with
clashing types); files that are not data start with `_` (`_kfmt-report.json`, `_SUCCESS`), which
Hadoop's and Arrow's file listings skip; a task writes one file per directory, sized like a Spark
writer's (kfmt.rows.part_files).

The job, on Spark (pipelines/runner.py; `inprocess` runs the same functions without Spark):
1. With read_committed, one cheap task per partition walks its headers and control batches into its
   transaction outcomes (kfmt.partition.transactions: aborted transactions, last stable offset): a segment's
   records can depend on a marker in a later segment, so segment tasks cannot decide alone.
2. Tasks of segment ranges (kfmt.rows.ranges: big segments cut, consecutive ranges of a partition
   packed up to --max-bytes-per-task) read and check every batch of each range and write its
   selected records through the staged output's picklable target (any fsspec URL: Spark's own writer
   has no s3a here) into the task's part files (kfmt.rows.part_files: row groups sized for scans,
   memory bounded by one, names a re-run reproduces). Then each task reads its files back and
   computes the content digest (kfmt.format.digest) of what they hold. That
   proves more than a digest of the Arrow rows handed to the writer: it also covers the Parquet or
   JSON encoding, the conversions back (Spark's microsecond timestamps, Java-decoded header keys)
   and the storage round trip, at the cost of reading the output once.
3. The driver adds the digests up per partition, checks the digest of what was read against the
   digest of what was written (a mismatch fails the run: exit 1, nothing published), writes
   `_kfmt-report.json`, `_SUCCESS` and `_kfmt-export-state.json` (each partition's high-water mark,
   kfmt.transforms.export_state) and publishes DST at once (kfmt.storage.staging).

`append=True` (`kfmt export --append`) on a destination that holds an export adds what is new since
its last run instead (kfmt.transforms.export_append): the same job, on ranges cut at each partition's
high-water mark (kfmt.rows.resume).
"""
from __future__ import annotations

import time

from kfmt.errors import UsageError
from kfmt.rows.exporters import exporters, is_table
from kfmt.storage.staging import StagedOutput
from kfmt.storage.store import open_storage
from kfmt.transforms.directory_plan import check_not_inside
from kfmt.transforms.export_append import append_export
from kfmt.transforms.export_job import (  # noqa: F401
    PARTITION_BY,
    REPORT_NAME,
    SUCCESS_NAME,
    ExportOptions,
    ExportPlan,
    _notes,
    decode_report,
    hive_value,
    plan_export,
    run_export_job,
)
from kfmt.transforms.export_state import STATE_NAME, ExportState
from kfmt.transforms.export_table import table_export
from kfmt.transforms.report import make_report, report_bytes


def export(src: str, dst: str, *, src_options: dict | None = None, dst_options: dict | None = None,
           options: ExportOptions | None = None, topic: str | None = None,
           partition: int | None = None, master: str | None = None, dry_run: bool = False,
           progress: bool = True, append: bool = False) -> tuple[ExportPlan, dict | None]:
    """Export SRC into DST. Returns the plan and the report (None for a dry run, which writes
    nothing). `append`: add to the export in DST what is new since its last run (an empty or
    missing DST is exported whole). A table format (`--format iceberg`) goes to
    kfmt.transforms.export_table, with its settings (options.settings: catalog, table, properties)."""
    started = time.monotonic()
    options = options or ExportOptions()
    src_storage, src_path = open_storage(src, src_options)
    dst_storage, dst_path = open_storage(dst, dst_options if dst_options is not None else src_options)
    destination = dst_storage.url_of(dst_path)
    check_not_inside(src_storage.url_of(src_path), destination)
    if is_table(exporters()[options.format]):
        return table_export(src_storage, src_path, dst_storage, dst_path, dst,
                            dst_options if dst_options is not None else src_options, options,
                            options.settings, topic, partition, append, progress, started, dry_run)
    if options.mode == "upsert":
        return _upsert(src_storage, src_path, dst_storage, dst_path, options, topic, partition, append,
                       progress, started, dry_run)
    appending = append and dst_storage.isdir(dst_path) and bool(dst_storage.listdir(dst_path))
    if appending:
        return append_export(src_storage, src_path, dst_storage, dst_path, options, topic, partition,
                             master, progress, started, dry_run)
    if dry_run:
        if dst_storage.exists(dst_path) and (not dst_storage.isdir(dst_path)
                                             or dst_storage.listdir(dst_path)):
            raise UsageError(f"{destination}: the destination exists and is not empty")
        return plan_export(src_storage, src_path, dst_storage, dst_path, options, topic, partition), None
    # the staged output refuses a DST that is not empty, or in use, before any planning work
    with StagedOutput(dst_storage, dst_path) as out:
        plan = plan_export(src_storage, src_path, dst_storage, dst_path, options, topic, partition)
        job = run_export_job(plan, out.target(), dst_storage, dst_path, master, progress)
        for files in job.files:
            out.adopt(files)
        decoding, decode_notes = decode_report(plan, job.decode)
        report = make_report("export", plan.source, plan.destination,
                             {**options.to_json(), "topic": topic, "partition": partition,
                              "master": master}, job.inputs, job.outputs, out.files,
                             _notes(plan, job.inputs) + job.tails + decode_notes)
        if decoding:
            report["decoding"] = decoding
        report["engine"] = job.engine.to_json()
        report["duration_ms"] = round((time.monotonic() - started) * 1000)
        out.write(REPORT_NAME, report_bytes(report))
        out.write(SUCCESS_NAME, b"")
        out.write(STATE_NAME, ExportState(options.to_json(), job.next_offsets, 1).to_bytes())
    return plan, report


def _upsert(src_storage, src_path, dst_storage, dst_path, options, topic, partition, append, progress,
            started, dry_run):
    """--mode upsert into files: the table written whole (kfmt.transforms.export_upsert)."""
    from kfmt.transforms.export_upsert import upsert_files

    if append:
        raise UsageError("--mode upsert into files writes the whole table: export into a new DST (an "
                         "Iceberg table, --format iceberg, is replaced in place by --append)")
    plan = plan_export(src_storage, src_path, dst_storage, dst_path, options, topic, partition)
    if dry_run:
        return plan, None
    return plan, upsert_files(plan, dst_storage, dst_path, progress, started)
