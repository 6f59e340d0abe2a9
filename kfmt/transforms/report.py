"""The machine-readable report every transform writes (`kfmt-report.json` in DST, docs/cli.md):
inputs and outputs as partition summaries (kfmt.partition.summary) with their content digests
(kfmt.format.digest), the files written, and notes."""
from __future__ import annotations

import json

from kfmt import __version__
from kfmt.partition.summary import PartitionCounts
from kfmt.storage.retries import retry_log

REPORT_NAME = "kfmt-report.json"
REPORT_VERSION = 1


def make_report(command: str, source: str, destination: str, options: dict,
                inputs: list[PartitionCounts], outputs: list[PartitionCounts],
                files: dict[str, dict], notes: list[str] | None = None) -> dict:
    """The report of one transform run. `files`: every file written (relative path -> size, sha256,
    mtime_ms), the report itself excepted. `retries`: every storage request retried in this process
    since the previous report (kfmt.storage.retries; in the command line, this run's)."""
    return {
        "kfmt_report_version": REPORT_VERSION,
        "kfmt_version": __version__,
        "command": command,
        "source": source,
        "destination": destination,
        "options": options,
        "totals": {
            "partitions": len(inputs),
            "input_records": sum(p.records for p in inputs),
            "input_batches": sum(p.batches for p in inputs),
            "output_records": sum(p.records for p in outputs),
            "output_batches": sum(p.batches for p in outputs),
            # the digest of the check made: the records' content digest, or a copy's entries digest
            "content_unchanged": [p.digest for p in inputs] == [p.digest for p in outputs],
        },
        "inputs": [p.to_json() for p in inputs],
        "outputs": [p.to_json() for p in outputs],
        "files": dict(sorted(files.items())),
        "notes": list(notes or []),
        "retries": retry_log.take(),
    }


def report_bytes(report: dict) -> bytes:
    return (json.dumps(report, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
