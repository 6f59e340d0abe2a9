"""What the command functions of kfmt.api.commands share: the paths they take, the keyword
arguments every transform passes on to its library entry point, the target cluster's topic ids, the
progress bar, and the Report they return."""
from __future__ import annotations

import inspect
import os
import sys

Where = str | os.PathLike  # a local path or an fsspec URL


class Report(dict):
    """A command's outcome as the JSON `kfmt CMD --format json` prints: its report, or, for a dry run
    of a transform that only plans, the plan (`is_plan` True). `plan` and `detail` keep the objects
    the text output is made from (the plan; verify's problem list, an archive's state)."""

    def __init__(self, data: dict, *, plan=None, is_plan: bool = False, detail=None):
        super().__init__(data)
        self.plan, self.is_plan, self.detail = plan, is_plan, detail


def paths(*given) -> list[str]:
    """Paths as the storage layer takes them (a pathlib.Path works too)."""
    return [os.fspath(p) for p in given]


def outcome(plan, report: dict | None) -> Report:
    """A transform's (plan, report): the report, or the plan of a dry run that made none."""
    if report is None:
        return Report(plan.to_json(), plan=plan, is_plan=True)
    return Report(report, plan=plan)


def run_keywords(storage_options, dst_storage_options, topic, partition, dry_run, master=None,
                 progress=False) -> dict:
    """The keyword arguments every transform's library entry point takes."""
    return dict(src_options=storage_options or {},
                dst_options=dict(dst_storage_options) if dst_storage_options is not None else None,
                topic=topic, partition=partition, dry_run=dry_run, master=master, progress=progress)


def job_options(storage_options, dst_storage_options, topic, partition, dry_run, master=None,
                progress=False, include_deleted=False, target=None):
    """kfmt.transforms.job_options.JobOptions from a command's keywords (`target`: target_topics's)."""
    from kfmt.transforms.job_options import JobOptions

    return JobOptions(**run_keywords(storage_options, dst_storage_options, topic, partition, dry_run, master,
                                     progress), include_deleted=include_deleted, target=target)


def companion_options(index_interval_bytes, now_ms, producer_expiration_ms):
    from kfmt.partition.companions import CompanionOptions

    return CompanionOptions(index_interval_bytes, now_ms, producer_expiration_ms)


def target_topics(topic_id, cluster_metadata, storage_options):
    """The topic ids a transform's output is for (kfmt.partition.topic_identity): `topic_id` is an
    id for SRC's only topic, "TOPIC=ID", a list of those or a {topic: id} dict; `cluster_metadata`
    a copy of the target cluster's `__cluster_metadata-0` (or the log directory holding it), read
    with `storage_options`. None when neither is given: every partition keeps its own id."""
    if topic_id is None and cluster_metadata is None:
        return None
    from kfmt.partition.topic_identity import TargetTopics

    ids = [topic_id] if isinstance(topic_id, str) else topic_id
    return TargetTopics.of(ids, None if cluster_metadata is None else os.fspath(cluster_metadata),
                           storage_options)


def progress_bar(progress: bool, **kwargs):
    """A tqdm bar on stderr, or one that shows nothing."""
    from tqdm import tqdm

    return tqdm(disable=not progress, file=sys.stderr, **kwargs)


def typing_options(key_format=None, value_format=None, key_format_options: dict | None = None,
                   value_format_options: dict | None = None, schemas: str | None = None,
                   schema_registry_auth: str | None = None, schema_registry_token: str | None = None,
                   schema_registry_headers: dict | None = None, on_decode_error: str = "dead-letter",
                   keep_raw: bool = False):
    """kfmt.rows.typed.TypingOptions from keyword arguments (formats as a name or a list of
    `[TOPIC_GLOB:]NAME`)."""
    from kfmt.rows.schemas.sources import RegistryAuth
    from kfmt.rows.typed import TypingOptions

    auth = RegistryAuth(schema_registry_auth, schema_registry_token,
                        tuple(sorted((schema_registry_headers or {}).items())))
    return TypingOptions.of(key_format, value_format, key_options=key_format_options,
                            value_options=value_format_options, schemas=schemas, registry_auth=auth,
                            on_decode_error=on_decode_error, keep_raw=keep_raw)


_TYPING_KEYWORDS = frozenset(inspect.signature(typing_options).parameters)


def typing_keywords(keywords: dict) -> dict:
    """The keywords of `typing_options` taken out of a command's `keywords` (what is left are the
    chosen exporter's settings)."""
    return {k: keywords.pop(k) for k in list(keywords) if k in _TYPING_KEYWORDS}
