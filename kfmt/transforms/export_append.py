"""`kfmt export SRC DST --append`: add to an export what SRC holds beyond its high-water marks.

1. Earlier runs are settled first (kfmt.storage.append_staging.recover): one that committed but was
   killed while moving its files into place is rolled forward, the leftovers of killed runs that had
   not committed are removed, and a run that is still alive makes this one stop.
2. `_kfmt-export-state.json` (kfmt.transforms.export_state) gives each partition's high-water mark
   and the options the export was written with (an append run must use the same). Each partition
   of SRC is read from max(high-water mark, log start offset): a partition new in SRC from its log
   start; a partition whose log start offset passed its high-water mark lost [mark, log start) to
   retention before those offsets were exported, which the report and a warning (one line per
   partition) say.
3. Nothing new anywhere (no record, no moved mark): nothing is written at all, not even a report.
   Otherwise the export job (kfmt.transforms.export_job.run_export_job) writes the new part files under
   `DST/_temporary/<run>/` with names that carry the offset each partition resumed from, checks them
   as a whole export's, and one commit publishes them, then `_kfmt-report.json` (this run's),
   `_SUCCESS` and the new state last.
"""
from __future__ import annotations

import time
import warnings

from kfmt.errors import KfmtWarning, UsageError
from kfmt.partition.live import RETRIES, SegmentGone
from kfmt.rows.ranges import partition_identity
from kfmt.rows.resume import ranges_from
from kfmt.storage.append_staging import AppendStaging, recover
from kfmt.storage.store import Storage
from kfmt.transforms.export_job import (
    REPORT_NAME,
    SUCCESS_NAME,
    ExportOptions,
    ExportPlan,
    _notes,
    plan_export,
    run_export_job,
)
from kfmt.transforms.export_state import STATE_NAME, ExportState, load_state
from kfmt.transforms.losses import Lost
from kfmt.transforms.report import make_report, report_bytes


def append_export(src_storage: Storage, src_path: str, dst_storage: Storage, dst_path: str,
                  options: ExportOptions, topic, partition, master, progress, started: float,
                  dry_run: bool = False) -> tuple[ExportPlan, dict | None]:
    destination = dst_storage.url_of(dst_path)
    if not dry_run:
        recover(dst_storage, dst_path)
    state = load_state(dst_storage, dst_path)
    if state is None:
        raise UsageError(f"{destination}: not an export kfmt can add to (no {STATE_NAME}; export it "
                         f"anew into an empty destination)")
    state.check_options(options.to_json(), destination)
    plan = _plan(src_storage, src_path, dst_storage, dst_path, options, topic, partition, state)
    for p in plan.partitions:
        if p.lost is not None:
            warnings.warn(KfmtWarning(lost_warning(p)))
    if dry_run:
        return plan, None
    with AppendStaging(dst_storage, dst_path) as out:
        job = run_export_job(plan, out.target(), dst_storage, dst_path, master, progress)
        new_offsets = {**state.next_offsets, **{tp: n for tp, n in job.next_offsets.items()
                                                if n is not None}}
        losses = found_lost(plan)
        lost = moved_past(losses, new_offsets, state.lost)
        if not any(job.files) and new_offsets == state.next_offsets:
            out.abort()
            return plan, _nothing_new(plan, job, started)
        for files in job.files:
            out.adopt(files)
        files = {rel: r.to_json() for rel, r in sorted(out.staged.records.items())}
        report = make_report("export", plan.source, plan.destination,
                             {**options.to_json(), "append": True, "topic": topic,
                              "partition": partition, "master": master},
                             job.inputs, job.outputs, files, _notes(plan, job.inputs) + job.tails)
        report["engine"] = job.engine.to_json()
        report["append"] = _resumed(plan, job, state)
        report["lost"] = [loss.to_json() for loss in losses]
        report["notes"] += [f"{p.part.label}: offsets [{p.lost[0]}, {p.lost[1]}) lost: deleted before "
                            f"they were exported" for p in plan.partitions if p.lost is not None]
        report["duration_ms"] = round((time.monotonic() - started) * 1000)
        out.write(REPORT_NAME, report_bytes(report))
        out.write(SUCCESS_NAME, b"")
        out.write(STATE_NAME, ExportState(state.options, new_offsets, state.runs + 1, lost).to_bytes())
        out.commit(last=(REPORT_NAME, SUCCESS_NAME, STATE_NAME))
    return plan, report


