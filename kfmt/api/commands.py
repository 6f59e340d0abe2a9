"""kfmt's commands as Python functions: `kfmt.upgrade(src, dst, ...)` and the others.

Each function here is THE entry point of its command: the `kfmt` command line (kfmt/cli/*.py) turns
its flags into these keyword arguments and prints what comes back, so a script gets exactly what
`kfmt CMD --format json` prints, and the same errors (kfmt.errors: UsageError for a bad request,
DataError for bad data, KfmtError for the rest), without a subprocess.

Keyword arguments every transform takes (as the flags of docs/cli.md "Transforms"):
`storage_options` (fsspec options for SRC, a dict), `dst_storage_options` (for DST; default SRC's),
`topic` (a glob on topic names), `partition` (a number), `dry_run` (plan only, write nothing),
`progress` (tqdm bars on stderr) and, for the commands that run on an engine, `master` (a Spark master
URL, or "inprocess"). Those that regenerate companion files also take `index_interval_bytes`, `now_ms`
and `producer_expiration_ms` (kfmt.partition.companions.CompanionOptions); those that write
partition directories (upgrade, resegment, recompress, compact, retain, reindex, restore) take
`topic_id` and `cluster_metadata`, the target cluster's topic ids (`target_topics`).

Heavy modules (the transforms, pyspark) are imported when a command runs, never by `import kfmt`.
"""
from __future__ import annotations

import os
from typing import Sequence

from kfmt.api.arguments import (  # Report and Where: also kfmt's face (kfmt/__init__.py)
    Report,
    Where,
    companion_options,
    job_options,
    outcome,
    paths,
    progress_bar,
    run_keywords,
    target_topics,
    typing_keywords,
    typing_options,
)
from kfmt.defaults import DEFAULT_INDEX_INTERVAL_BYTES, DEFAULT_PRODUCER_EXPIRATION_MS
from kfmt.errors import UsageError


# --- transforms on an engine (kfmt.transforms.rewrite) ---

def upgrade(src: Where, dst: Where, *, rebatch: bool = False, max_batch_bytes: int | None = None,
            index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES, now_ms: int | None = None,
            producer_expiration_ms: int = DEFAULT_PRODUCER_EXPIRATION_MS,
            storage_options: dict | None = None, dst_storage_options: dict | None = None,
            topic: str | None = None, partition: int | None = None, master: str | None = None,
            dry_run: bool = False, progress: bool = False,
            include_deleted: bool = False, compression_levels: dict | list | None = None,
            topic_id: str | Sequence[str] | dict | None = None,
            cluster_metadata: Where | None = None) -> Report:
    """Message formats v0/v1 to v2 by Kafka 4.0's rules (`kfmt upgrade`); `rebatch` groups runs of
    uncompressed legacy messages into batches of at most `max_batch_bytes`; `compression_levels`:
    {codec name: level} of the wrappers re-encoded (default: each codec's own)."""
    from kfmt.format.codecs import compression_levels as levels_of
    from kfmt.transforms.upgrade import DEFAULT_MAX_BATCH_BYTES
    from kfmt.transforms.upgrade import upgrade as run_upgrade

    if max_batch_bytes is not None and not rebatch:
        raise UsageError("--max-batch-bytes (max_batch_bytes) only applies with --rebatch (rebatch)")
    return outcome(*run_upgrade(
        *paths(src, dst), rebatch=rebatch, max_batch_bytes=max_batch_bytes or DEFAULT_MAX_BATCH_BYTES,
        levels=levels_of(compression_levels),
        companions=companion_options(index_interval_bytes, now_ms, producer_expiration_ms),
        job=job_options(storage_options, dst_storage_options, topic, partition, dry_run, master, progress,
                        include_deleted, target_topics(topic_id, cluster_metadata, storage_options))))


