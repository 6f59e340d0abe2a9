"""`kfmt export SRC DST --format iceberg` (or another table exporter, kfmt.rows.exporters.TableSink):
records into a table that a catalog keeps, one atomic commit per run.

The table's last kfmt commit carries each partition's high-water mark (the next offset to export) and
the export's options; a run into an existing table needs `--append` and reads every partition from
there, as `kfmt export --append` does for files (kfmt.transforms.export_append: a partition new in SRC
from its log start offset, offsets deleted before their export reported lost). The records are read
in this process (the table format's writer, pyiceberg, writes the data files; `--master` is not used),
a range at a time, gathered into chunks of about --target-file-size bytes of Arrow data, written as
data files, counted against what was read, and committed together with the new marks. Nothing new:
no commit.
"""
from __future__ import annotations

import time
import warnings

import pyarrow as pa

from kfmt.errors import KfmtError, KfmtWarning, UsageError
from kfmt.rows.columns import EXPORT_SCHEMA
from kfmt.rows.exporters import exporters
from kfmt.rows.ranges import RangeTally, read_range
from kfmt.storage.store import Storage
from kfmt.transforms.export_append import found_lost, lost_warning, make_resume
from kfmt.transforms.export_job import (
    ExportOptions,
    ExportPlan,
    _high_water_mark,
    _input_summary,
    _transaction_outcomes,
    plan_export,
)
from kfmt.transforms.export_state import SHAPING_OPTIONS
from kfmt.transforms.report import make_report

#: the options that shape a table's rows (its files' format and layout are the table's own)
TABLE_OPTIONS = tuple(o for o in SHAPING_OPTIONS if o != "partition_by")


def table_export(src_storage: Storage, src_path: str, dst_storage: Storage, dst_path: str, dst: str,
                 dst_options: dict | None, options: ExportOptions, settings: dict, topic, partition,
                 append: bool, progress: bool, started: float, dry_run: bool
                 ) -> tuple[ExportPlan, dict | None]:
    sink = exporters()[options.format].open_table(dst, dst_options or {}, settings)
    stored, marks = sink.high_water_marks()
    mine = {k: (list(v) if isinstance(v, tuple) else v) for k, v in options.to_json().items()
            if k in TABLE_OPTIONS}
    resume = None
    if stored is not None:
        if not append:
            raise UsageError(f"{sink.description}: the table exists; --append adds to it")
        for key in TABLE_OPTIONS:
            if stored.get(key) != mine[key]:
                raise UsageError(f"{sink.description}: the table was exported with "
                                 f"{key.replace('_', '-')} {stored.get(key)}; --append must use the same")
        resume = make_resume(marks)
    plan = plan_export(src_storage, src_path, dst_storage, dst_path, options, topic, partition, resume)
    for p in plan.partitions:
        if p.lost is not None:
            warnings.warn(KfmtWarning(lost_warning(p)))
    if dry_run:
        return plan, None
    outcomes = _transaction_outcomes(plan, "inprocess", progress)
    tallies = [RangeTally() for _ in plan.partitions]
    chunks = _chunks(plan, outcomes, tallies)
    written = sink.write(chunks, EXPORT_SCHEMA)
    new_marks = dict(marks)
    for p, tally, outcome in zip(plan.partitions, tallies, outcomes):
        mark = _high_water_mark(p, tally, outcome)
        if mark is not None:
            new_marks[(p.part.topic, p.part.partition)] = mark
    inputs = [_input_summary(p, t) for p, t in zip(plan.partitions, tallies)]
    read_rows = sum(t.rows for t in tallies)
    if written["records"] != read_rows:
        raise KfmtError(f"{sink.description}: {written['records']} rows were written into data files "
                        f"but {read_rows} read; nothing was committed")
    if not read_rows and new_marks == marks and stored is not None:
        return plan, {"command": "export", "destination": sink.description, "written": False,
                      "totals": {"partitions": len(plan.partitions), "output_records": 0},
                      "duration_ms": round((time.monotonic() - started) * 1000)}
    committed = sink.commit(new_marks, {**mine, "format": options.format})
    report = make_report("export", plan.source, sink.description,
                         {**options.to_json(), "append": append, "topic": topic,
                          "partition": partition, "table": settings}, inputs, [], {},
                         [f"{p.part.label}: offsets [{p.lost[0]}, {p.lost[1]}) lost: deleted before "
                          f"they were exported" for p in plan.partitions if p.lost is not None])
    report["totals"]["output_records"] = committed["records"]
    report["table"] = committed
    report["lost"] = [loss.to_json() for loss in found_lost(plan)]
    report["high_water_marks"] = [{"topic": t, "partition": n, "next_offset": m}
                                  for (t, n), m in sorted(new_marks.items())]
    report["duration_ms"] = round((time.monotonic() - started) * 1000)
    return plan, report


def _chunks(plan: ExportPlan, outcomes, tallies):
    """pa.Tables of export rows, about --target-file-size bytes of Arrow data each, one partition at
    a time (so that each data file holds one partition's rows)."""
    limit = plan.options.target_file_bytes
    selection = plan.options.selection
    for p, outcome, tally in zip(plan.partitions, outcomes, tallies):
        gathered, size = [], 0
        for rng in p.ranges:
            part_tally = RangeTally()
            for rows in read_range(rng, selection, outcome, part_tally):
                gathered.append(rows)
                size += rows.nbytes
                if size >= limit:
                    yield pa.Table.from_batches(gathered, EXPORT_SCHEMA)
                    gathered, size = [], 0
            tally.merge(part_tally)
        if gathered:
            yield pa.Table.from_batches(gathered, EXPORT_SCHEMA)