def _plan(src_storage, src_path, dst_storage, dst_path, options, topic, partition, state) -> ExportPlan:
    """The appending run's plan; planned again from a new listing when a segment of a running
    broker went while it was planned (kfmt.partition.live)."""
    for attempt in range(RETRIES + 1):
        try:
            return plan_export(src_storage, src_path, dst_storage, dst_path, options, topic, partition,
                               make_resume(state.next_offsets))
        except SegmentGone:
            if attempt == RETRIES:
                raise


def make_resume(marks: dict):
    """plan_export's `resume`: a partition's ranges from max(its mark, its log start offset) (from its
    log start when it has no mark yet), and the offsets lost in between. The log start offset is the
    one of the listing the ranges come from: on a running broker's directory, retention may have
    moved it since any earlier listing (kfmt.partition.live)."""

    def resume(part, ranges):
        tp = partition_identity(part)
        log_start = part.log_start_offset if part.segments else None
        mark = marks.get(tp)
        if mark is None:  # new in SRC: from its log start
            start = log_start
        else:
            start = mark if log_start is None else max(mark, log_start)
        lost = (mark, log_start) if mark is not None and log_start is not None and log_start > mark \
            else None
        return ranges_from(part, ranges, start), start, lost

    return resume


def found_lost(plan: ExportPlan) -> list[Lost]:
    """The ranges this run found deleted before any run exported them (kfmt.transforms.losses)."""
    return [Lost(*partition_identity(p.part), *p.lost) for p in plan.partitions if p.lost is not None]


def moved_past(losses: list[Lost], marks: dict, stored: dict) -> dict:
    """A lost range is reported once: each partition's mark (in `marks`, changed here) moves past
    the ranges this run found, and they join those stored before ((topic, partition) ->
    [[from, to), ...]), which are returned for the export state or the table to keep."""
    lost = {tp: list(ranges) for tp, ranges in stored.items()}
    for loss in losses:
        tp = (loss.topic, loss.partition)
        marks[tp] = max(marks.get(tp, loss.end), loss.end)
        lost.setdefault(tp, []).append([loss.start, loss.end])
    return lost


def lost_warning(p) -> str:
    return (f"{p.part.storage.url_of(p.part.path)}: offsets {p.lost[0]} to {p.lost[1] - 1} were deleted "
            f"from the log (retention or DeleteRecords) before they were exported; the export goes on "
            f"from {p.lost[1]}")


def _resumed(plan: ExportPlan, job, state: ExportState) -> list[dict]:
    """Per partition: where this run began and ended, and what was lost before it."""
    out = []
    for p in plan.partitions:
        tp = partition_identity(p.part)
        out.append({"topic": tp[0], "partition": tp[1], "previous_next_offset": state.next_offsets.get(tp),
                    "from_offset": p.from_offset, "next_offset": job.next_offsets.get(tp),
                    "lost": None if p.lost is None else {"from": p.lost[0], "to": p.lost[1],
                                                         "offsets": p.lost[1] - p.lost[0]}})
    return out


def _nothing_new(plan: ExportPlan, job, started: float) -> dict:
    """What an append run with nothing to add says (it writes nothing)."""
    return {"command": "export", "destination": plan.destination, "written": False,
            "totals": {"partitions": len(plan.partitions), "output_records": 0},
            "outputs": [{"files": 0} for _ in plan.partitions],
            "duration_ms": round((time.monotonic() - started) * 1000)}