def resegment(src: Where, dst: Where, *, segment_bytes: int, segment_ms: int | None = None,
              segment_index_bytes: int | None = None, kafka_version: str | None = None,
              index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES, now_ms: int | None = None,
              producer_expiration_ms: int = DEFAULT_PRODUCER_EXPIRATION_MS,
              storage_options: dict | None = None, dst_storage_options: dict | None = None,
              topic: str | None = None, partition: int | None = None, master: str | None = None,
              dry_run: bool = False, progress: bool = False,
              include_deleted: bool = False, deep: bool = False,
              topic_id: str | Sequence[str] | dict | None = None,
              cluster_metadata: Where | None = None) -> Report:
    """The same batches in segments cut by other segment.bytes / segment.ms / segment.index.bytes
    (`kfmt resegment`; None: the topic defaults), for the broker `kafka_version` names (default 4.x,
    whose segment.bytes is at least 1 MiB); `deep`: every record checked, not only every entry."""
    from kfmt.transforms.resegment import resegment as run_resegment
    from kfmt.defaults import DEFAULT_MAX_INDEX_BYTES, DEFAULT_SEGMENT_MS

    return outcome(*run_resegment(
        *paths(src, dst), segment_bytes=segment_bytes,
        segment_ms=DEFAULT_SEGMENT_MS if segment_ms is None else segment_ms,
        segment_index_bytes=DEFAULT_MAX_INDEX_BYTES if segment_index_bytes is None else segment_index_bytes,
        kafka_version=kafka_version,
        companions=companion_options(index_interval_bytes, now_ms, producer_expiration_ms),
        deep=deep, job=job_options(storage_options, dst_storage_options, topic, partition, dry_run, master,
                                   progress, include_deleted, target_topics(topic_id, cluster_metadata,
                                                                            storage_options))))


def recompress(src: Where, dst: Where, *, compression: str, level: int | None = None,
               index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES, now_ms: int | None = None,
               producer_expiration_ms: int = DEFAULT_PRODUCER_EXPIRATION_MS,
               storage_options: dict | None = None, dst_storage_options: dict | None = None,
               topic: str | None = None, partition: int | None = None, master: str | None = None,
               dry_run: bool = False, progress: bool = False,
               include_deleted: bool = False,
               topic_id: str | Sequence[str] | dict | None = None,
               cluster_metadata: Where | None = None) -> Report:
    """Every data batch in v2 with another codec (none, gzip, snappy, lz4, zstd) or level
    (`kfmt recompress`)."""
    from kfmt.transforms.recompress import recompress as run_recompress

    return outcome(*run_recompress(
        *paths(src, dst), compression=compression, level=level,
        companions=companion_options(index_interval_bytes, now_ms, producer_expiration_ms),
        job=job_options(storage_options, dst_storage_options, topic, partition, dry_run, master, progress,
                        include_deleted, target_topics(topic_id, cluster_metadata, storage_options))))


def export(src: Where, dst: Where, *, format: str = "parquet",
           partition_by: str | Sequence[str] = ("topic", "partition"),
           isolation: str = "read_uncommitted", include_control: bool = False,
           max_bytes_per_task: int | None = None, target_file_size: int | None = None,
           include_deleted: bool = False, append: bool = False,
           storage_options: dict | None = None, dst_storage_options: dict | None = None,
           topic: str | None = None, partition: int | None = None, master: str | None = None,
           dry_run: bool = False, progress: bool = False, mode: str = "records", **keywords) -> Report:
    """Records to Parquet or JSON Lines files in Hive-style directories, or to an Iceberg table
    (`kfmt export`); `partition_by` "topic,partition" or "topic,partition,date" (a string or a
    sequence); `append` adds what is new since the export's last run (docs/export.md).
    `mode="upsert"`: one row per key, its last value (a changelog's table). `keywords`: how keys
    and values are decoded (key_format, value_format, key_format_options, value_format_options,
    schemas, schema_registry_auth, schema_registry_token, on_decode_error, keep_raw: typing_options;
    docs/typed-export.md), and the options the chosen exporter declares, as `<format>_<option>`
    (`iceberg_catalog`, `iceberg_table`, `iceberg_properties`; `kfmt plugins` lists them)."""
    from kfmt.defaults import DEFAULT_SPLIT_BYTES, DEFAULT_TARGET_FILE_BYTES
    from kfmt.rows.exporters import settings_from_keywords
    from kfmt.transforms.export import ExportOptions
    from kfmt.transforms.export import export as run_export

    typing = typing_keywords(keywords)
    if isinstance(partition_by, str):
        partition_by = partition_by.split(",")
    if max_bytes_per_task is None:
        max_bytes_per_task = DEFAULT_SPLIT_BYTES
    if max_bytes_per_task <= 0:
        raise UsageError("--max-bytes-per-task (max_bytes_per_task) must be positive")
    if target_file_size is None:
        target_file_size = DEFAULT_TARGET_FILE_BYTES
    if target_file_size <= 0:
        raise UsageError("--target-file-size (target_file_size) must be positive")
    options = ExportOptions(format, tuple(c.strip() for c in partition_by), include_control, isolation,
                            max_bytes_per_task, target_file_size, include_deleted,
                            typing_options(**typing), mode, settings_from_keywords(format, keywords))
    return outcome(*run_export(*paths(src, dst), options=options, append=append,
                                **run_keywords(storage_options, dst_storage_options, topic, partition, dry_run,
                                       master, progress)))




