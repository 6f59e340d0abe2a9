"""kfmt report: what is on a broker's disk, as facts (JSON) and one self-contained HTML page.

Every number comes from the command that already computes it, called, not redone: `kfmt info` per
partition (kfmt.inspect.info), `kfmt verify` (kfmt.inspect.verify), `kfmt offsets` and the internal
topics' readers (internal), plus the header-only facts of each segment (segments). Info's count and
the segments' facts ride verify's pass over the bytes (partitions.ReportWalk). The estimate
of what the transforms would take is measured and added by kfmt.api (kfmt.api.estimate);
the page is drawn by html (docs/report.md).
"""
from __future__ import annotations

import datetime
import functools
import sys
from collections import defaultdict

from kfmt.inspect.report.internal import internal_topics
from kfmt.inspect.report.partitions import ReportWalk, partition_reports
from kfmt.inspect.verify import verify_walked
from kfmt.partition.layout import PartitionDir, offset_checkpoint_entries
from kfmt.storage.store import Storage

REPORT_VERSION = 1
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"


def collect(storage: Storage, path: str, parts: list[PartitionDir], *, kind: str, log_dir: str | None,
            topic: str | None = None, partition: int | None = None, with_verify: bool = True,
            progress: bool = False, deep: bool = False) -> dict:
    """The report's facts of the partitions at `path` (found by find_partitions with topic and
    partition); `kind` says what PATH is ("log directory", "partition", "archive"), `log_dir` the
    directory whose checkpoint files apply (None: none). Without `with_verify`, "verify" is null
    and so are the counts of findings. `deep`: verify at its record-level depth (`verify --deep`)."""
    cleaner = _cleaner_offsets(storage, log_dir)
    checked = None
    if with_verify:  # one pass over the bytes: verify's, which shows every entry to the report's walk
        bars = []

        def start(total):
            bars.append(_bar(progress, total, "segment", "verify"))
            return lambda: bars[0].update(1)

        walk = functools.partial(ReportWalk, cleaner_offsets=cleaner)
        checked, partitions = verify_walked(storage, path, topic, partition, start, walk=walk, deep=deep)
        for b in bars:
            b.close()
    else:
        with _bar(progress, len(parts), "partition", "info") as bar:
            partitions = partition_reports(parts, cleaner)
            bar.update(len(parts))
    findings = _findings(checked, parts) if checked is not None else None
    for p in partitions:
        mine = [f for f in findings or () if f["partition"] == p["name"]]
        p["errors"] = sum(1 for f in mine if f["severity"] == "error") if checked is not None else None
        p["notes"] = len(mine) - p["errors"] if checked is not None else None
    summary = checked.summary() if checked is not None else None
    return {"kfmt_report": REPORT_VERSION,
            "source": {"path": storage.url_of(path), "kind": kind},
            "generated": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "totals": _totals(partitions, summary),
            "census": census(partitions),
            "partitions": partitions,
            "internal": internal_topics(parts),
            "verify": None if checked is None else {"summary": summary, "findings": findings}}


def _bar(progress: bool, total: int, unit: str, desc: str):
    from tqdm import tqdm

    return tqdm(disable=not progress, file=sys.stderr, total=total, unit=unit, desc=desc)


def _cleaner_offsets(storage: Storage, log_dir: str | None) -> dict:
    """The log directory's cleaner-offset-checkpoint (verify reports its problems)."""
    if log_dir is None:
        return {}
    return offset_checkpoint_entries(storage, log_dir, CLEANER_OFFSET_CHECKPOINT,
                                     "the report shows no segment as cleaned")


def _findings(checked, parts: list[PartitionDir]) -> list[dict]:
    """verify's problems, each with the partition whose file it names ("" for the log directory's own
    files) and an anchor the page links it by."""
    dirs = sorted(((p.storage.url_of(p.path).rstrip("/") + "/", p.label) for p in parts), key=lambda d: -len(d[0]))
    out = []
    for i, problem in enumerate(checked.problems):
        item = problem.to_json()
        item["partition"] = next((label for prefix, label in dirs if problem.file.startswith(prefix)), "")
        item["anchor"] = f"finding-{i}"
        out.append(item)
    return out


def _totals(partitions: list[dict], summary: dict | None) -> dict:
    def total(key):
        return sum(p.get(key) or 0 for p in partitions)

    return {"topics": len({p["topic"] for p in partitions}), "partitions": len(partitions),
            "segments": total("segments"), "bytes": total("bytes"), "batches": total("batches"),
            "records": total("records"), "control_records": total("control_records"),
            "errors": summary and summary["errors"], "notes": summary and summary["notes"]}


def census(partitions: list[dict]) -> list[dict]:
    """info's (magic, compression) census summed per topic: one row per (topic, magic, compression)."""
    rows: dict = defaultdict(lambda: {"batches": 0, "records": 0, "bytes": 0})
    for p in partitions:
        for f in p.get("formats", ()):
            row = rows[(p["topic"] or p["name"], f["magic"], f["compression"])]
            for key in ("batches", "records", "bytes"):
                row[key] += f[key]
    return [{"topic": t, "magic": m, "compression": c, **n} for (t, m, c), n in sorted(rows.items())]
