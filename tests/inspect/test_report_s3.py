"""`kfmt report` of a log directory on a real S3 server (SeaweedFS on 127.0.0.1, tests/support/s3server.py)
is the report of the same directory on local disk: the same facts, findings and page, the S3 URL in
place of the local path; its estimate runs on a sample read from S3."""
from __future__ import annotations

import json
import re

import pytest
from support.cli import run_kfmt
from support.report_inputs import damaged_samples, report_json

from kfmt.storage.store import open_storage

pytestmark = pytest.mark.s3


def _uploaded(s3_server, s3_url: str, logs) -> str:
    """The log directory's files as plain objects under s3_url (as `aws s3 sync` copies them)."""
    storage, root = open_storage(s3_url, s3_server.storage_options)
    for f in sorted(logs.rglob("*")):
        if f.is_file():
            storage.write(storage.join(root, f.relative_to(logs).as_posix()), f.read_bytes())
    return s3_url


def _located(value, url: str, local: str):
    """value with the S3 URL of the log directory spelled as the local path."""
    return json.loads(json.dumps(value).replace(url, local))


def test_a_report_of_s3_is_the_report_of_the_same_files_on_disk(s3_server, s3_url, tmp_path):
    logs = damaged_samples(tmp_path)  # findings too: a CRC error, a segment cut mid-entry
    url = _uploaded(s3_server, s3_url, logs)
    result = run_kfmt("report", url, "--format", "json", "--no-progress", "--sample-bytes", "50000",
                      *s3_server.cli_options())
    assert result.code == 0, result.err
    remote, local = json.loads(result.out), report_json(logs, "--sample-bytes", "50000")
    assert remote["source"]["path"] == url and remote["source"]["kind"] == "log directory"
    assert remote["totals"] == local["totals"] and remote["totals"]["errors"] >= 2
    assert remote["census"] == local["census"]
    assert _located(remote["partitions"], url, str(logs)) == local["partitions"]
    assert _located(remote["verify"], url, str(logs)) == local["verify"]
    assert remote["internal"] == local["internal"]
    estimate = remote["estimate"]
    assert estimate["input_bytes"] == local["estimate"]["input_bytes"] == remote["totals"]["bytes"]
    assert estimate["sample"]["bytes"] == local["estimate"]["sample"]["bytes"] > 0
    assert all("error" not in c and c["estimated_bytes_written"] > 0 for c in estimate["commands"].values())


def test_the_page_of_s3_is_the_page_of_the_same_files_on_disk(s3_server, s3_url, tmp_path):
    logs = damaged_samples(tmp_path)
    url = _uploaded(s3_server, s3_url, logs)
    pages = {}
    for name, where, options in (("remote", url, s3_server.cli_options()), ("local", logs, [])):
        page = tmp_path / f"{name}.html"
        result = run_kfmt("report", where, "--no-estimate", "--no-progress", "-o", page, *options)
        assert result.code == 0, result.err
        # the time it was made differs; the rest is the same page
        pages[name] = re.sub(r"generated [^ <]+ by", "generated ... by", page.read_text())
    assert pages["remote"].replace(url, str(logs)) == pages["local"]
    assert "CRC" in pages["remote"] or "crc" in pages["remote"]
