"""`kfmt export --mode upsert`: a changelog topic as the table it describes (kfmt.rows.changelog: one row
per key, its last value, tombstones removing keys), keys and values decoded as asked (kfmt.rows.typed).

The partitions are read in this process, range after range, reduced to the last row per key as they
go (memory: the live keys and one chunk); only the rows that survive are decoded. Parquet output is
written whole into a new destination (files cannot be updated in place: `--append` is refused, a later
run writes the table again into a new DST). An Iceberg table is updated: `--append` reads each
partition from its high-water mark on (as a records export does), and one commit deletes the rows of
every key the new records touch (found by the stored key bytes, the identity log compaction uses) and
adds the keys' new live rows (kfmt.transforms.export_table), so the table always equals the topic's
state at the run without reading the history again.
"""
from __future__ import annotations

import time

import pyarrow as pa

from kfmt.errors import UsageError
from kfmt.rows.changelog import Latest
from kfmt.rows.columns import EXPORT_SCHEMA
from kfmt.rows.exporters import exporters
from kfmt.rows.part_files import PartFiles
from kfmt.rows.ranges import RangeTally, read_range
from kfmt.rows.typed import DEAD_LETTER_SCHEMA, DecodeTally
from kfmt.storage.staging import StagedOutput
from kfmt.transforms.export_job import (
    DEAD_LETTER_DIR,
    REPORT_NAME,
    SUCCESS_NAME,
    ExportPlan,
    _input_summary,
    _transaction_outcomes,
    decode_report,
)
from kfmt.transforms.report import make_report, report_bytes

MODES = ("records", "upsert")


def latest_rows(plan: ExportPlan, progress: bool) -> tuple[dict, list[RangeTally], dict]:
    """(topic -> pa.Table of its live rows, decoded; the tally of each partition read; (topic,
    partition) -> DecodeTally), and the dead-letter rows per topic under "dead" in the third."""
    outcomes = _transaction_outcomes(plan, "inprocess", progress)
    latest: dict[str, Latest] = {}
    tallies = []
    for p, outcome in zip(plan.partitions, outcomes):
        tally = RangeTally()
        state = latest.setdefault(p.part.topic, Latest(EXPORT_SCHEMA))
        for rng in p.ranges:
            part_tally = RangeTally()
            for rows in read_range(rng, plan.options.selection, outcome, part_tally):
                state.add(rows)
            tally.merge(part_tally)
        tallies.append(tally)
    tables, decode = {}, {"dead": {}, "keyless": {}, "changed": {}}
    for topic, state in latest.items():
        live = state.table()
        decode["keyless"][topic] = state.keyless
        decode["changed"][topic] = state.keys()
        typing = plan.typing.get(topic)
        if typing is None or not live.num_rows:
            tables[topic] = live if typing is None else pa.Table.from_batches([], typing.schema(EXPORT_SCHEMA))
            continue
        tally = DecodeTally()
        typed, dead = typing.apply(live.combine_chunks().to_batches()[0], tally)
        tally.dead_letters = 0 if dead is None else dead.num_rows
        decode[(topic, "all")] = tally  # the live rows of all its partitions, decoded together
        tables[topic] = pa.Table.from_batches([typed])
        if dead is not None:
            decode["dead"][topic] = dead
    return tables, tallies, decode


def upsert_files(plan: ExportPlan, dst_storage, dst_path: str, progress: bool, started: float) -> dict:
    """Write the live rows of each topic as Parquet (or another file format) into DST, whole."""
    options = plan.options
    if options.by_date:
        raise UsageError("--mode upsert writes one row per key: partition it by topic,partition")
    fmt = exporters()[options.format]
    with StagedOutput(dst_storage, dst_path) as out:
        tables, tallies, decode = latest_rows(plan, progress)
        files = out.target().files()
        written, records = 0, []
        for topic, table in tables.items():
            schema = pa.schema([f for f in table.schema if f.name not in options.partition_by])
            parts = PartFiles(fmt, files, schema, 0, 0, options.target_file_bytes, settings=options.settings)
            for p in sorted({p.part.partition for p in plan.partitions if p.part.topic == topic}):
                rows = table.filter(pa.compute.equal(table.column("partition"), p))
                rel = next(q.rel for q in plan.partitions if q.part.topic == topic and q.part.partition == p)
                for batch in rows.select(schema.names).to_batches():
                    parts.write(rel, batch)
                written += rows.num_rows
            records += parts.close()
            dead = decode["dead"].get(topic)
            if dead is not None:
                letters = PartFiles(fmt, files, DEAD_LETTER_SCHEMA, 0, 0, options.target_file_bytes,
                                    settings=options.settings)
                letters.write(f"{DEAD_LETTER_DIR}/topic={topic}", dead)
                records += letters.close()
        out.adopt(records)
        report = _report(plan, tallies, decode, written, out.files)
        report["duration_ms"] = round((time.monotonic() - started) * 1000)
        out.write(REPORT_NAME, report_bytes(report))
        out.write(SUCCESS_NAME, b"")
    return report


def upsert_notes(decode: dict, written: int) -> list[str]:
    """The report's notes on a changelog's run: the live keys written, the keyless records left out."""
    changed = sum(len(k) for k in decode["changed"].values())
    return [f"--mode upsert: one row per key, its last value; tombstones remove keys ({written} live "
            f"keys written, of {changed} keys in the records read)"] + [
        f"{t}: {n} records without a key left out (a changelog's records have keys)"
        for t, n in decode["keyless"].items() if n]


def upsert_key_column(plan: ExportPlan, topic: str) -> str | None:
    """The table column holding a topic's stored key bytes (None: none does, the key is decoded)."""
    typing = plan.typing.get(topic)
    if typing is None or "key" not in typing.decoders:
        return "key"
    return "key_bytes" if typing.keep_raw else None


def upsert_key_columns(plan: ExportPlan, description: str) -> None:
    """Refuse an upsert into an existing table that cannot find a key's rows by its stored bytes."""
    for topic in sorted({p.part.topic for p in plan.partitions}):
        if upsert_key_column(plan, topic) is None:
            raise UsageError(f"{description}: --mode upsert --append finds a key's rows by its stored "
                             f"bytes, and the table holds {topic}'s keys decoded only: export it with "
                             f"--keep-raw (key_bytes), or with the keys raw")


def _report(plan: ExportPlan, tallies: list, decode: dict, written: int, files) -> dict:
    inputs = [_input_summary(p, t) for p, t in zip(plan.partitions, tallies)]
    tallied = {k: v for k, v in decode.items() if isinstance(k, tuple)}
    decoding, notes = decode_report(plan, tallied)
    report = make_report("export", plan.source, plan.destination,
                         {**plan.options.to_json(), "mode": "upsert"}, inputs, [], files,
                         upsert_notes(decode, written) + notes)
    report["totals"]["output_records"] = written
    if decoding:
        report["decoding"] = decoding
    return report