# --- cleanup policies (kfmt.transforms.cleanup) ---

def compact(src: Where, dst: Where, *, delete_retention_ms: int | None = None, now_ms: int | None = None,
            clean_until: int | None = None, min_compaction_lag_ms: int = 0,
            segment_bytes: int | None = None, segment_index_bytes: int | None = None,
            offset_map_bytes: int | None = None, offset_map_load_factor: float | None = None,
            fail_when_map_full: bool = False, keep_format: bool = False,
            cleanup_policy: str = "compact",
            index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
            producer_expiration_ms: int = DEFAULT_PRODUCER_EXPIRATION_MS,
            storage_options: dict | None = None, dst_storage_options: dict | None = None,
            topic: str | None = None, partition: int | None = None, master: str | None = None,
            dry_run: bool = False, progress: bool = False, include_deleted: bool = False,
            compression_levels: dict | list | None = None,
            topic_id: str | Sequence[str] | dict | None = None,
            cluster_metadata: Where | None = None) -> Report:
    """Kafka's log cleaner (cleanup.policy=compact) applied to a copy (`kfmt compact`); None: the
    topic or broker default. A dry run's report says what would be removed. `include_deleted`: a
    partition-directory DST keeps what lies below the log start offset. `compression_levels`:
    {codec name: level} of the batches compressed anew (default: each codec's own)."""
    from kfmt.format.codecs import compression_levels as levels_of
    from kfmt.transforms.cleanup.compact import compact as run_compact
    from kfmt.transforms.cleanup.compaction import CompactOptions
    from kfmt.defaults import (
        DEFAULT_DELETE_RETENTION_MS,
        DEFAULT_MAX_INDEX_BYTES,
        DEFAULT_OFFSET_MAP_LOAD_FACTOR,
        DEFAULT_OFFSET_MAP_MEMORY,
        DEFAULT_SEGMENT_BYTES,
    )

    def given(value, default):
        return default if value is None else value

    options = CompactOptions(
        now_ms=now_ms or 0, delete_retention_ms=given(delete_retention_ms, DEFAULT_DELETE_RETENTION_MS),
        min_compaction_lag_ms=min_compaction_lag_ms, clean_until=clean_until,
        segment_bytes=given(segment_bytes, DEFAULT_SEGMENT_BYTES),
        segment_index_bytes=given(segment_index_bytes, DEFAULT_MAX_INDEX_BYTES),
        index_interval_bytes=index_interval_bytes, offset_map_bytes=given(offset_map_bytes, DEFAULT_OFFSET_MAP_MEMORY),
        offset_map_load_factor=given(offset_map_load_factor, DEFAULT_OFFSET_MAP_LOAD_FACTOR),
        fail_when_map_full=fail_when_map_full, keep_format=keep_format,
        producer_expiration_ms=producer_expiration_ms, cleanup_policy=cleanup_policy,
        include_deleted=include_deleted, compression_levels=levels_of(compression_levels))
    plan, report = run_compact(*paths(src, dst), options,
                               target=target_topics(topic_id, cluster_metadata, storage_options), **run_keywords(
        storage_options, dst_storage_options, topic, partition, dry_run, master, progress))
    return Report(report, plan=plan)


def retain(src: Where, dst: Where, *, retention_ms: int = -1, retention_bytes: int = -1,
           log_start_offset: int | None = None, now_ms: int | None = None, include_active: bool = False,
           cleanup_policy: str = "delete",
           index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
           producer_expiration_ms: int = DEFAULT_PRODUCER_EXPIRATION_MS,
           storage_options: dict | None = None, dst_storage_options: dict | None = None,
           topic: str | None = None, partition: int | None = None, master: str | None = None,
           dry_run: bool = False, progress: bool = False, include_deleted: bool = False, deep: bool = False,
           topic_id: str | Sequence[str] | dict | None = None,
           cluster_metadata: Where | None = None) -> Report:
    """Kafka's delete policy (retention.ms, retention.bytes, a DeleteRecords log start offset)
    applied to a copy (`kfmt retain`); -1 turns a rule off. A dry run's report says what would go.
    `include_deleted`: a partition-directory DST keeps its first segment whole, the records below the
    log start offset in it too. `deep`: every record kept checked and every record removed counted
    (wrappers inflated)."""
    from kfmt.transforms.cleanup.retain import retain as run_retain
    from kfmt.transforms.cleanup.retention import RetentionOptions

    options = RetentionOptions(retention_ms, retention_bytes, log_start_offset, now_ms or 0, include_active,
                               index_interval_bytes, producer_expiration_ms, cleanup_policy,
                               deep=deep, include_deleted=include_deleted)
    plan, report = run_retain(*paths(src, dst), options,
                              target=target_topics(topic_id, cluster_metadata, storage_options), **run_keywords(
        storage_options, dst_storage_options, topic, partition, dry_run, master, progress))
    return Report(report, plan=plan)


