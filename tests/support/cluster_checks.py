"""Sources (local and S3 log directories), kfmt runs and comparisons shared by the Spark-cluster tests."""
from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from support.cli import run_kfmt
from support.corpus import REALKAFKA
from support.corpus_truth import consumer_records, first_offset_at_or_after

from kfmt.storage.store import open_storage
from kfmt.transforms.export import REPORT_NAME as EXPORT_REPORT_NAME
from kfmt.transforms.report import REPORT_NAME

NOW_MS = 1_795_000_000_000


SOURCES = ("v1-gzip-0", "v0-none-0", "v2-none-0")


def local_kfmt(*args) -> str:
    result = run_kfmt(*args)
    assert result.code == 0, result.err
    return result.out


@pytest.fixture(scope="module")
def s3_logs(s3_server):
    """The corpus partitions SOURCES uploaded to S3 once for the module (a plain copy, as `aws s3
    sync` makes it); (URL of the log directory, local copy of the same tree)."""
    url = s3_server.url("cluster-src")
    storage, root = open_storage(url, s3_server.storage_options)
    for name in SOURCES:
        for f in sorted((REALKAFKA / name).iterdir()):
            storage.write(storage.join(root, name, f.name), f.read_bytes())
    return url


@pytest.fixture(scope="module")
def local_logs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("cluster-src")
    for name in SOURCES:
        shutil.copytree(REALKAFKA / name, root / name)
    return root


def downloaded(s3_server, url: str) -> dict[str, bytes]:
    """Every object under `url` by its path relative to it."""
    storage, root = open_storage(url, s3_server.storage_options)
    prefix = root.rstrip("/") + "/"
    return {info.path[len(prefix):]: bytes(storage.read(info.path)) for info in storage.walk(root)}


def comparable(report: dict) -> dict:
    """What must agree between two runs of one job: digests, counts, file sizes and checksums
    (not the paths, the engine, nor the files' write times)."""
    def summaries(side):
        return [{k: v for k, v in p.items() if k != "path"} for p in report[side]]

    return {"totals": report["totals"], "inputs": summaries("inputs"), "outputs": summaries("outputs"),
            "files": {name: {k: v for k, v in f.items() if k != "mtime_ms"}
                      for name, f in report["files"].items()}}


# Every command is run by one driver process (one Spark application, as a notebook or a scheduled
# script would run them): the JVMs start once, which keeps the cluster tests within minutes. Then
# the driver queries the `kafka-log` data source on S3 with Spark SQL.
DRIVER = """
import json, sys
from kfmt.cli import main
commands, query = json.loads(sys.argv[1])
for args in commands:
    code = main(args)
    print(f"=== {args[0]} exit {code}", flush=True)
    if code:
        sys.exit(code)
from kfmt.pipelines.datasource import register
from kfmt.pipelines.session import spark_session
spark = spark_session()
register(spark)
reader = spark.read.format("kafka-log")
for key, value in query["options"].items():
    reader = reader.option(key, value)
reader.load(query["path"]).createOrReplaceTempView("logs")
rows = spark.sql("SELECT topic, count(*) AS n, min(offset) AS lo, max(offset) AS hi, "
                 "sum(length(value)) AS bytes FROM logs GROUP BY topic ORDER BY topic").collect()
print("=== query " + json.dumps([r.asDict() for r in rows]), flush=True)
"""


WINDOW_START = 1_700_000_100_000  # startingTimestamp of the data source query


def window_query(s3_server, path: str) -> dict:
    """The DRIVER's data source query: the records from WINDOW_START on, storage options as options."""
    return {"path": path, "options": {"startingTimestamp": str(WINDOW_START),
                                      "startingOffsetsByTimestampStrategy": "latest",
                                      **{f"storage.{k}": v for k, v in s3_server.storage_options.items()}}}


def same_tree(s3_server, url: str, local: Path) -> None:
    """The files under `url` equal those under `local`, byte for byte, except the report (compared
    by its digests and checksums) and object storage's publication manifest."""
    written = downloaded(s3_server, url)
    expected = {str(p.relative_to(local)): p.read_bytes() for p in local.rglob("*") if p.is_file()}
    for files in (written, expected):  # an archive's generation manifests name the run, as the pointer does
        for name in [n for n in files if n == "_kfmt_manifest.json" or n.startswith("_kfmt_generations/")]:
            files.pop(name)
    for name in [n for n in written if n.endswith(REPORT_NAME)]:
        assert comparable(json.loads(written.pop(name))) == comparable(json.loads(expected.pop(name))), name
    assert sorted(written) == sorted(expected)
    for name in expected:
        assert written[name] == expected[name], name


def same_export(s3_server, url: str, local_dir: Path, tmp_path: Path) -> None:
    """The same Parquet files with the same rows (their metadata names the writer's time), the same
    report totals."""
    written = downloaded(s3_server, url)
    local = {str(p.relative_to(local_dir)): p.read_bytes() for p in local_dir.rglob("*") if p.is_file()}
    data = sorted(name for name in local if name.endswith(".parquet"))
    assert data and sorted(n for n in written if n.endswith(".parquet")) == data
    report = json.loads(written[EXPORT_REPORT_NAME])
    assert report["totals"] == json.loads(local[EXPORT_REPORT_NAME])["totals"]
    for name in data:
        (tmp_path / "s3.parquet").write_bytes(written[name])
        assert pq.read_table(tmp_path / "s3.parquet").equals(pq.read_table(local_dir / name))


def query_result(stdout: str) -> dict:
    """The DRIVER's query line: topic -> (count, first offset, last offset, value bytes)."""
    (line,) = [l for l in stdout.splitlines() if l.startswith("=== query ")]
    return {r["topic"]: (r["n"], r["lo"], r["hi"], r["bytes"]) for r in json.loads(line[len("=== query "):])}


def expected_query_result() -> dict:
    """The consumer's records from the first offset at or after WINDOW_START (truth files; v0
    messages have no timestamp, so that topic reads nothing with strategy latest)."""
    expected = {}
    for name in SOURCES:
        start = first_offset_at_or_after(name, WINDOW_START)
        if start is None:
            continue
        records = [r for r in consumer_records(name) if r["offset"] >= start]
        expected[name.rsplit("-", 1)[0]] = (len(records), records[0]["offset"], records[-1]["offset"],
                                            sum(len(base64.b64decode(r["value"] or "")) for r in records))
    return expected
