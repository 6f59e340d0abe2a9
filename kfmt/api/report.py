"""`kfmt report` as a function: the facts of a log directory, a partition or an archive (kfmt.inspect.report),
with the estimate of what upgrade, export and archive would take (kfmt.api.estimate), and the page
drawn from them (kfmt.inspect.report.html). docs/report.md says what each part shows."""
from __future__ import annotations

import os

from kfmt.api.commands import Report, Where
from kfmt.api.estimate import SAMPLE_BYTES


def report(path: Where, *, storage_options: dict | None = None, topic: str | None = None,
           partition: int | None = None, verify: bool = True, estimate: bool = True,
           sample_bytes: int = SAMPLE_BYTES, progress: bool = False, deep: bool = False) -> Report:
    """The report's facts, as `kfmt report --format json` prints them; `Report.detail` is the page
    (`kfmt report -o FILE` writes it). `verify`: run every check of `kfmt verify` (False leaves
    "verify" null; `deep`: at `verify --deep`'s depth, every record checked); `estimate`: measure
    upgrade, export and archive on a sample of `sample_bytes` (False leaves "estimate" null)."""
    from kfmt.inspect.report import collect
    from kfmt.inspect.report.html import render
    from kfmt.partition.layout import find_partitions, is_log_dir
    from kfmt.storage.store import open_storage

    storage, where = open_storage(os.fspath(path), storage_options or {})
    storage, kind, generation = _opened(storage, where)
    parts = find_partitions(storage, where, topic, partition)
    log_dir = where if is_log_dir(parts, storage, where) else storage.parent(where)
    if kind is None:
        kind = "log directory" if log_dir == where else "partition"
    facts = collect(storage, where, parts, kind=kind, log_dir=log_dir, topic=topic, partition=partition,
                    with_verify=verify, progress=progress, deep=deep)
    facts["source"]["generation"] = generation
    facts["estimate"] = None
    if estimate:
        from kfmt.api.estimate import estimate as measure

        facts["estimate"] = measure(parts, sample_bytes, progress=progress)
    return Report(facts, detail=render(facts))


def _opened(storage, where: str):
    """(storage to read, kind or None, generation): a published archive is read through a view of
    its latest generation, as `kfmt restore` reads it (kfmt.transforms.archive.view)."""
    from kfmt.transforms.archive.generations import GENERATIONS_DIR

    if not (storage.isdir(where) and storage.exists(storage.join(where, GENERATIONS_DIR))):
        return storage, None, None
    from kfmt.transforms.archive.view import open_archive

    archive = open_archive(storage, where)
    return archive.view(storage), "archive", archive.generation.number