# --- transforms a partition at a time ---

def reindex(src: Where, dst: Where, *, index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
            now_ms: int | None = None, producer_expiration_ms: int = DEFAULT_PRODUCER_EXPIRATION_MS,
            storage_options: dict | None = None, dst_storage_options: dict | None = None,
            topic: str | None = None, partition: int | None = None, master: str | None = None,
            dry_run: bool = False, progress: bool = False, include_deleted: bool = False, deep: bool = False,
            topic_id: str | Sequence[str] | dict | None = None,
            cluster_metadata: Where | None = None) -> Report:
    """A copy with .index, .timeindex, .txnindex, producer snapshots and leader-epoch-checkpoint
    regenerated as Kafka's log recovery builds them (`kfmt reindex`); entries checked as that recovery
    checks them, or with `deep` every record decoded (the report's content digest); `include_deleted`:
    a partition-directory DST keeps what lies below the log start offset."""
    from kfmt.transforms.reindex import reindex as run_reindex

    with progress_bar(progress, unit="B", unit_scale=True, desc="reindex") as bar:
        return outcome(*run_reindex(
            *paths(src, dst), options=companion_options(index_interval_bytes, now_ms, producer_expiration_ms),
            on_progress=bar.update, deep=deep,
            job=job_options(storage_options, dst_storage_options, topic, partition, dry_run, master, progress,
                            include_deleted, target_topics(topic_id, cluster_metadata, storage_options))))


def salvage(src: Where, dst: Where, *, index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
            now_ms: int | None = None, producer_expiration_ms: int = DEFAULT_PRODUCER_EXPIRATION_MS,
            storage_options: dict | None = None, dst_storage_options: dict | None = None,
            topic: str | None = None, partition: int | None = None, master: str | None = None,
            dry_run: bool = False, progress: bool = False,
            topic_id: str | Sequence[str] | dict | None = None,
            cluster_metadata: Where | None = None) -> Report:
    """Every intact batch of a damaged partition or log directory into a broker-ready copy, with
    every byte range dropped in the report (`kfmt salvage`); `topic_id`, `cluster_metadata`: the
    cluster the copy is for, as for reindex."""
    from kfmt.transforms.salvage import SalvageOptions
    from kfmt.transforms.salvage import salvage as run_salvage

    options = SalvageOptions(**companion_options(index_interval_bytes, now_ms,
                                           producer_expiration_ms).builder_options())
    with progress_bar(progress, unit="B", unit_scale=True, desc="salvage") as bar:
        plan, report = run_salvage(*paths(src, dst), options=options, on_progress=bar.update,
                                   target=target_topics(topic_id, cluster_metadata, storage_options), **run_keywords(
            storage_options, dst_storage_options, topic, partition, dry_run, master, progress))
    return Report(report, plan=plan)


# --- object storage ---

def archive(src: Where, url: Where, *, include_active: bool | None = None, prune: bool = False,
            storage_options: dict | None = None, dst_storage_options: dict | None = None,
            topic: str | None = None, partition: int | None = None, master: str | None = None,
            dry_run: bool = False, progress: bool = False, deep: bool = False) -> Report:
    """Add what is new in partition directories to an archive on object storage and publish a new
    generation of it (`kfmt archive`): rolled segments not archived yet, segments the cleaner
    rewrote, the active segment up to its last complete entry unless a broker runs on SRC
    (`include_active` True or False decides instead); segments retention deleted stay unless `prune`.
    Offsets deleted before any run read them are in the report's "lost". With nothing new it
    uploads nothing and gives {"state": "unchanged", "generation": <the latest>, ...}."""
    from kfmt.transforms.archive.upload import archive as run_archive

    result = run_archive(*paths(src, url), include_active=include_active, prune=prune, deep=deep,
                         job=job_options(storage_options, dst_storage_options, topic, partition, dry_run,
                                         master, progress))
    if dry_run:
        return Report(result.plan.to_json(), plan=result.plan, is_plan=True, detail=result)
    if result.report is None:  # nothing new
        return Report({"command": "archive", "destination": result.plan.plan.destination,
                       "state": "unchanged", "generation": result.generation,
                       "active_segments": result.plan.active_json(), "lost": []},
                      plan=result.plan, detail=result)
    return Report(result.report, plan=result.plan, detail=result)


