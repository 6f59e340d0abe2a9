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
from kfmt.rows.typed import DecodeTally
from kfmt.storage.store import Storage
from kfmt.transforms.export_append import found_lost, lost_warning, make_resume
from kfmt.transforms.export_backfill import Backfill
from kfmt.transforms.export_upsert import latest_rows
from kfmt.transforms.export_job import (
    DEAD_LETTER_DIR,
    ExportOptions,
    ExportPlan,
    _high_water_mark,
    _input_summary,
    _transaction_outcomes,
    decode_report,
    hive_value,
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
    backfill = Backfill.of(sink, stored)  # below a live feed's rows (kfmt.transforms.export_backfill)
    if stored is not None and stored.get("foreign"):
        if not append:
            raise UsageError(f"{sink.description}: the table exists and was not written by kfmt: "
                             f"--append backfills it below the offsets it holds")
        stored, marks = None, {}
    if stored is not None:
        if not append:
            raise UsageError(f"{sink.description}: the table exists; --append adds to it")
        for key in TABLE_OPTIONS:
            if stored.get(key) != mine[key]:
                raise UsageError(f"{sink.description}: the table was exported with "
                                 f"{key.replace('_', '-')} {stored.get(key)}; --append must use the same")
        resume = make_resume(marks) if options.mode != "upsert" else None  # upsert: the whole topic again
    plan = plan_export(src_storage, src_path, dst_storage, dst_path, options, topic, partition, resume)
    for p in plan.partitions:
        if p.lost is not None:
            warnings.warn(KfmtWarning(lost_warning(p)))
    if dry_run:
        return plan, None
    outcomes = _transaction_outcomes(plan, "inprocess", progress)
    tallies = [RangeTally() for _ in plan.partitions]
    schema = table_schema(plan)
    dead = TableDeadLetters(plan, dst_storage, dst_path) if plan.typing else None
    if options.mode == "upsert":  # the table replaced by the topic's live rows, in the same commit
        live, tallies, upsert_decode = latest_rows(plan, progress)
        chunks = [t.cast(schema) if t.num_rows else t for t in live.values()]
        sink.replace = True
    else:
        chunks = _chunks(plan, outcomes, tallies, schema, dead, backfill)
    written = sink.write(chunks, schema)
    new_marks = dict(marks)
    for p, tally, outcome in zip(plan.partitions, tallies, outcomes):
        mark = _high_water_mark(p, tally, outcome)
        if backfill is not None:
            mark = backfill.mark(p.part, mark)
        if mark is not None:
            new_marks[(p.part.topic, p.part.partition)] = mark
    inputs = [_input_summary(p, t) for p, t in zip(plan.partitions, tallies)]
    read_rows = sum(t.rows for t in tallies) if options.mode != "upsert" else sum(
        t.num_rows for t in live.values())
    if backfill is not None:
        read_rows = backfill.kept
    if written["records"] != read_rows:
        raise KfmtError(f"{sink.description}: {written['records']} rows were written into data files "
                        f"but {read_rows} read; nothing was committed")
    if not read_rows and new_marks == marks and stored is not None:
        return plan, {"command": "export", "destination": sink.description, "written": False,
                      "totals": {"partitions": len(plan.partitions), "output_records": 0},
                      "duration_ms": round((time.monotonic() - started) * 1000)}
    committed = sink.commit(new_marks, {**mine, "format": options.format,
                                        **(backfill.stored() if backfill is not None else {})})
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
    if options.mode == "upsert":
        decoding, notes = decode_report(plan, {k: v for k, v in upsert_decode.items() if isinstance(k, tuple)})
        report["decoding"] = decoding
        report["notes"] = report.get("notes", []) + notes
    elif dead is not None:
        decoding, notes = decode_report(plan, dead.decode)
        report["decoding"] = decoding
        report["notes"] = report.get("notes", []) + notes + dead.notes()
    report["duration_ms"] = round((time.monotonic() - started) * 1000)
    return plan, report


def table_schema(plan: ExportPlan) -> pa.Schema:
    """The table's rows: the export schema, with keys and values decoded where the run decodes them
    (one table: every topic of the run must decode to the same types)."""
    schemas = {plan.typing[p.part.topic].schema(EXPORT_SCHEMA) if p.part.topic in plan.typing
               else EXPORT_SCHEMA for p in plan.partitions}
    if len(schemas) > 1:
        raise UsageError("the topics exported decode to different types, and a table has one schema: "
                         "export them into one table each (--topic, --iceberg-table)")
    return schemas.pop() if schemas else EXPORT_SCHEMA


class TableDeadLetters:
    """Dead letters of a table export: Parquet files under DST/_errors/, written before the table's
    commit (a run that fails leaves them without a table commit naming them)."""

    def __init__(self, plan: ExportPlan, storage: Storage, root: str):
        self.plan, self.storage, self.root = plan, storage, root
        self.decode: dict = {}
        self.files: list[str] = []

    def split(self, part, rows: pa.RecordBatch) -> pa.RecordBatch:
        typing = self.plan.typing.get(part.topic)
        if typing is None:
            return rows
        tally = self.decode.setdefault((part.topic, part.partition), DecodeTally())
        typed, dead = typing.apply(rows, tally)
        if dead is not None:
            tally.dead_letters += dead.num_rows
            self._write(part, rows.column("offset")[0].as_py(), dead)
        return typed

    def _write(self, part, first_offset: int, dead: pa.RecordBatch) -> None:
        import pyarrow.parquet as pq

        rel = f"{DEAD_LETTER_DIR}/topic={hive_value(part.topic)}/partition={part.partition}"
        directory = self.storage.join(self.root, *rel.split("/"))
        self.storage.makedirs(directory)
        path = self.storage.join(directory, f"part-o{first_offset:020d}.parquet")
        sink = pa.BufferOutputStream()
        pq.write_table(pa.Table.from_batches([dead]), sink)
        self.storage.write(path, sink.getvalue().to_pybytes())
        self.files.append(self.storage.url_of(path))

    def notes(self) -> list[str]:
        return [f"dead letters written to {f}" for f in self.files]


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
