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
from kfmt.transforms.export_append import found_lost, lost_warning, make_resume, moved_past
from kfmt.transforms.export_backfill import Backfill
from kfmt.transforms.export_table_letters import RUN_KEY, TableDeadLetters, finish_earlier_runs
from kfmt.transforms.export_upsert import latest_rows, upsert_key_column, upsert_key_columns, upsert_notes
from kfmt.transforms.export_job import (
    ExportOptions,
    ExportPlan,
    _high_water_mark,
    _input_summary,
    _transaction_outcomes,
    decode_report,
    plan_export,
)
from kfmt.transforms.export_state import SHAPING_OPTIONS
from kfmt.transforms.report import make_report

#: the options that shape a table's rows (its files' format and layout are the table's own), and whether
#: it is a changelog's table (--mode upsert: one row per key)
TABLE_OPTIONS = tuple(o for o in SHAPING_OPTIONS if o != "partition_by") + ("mode",)


def table_export(src_storage: Storage, src_path: str, dst_storage: Storage, dst_path: str, dst: str,
                 dst_options: dict | None, options: ExportOptions, settings: dict, topic, partition,
                 append: bool, progress: bool, started: float, dry_run: bool
                 ) -> tuple[ExportPlan, dict | None]:
    sink = exporters()[options.format].open_table(dst, dst_options or {}, settings)
    stored, marks = sink.high_water_marks()
    mine = {k: (list(v) if isinstance(v, tuple) else v) for k, v in options.to_json().items()
            if k in TABLE_OPTIONS}
    backfill = Backfill.of(sink, stored)  # below a live feed's rows (kfmt.transforms.export_backfill)
    stored, marks = _check_append(sink, stored, marks, mine, append)
    # an appending run (a changelog's too: kfmt.transforms.export_upsert) reads what is new since the last
    resume = make_resume(marks) if stored is not None else None
    plan = plan_export(src_storage, src_path, dst_storage, dst_path, options, topic, partition, resume)
    if options.mode == "upsert" and stored is not None:
        sink.delete_keys = {}  # filled in by the run: the keys whose rows it replaces or removes
        upsert_key_columns(plan, sink.description)
    for p in plan.partitions:
        if p.lost is not None:
            warnings.warn(KfmtWarning(lost_warning(p)))
    if dry_run:
        return plan, None
    finish_earlier_runs(dst_storage, dst_path, (stored or {}).get(RUN_KEY))
    dead = TableDeadLetters(plan, dst_storage, dst_path) if plan.typing else None
    try:
        report = _write_and_commit(plan, sink, stored, marks, mine, backfill, dead, progress)
    except BaseException:
        if dead is not None:
            dead.discard()
        raise
    if report is not None and dead is not None:
        dead.publish()
        report["notes"] = report.get("notes", []) + dead.notes()
    if report is None:  # nothing new
        report = {"command": "export", "destination": sink.description, "written": False,
                  "totals": {"partitions": len(plan.partitions), "output_records": 0}}
    else:
        report["options"].update({"append": append, "topic": topic, "partition": partition,
                                  "table": settings})
    report["duration_ms"] = round((time.monotonic() - started) * 1000)
    return plan, report


def _check_append(sink, stored: dict | None, marks: dict, mine: dict, append: bool) -> tuple:
    """(the table's kfmt options, its marks), None and {} for a table kfmt did not write; refuse a run
    into an existing table without --append, or with other options than it was exported with."""
    if stored is not None and stored.get("foreign"):
        if not append:
            raise UsageError(f"{sink.description}: the table exists and was not written by kfmt: "
                             f"--append backfills it below the offsets it holds")
        return None, {}
    if stored is not None:
        if not append:
            raise UsageError(f"{sink.description}: the table exists; --append adds to it")
        for key in TABLE_OPTIONS:
            if stored.get(key) != mine.get(key):
                value = stored.get(key) if key != "mode" else stored.get(key) or "records"
                raise UsageError(f"{sink.description}: the table was exported with "
                                 f"{key.replace('_', '-')} {value}; --append must use the same")
    return stored, marks