def archive_generations(url: Where, *, storage_options: dict | None = None) -> list[dict]:
    """The generations of a published archive, oldest first (`kfmt restore URL --list-generations`):
    number, publication time, run, and per partition its log start offset, segments, records and
    next offset."""
    from kfmt.storage.store import open_storage
    from kfmt.transforms.archive.view import list_generations

    return list_generations(*open_storage(os.fspath(url), storage_options or {}))


def restore(url: Where, dst: Where, *, index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
            now_ms: int | None = None, producer_expiration_ms: int = DEFAULT_PRODUCER_EXPIRATION_MS,
            storage_options: dict | None = None, dst_storage_options: dict | None = None,
            topic: str | None = None, partition: int | None = None, master: str | None = None,
            dry_run: bool = False, progress: bool = False, generation: int | None = None,
            include_deleted: bool = False, deep: bool = False,
            topic_id: str | Sequence[str] | dict | None = None,
            cluster_metadata: Where | None = None) -> Report:
    """A generation of an archive (default the latest) back to a broker-ready directory, checksums
    checked and companion files regenerated (`kfmt restore`); `include_deleted`: a
    partition-directory DST keeps the archived records below the log start offset; `deep`: every
    record decoded."""
    from kfmt.transforms.archive.restore import restore as run_restore

    result = run_restore(*paths(url, dst), generation=generation, deep=deep,
                         options=companion_options(index_interval_bytes, now_ms, producer_expiration_ms),
                         job=job_options(storage_options, dst_storage_options, topic, partition, dry_run, master,
                                         progress, include_deleted,
                                         target_topics(topic_id, cluster_metadata, storage_options)))
    return outcome(result, result.report)


# --- inspection ---

def verify(path: Where, *, storage_options: dict | None = None, topic: str | None = None,
           partition: int | None = None, progress: bool = False,
           cluster_metadata: Where | None = None, deep: bool = False) -> Report:
    """Every check of `kfmt verify`. Problems do not raise: the report's "ok" says whether there
    were errors (the command exits 65 then) and lists them; `Report.detail` is the
    kfmt.inspect.verify Report. `cluster_metadata`: a copy of a KRaft cluster's metadata log to
    check topic ids against (default: a log directory's own). `deep`: every record checked too,
    compressed batches inflated (`verify --deep`); else what a broker's log recovery checks."""
    from kfmt.inspect.verify import verify as run_verify
    from kfmt.storage.store import open_storage

    storage, where = open_storage(os.fspath(path), storage_options or {})
    bar = None

    def start_progress(total):
        nonlocal bar
        bar = progress_bar(progress, total=total, unit="segment", desc="verify")
        return lambda: bar.update(1)

    try:
        report = run_verify(storage, where, topic, partition, start_progress,
                            None if cluster_metadata is None else os.fspath(cluster_metadata),
                            storage_options or {}, deep=deep)
    finally:
        if bar is not None:
            bar.close()
    return Report(report.to_json(), detail=report)


def partition_infos(path: Where, *, storage_options: dict | None = None, topic: str | None = None,
                    partition: int | None = None, include_deleted: bool = False, deep: bool = False) -> list:
    """kfmt.inspect.info's PartitionInfo of every partition at `path` (what `kfmt info` shows);
    `deep`: compressed batches inflated and every record counted (else from their headers)."""
    from kfmt.inspect.info import partition_infos as infos
    from kfmt.partition.layout import find_partitions
    from kfmt.storage.store import open_storage

    storage, where = open_storage(os.fspath(path), storage_options or {})
    return infos(find_partitions(storage, where, topic, partition), include_deleted=include_deleted, deep=deep)


def info(path: Where, *, storage_options: dict | None = None, topic: str | None = None,
         partition: int | None = None, include_deleted: bool = False, deep: bool = False) -> list[dict]:
    """One summary per partition, as the JSON lines of `kfmt info --format json` (segments, offsets,
    timestamps, bytes, batches, records, and the (magic, compression) census under "formats");
    `deep`: every record counted, compressed batches inflated."""
    return [i.to_json() for i in partition_infos(path, storage_options=storage_options, topic=topic,
                                                 partition=partition, include_deleted=include_deleted,
                                                 deep=deep)]