def _write_and_commit(plan: ExportPlan, sink, stored, marks: dict, mine: dict, backfill, dead,
                      progress: bool) -> dict | None:
    """Read, write the data files, check them against what was read, commit: the report (None when
    there was nothing new to commit)."""
    options = plan.options
    outcomes = _transaction_outcomes(plan, "inprocess", progress)
    tallies = [RangeTally() for _ in plan.partitions]
    schema = table_schema(plan)
    upsert_decode = None
    if options.mode == "upsert":  # the live rows of the keys seen; their old rows go in the same commit
        live, tallies, upsert_decode = latest_rows(plan, progress)
        chunks = [t.cast(schema) for t in live.values() if t.num_rows]
        read_rows = sum(t.num_rows for t in live.values())
        _stage_upsert_letters(upsert_decode, dead)
        if getattr(sink, "delete_keys", None) is not None:
            sink.delete_keys = {t: (upsert_key_column(plan, t), keys)
                                for t, keys in upsert_decode["changed"].items() if len(keys)}
    else:
        chunks = _chunks(plan, outcomes, tallies, schema, dead, backfill)
    written = sink.write(chunks, schema)
    if options.mode != "upsert":
        read_rows = backfill.kept if backfill is not None else sum(t.rows for t in tallies)
    new_marks = dict(marks)
    for p, tally, outcome in zip(plan.partitions, tallies, outcomes):
        mark = _high_water_mark(p, tally, outcome)
        if backfill is not None:
            mark = backfill.mark(p.part, mark)
        if mark is not None:
            new_marks[(p.part.topic, p.part.partition)] = mark
    losses = found_lost(plan)
    lost = moved_past(losses, new_marks, sink.lost)  # stored in the commit, reported once
    if written["records"] != read_rows:
        raise KfmtError(f"{sink.description}: {written['records']} rows were written into data files "
                        f"but {read_rows} read; nothing was committed")
    changed = sum(len(k) for _, k in (getattr(sink, "delete_keys", None) or {}).values())
    if not read_rows and not changed and new_marks == marks and stored is not None:
        return None
    committed = sink.commit(new_marks, {**mine, "format": options.format,
                                        **(backfill.stored() if backfill is not None else {}),
                                        **(dead.committed_with() if dead is not None else {})}, lost)
    return _table_report(plan, sink, tallies, committed, new_marks, losses, upsert_decode, dead)


def _table_report(plan: ExportPlan, sink, tallies, committed: dict, new_marks: dict, losses: list,
                  upsert_decode, dead) -> dict:
    inputs = [_input_summary(p, t) for p, t in zip(plan.partitions, tallies)]
    notes = [f"{p.part.label}: offsets [{p.lost[0]}, {p.lost[1]}) lost: deleted before they were exported"
             for p in plan.partitions if p.lost is not None]
    if upsert_decode is not None:
        notes += upsert_notes(upsert_decode, committed["records"])
    report = make_report("export", plan.source, sink.description, plan.options.to_json(), inputs, [], {},
                         notes)
    report["totals"]["output_records"] = committed["records"]
    report["table"] = committed
    report["lost"] = [loss.to_json() for loss in losses]
    report["high_water_marks"] = [{"topic": t, "partition": n, "next_offset": m}
                                  for (t, n), m in sorted(new_marks.items())]
    if dead is not None:
        tallied = dead.decode if upsert_decode is None else {
            k: v for k, v in upsert_decode.items() if isinstance(k, tuple)}
        decoding, decode_notes = decode_report(plan, tallied)
        report["decoding"] = decoding
        report["notes"] = report.get("notes", []) + decode_notes
    return report


def _stage_upsert_letters(upsert_decode: dict, dead) -> None:
    for topic, rows in upsert_decode["dead"].items():
        if dead is not None:
            dead.stage_rows(topic, rows)


def table_schema(plan: ExportPlan) -> pa.Schema:
    """The table's rows: the export schema, with keys and values decoded where the run decodes them
    (one table: every topic of the run must decode to the same types)."""
    schemas = {plan.typing[p.part.topic].schema(EXPORT_SCHEMA) if p.part.topic in plan.typing
               else EXPORT_SCHEMA for p in plan.partitions}
    if len(schemas) > 1:
        raise UsageError("the topics exported decode to different types, and a table has one schema: "
                         "export them into one table each (--topic, --iceberg-table)")
    return schemas.pop() if schemas else EXPORT_SCHEMA


def _chunks(plan: ExportPlan, outcomes, tallies, schema: pa.Schema = EXPORT_SCHEMA, dead=None,
            backfill=None):
    """pa.Tables of export rows, about --target-file-size bytes of Arrow data each, one partition at
    a time (so that each data file holds one partition's rows)."""
    limit = plan.options.target_file_bytes
    selection = plan.options.selection
    for p, outcome, tally in zip(plan.partitions, outcomes, tallies):
        gathered, size = [], 0
        for rng in p.ranges:
            part_tally = RangeTally()
            for rows in read_range(rng, selection, outcome, part_tally):
                if backfill is not None:
                    rows = backfill.rows(p, rows)
                if dead is not None:
                    rows = dead.split(p.part, rows)
                gathered.append(rows)
                size += rows.nbytes
                if size >= limit:
                    yield pa.Table.from_batches(gathered, schema)
                    gathered, size = [], 0
            tally.merge(part_tally)
        if gathered:
            yield pa.Table.from_batches(gathered, schema)
