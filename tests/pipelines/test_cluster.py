"""kfmt's pipelines on a real Spark standalone cluster (support.spark_cluster: a master and two
one-core workers in their own JVMs), reading from and writing to S3 on the suite's SeaweedFS server.

The driver is a `kfmt` process of its own, as a user would start it: executors share no memory and
no disk with it, so everything a task needs (storage options, the plan) travels to them in the
task. Each result must equal the in-process run of the same command on local files: segment files
byte for byte, the report's digests and file checksums, the records `kfmt cat` prints. The S3
secret must not show in any output, report or log.
"""
from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from support.cli import run_kfmt
from support.corpus import REALKAFKA
from support.corpus_truth import consumer_records, first_offset_at_or_after

from kfmt.storage.store import open_storage
from kfmt.transforms.export import REPORT_NAME as EXPORT_REPORT_NAME
from kfmt.transforms.report import REPORT_NAME

pytestmark = [pytest.mark.cluster, pytest.mark.spark, pytest.mark.s3, pytest.mark.needs("java", "weed")]

NOW_MS = 1_795_000_000_000
SOURCES = ("v1-gzip-0", "v0-none-0", "v2-none-0")


def kfmt_process(cluster, *args) -> subprocess.CompletedProcess:
    """`kfmt ARGS` as its own process with the cluster's environment (the driver of a Spark job)."""
    return subprocess.run([sys.executable, "-m", "kfmt", *map(str, args)], env=cluster.env(),
                          capture_output=True, text=True, timeout=300)


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


def assert_no_secret(s3_server, cluster, *texts) -> None:
    for text in texts:
        assert s3_server.secret not in text
    assert s3_server.secret not in cluster.logs()


# --- the cluster itself ----------------------------------------------------------------------------

def _group_pids(pgids: set[int]) -> set[int]:
    pids = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.getpgid(int(entry)) in pgids:
                    pids.add(int(entry))
            except ProcessLookupError:
                continue
    return pids


def test_the_cluster_listens_on_loopback_only(spark_cluster):
    """Every listening socket of the master, the workers and their children is on 127.0.0.1 (the
    web UIs included), and both workers registered with one core each."""
    state = spark_cluster.state()
    assert [w["cores"] for w in state["workers"] if w["state"] == "ALIVE"] == [1, 1]
    pids = _group_pids({p.pid for p in spark_cluster.processes})
    listing = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    ours = [line for line in listing.splitlines()
            if any(f"pid={pid}," in line for pid in pids)]
    assert len(ours) >= 3 * 2 - 1  # master: RPC + UI; each worker: RPC + UI
    for line in ours:
        local = line.split()[3]
        assert local.startswith(("127.0.0.1:", "[::ffff:127.0.0.1]:")), line


# --- pipelines ----------------------------------------------------------------------------------------

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

TRANSFORMS = {  # command -> its options (the source is the log directory, the destination a new folder)
    "upgrade": ["--now", NOW_MS],
    "resegment": ["--segment-bytes", "3000"],
    "recompress": ["--compression", "zstd"],
    "compact": ["--now", NOW_MS, "--keep-format"],
    "retain": ["--retention-ms", "1000", "--include-active", "--now", "1700000300000"],
    "archive": ["--include-active"],  # a stopped broker's copy: every segment
    "export": [],
}
WINDOW_START = 1_700_000_100_000  # startingTimestamp of the data source query


def window_query(s3_server, path: str) -> dict:
    """The DRIVER's data source query: the records from WINDOW_START on, storage options as options."""
    return {"path": path, "options": {"startingTimestamp": str(WINDOW_START),
                                      "startingOffsetsByTimestampStrategy": "latest",
                                      **{f"storage.{k}": v for k, v in s3_server.storage_options.items()}}}


@pytest.fixture(scope="module")
def cluster_run(spark_cluster, s3_server, s3_logs, tmp_path_factory):
    """The driver's run: (its output, the S3 prefix of the destinations)."""
    out = s3_server.url("cluster-out")
    storage = [str(o) for o in s3_server.cli_options()]
    master = ["--master", spark_cluster.master_url]
    commands = [[command, s3_logs, f"{out}/{command}", "--no-progress", *map(str, options), *storage, *master]
                for command, options in TRANSFORMS.items()]
    commands.append(["restore", f"{out}/archive", f"{out}/restore", "--no-progress", *storage, *master])
    query = window_query(s3_server, s3_logs)
    result = subprocess.run([sys.executable, "-c", DRIVER, json.dumps([commands, query])],
                            env={**spark_cluster.env(), "KFMT_SPARK_MASTER": spark_cluster.master_url},
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return result, out


@pytest.fixture(scope="module")
def local_run(local_logs, tmp_path_factory) -> Path:
    """The same commands in process on local files."""
    root = tmp_path_factory.mktemp("local-run")
    for command, options in TRANSFORMS.items():
        local_kfmt(command, local_logs, root / command, "--no-progress", *options, "--master", "inprocess")
    local_kfmt("restore", root / "archive", root / "restore", "--no-progress", "--master", "inprocess")
    return root


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


@pytest.mark.parametrize("command", ["upgrade", "resegment", "recompress", "compact", "retain", "restore"])
def test_transform_on_the_cluster_equals_the_inprocess_run(command, cluster_run, local_run, s3_server):
    """Segment files and companions byte for byte, reports' digests and checksums; an archive names
    its source and time, so what it holds is compared through its restore."""
    _, out = cluster_run
    same_tree(s3_server, f"{out}/{command}", local_run / command)


def test_records_after_the_cluster_run(cluster_run, local_logs, s3_server):
    """`kfmt cat` of the upgraded and the restored partitions shows the source's records."""
    _, out = cluster_run
    storage = s3_server.cli_options()
    for name in SOURCES:
        source = json.loads("[" + ",".join(local_kfmt("cat", local_logs / name, "--format", "json")
                                           .splitlines()) + "]")
        assert local_kfmt("cat", f"{out}/restore/{name}", "--format", "json", *storage) == \
            local_kfmt("cat", local_logs / name, "--format", "json")
        upgraded = json.loads("[" + ",".join(local_kfmt("cat", f"{out}/upgrade/{name}", "--format", "json",
                                                        *storage).splitlines()) + "]")
        assert [(r["offset"], r["key"], r["value"], r["headers"]) for r in upgraded] == \
            [(r["offset"], r["key"], r["value"], r["headers"]) for r in source]


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


def test_export_on_the_cluster_equals_the_inprocess_run(cluster_run, local_run, s3_server, tmp_path):
    _, out = cluster_run
    same_export(s3_server, f"{out}/export", local_run / "export", tmp_path)


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


def test_data_source_sql_on_the_cluster(cluster_run):
    """The query's aggregates equal those of the consumer's records in the window."""
    result, _ = cluster_run
    got = query_result(result.stdout)
    assert got == expected_query_result() and "v2-none" in got


def test_no_secret_in_output_reports_or_logs(cluster_run, spark_cluster, s3_server):
    result, out = cluster_run
    texts = [v.decode("utf-8", "replace") for v in downloaded(s3_server, out).values() if b"\0" not in v[:512]]
    assert texts
    assert_no_secret(s3_server, spark_cluster, result.stdout, result.stderr, *texts)


def test_the_work_ran_on_both_workers(cluster_run, spark_cluster):
    """Executors of the driver's application ran under both workers (their work directories hold
    the executors' logs), i.e. the jobs did not run inside the driver."""
    for n in range(spark_cluster.worker_count):
        work = Path(spark_cluster.root) / f"worker-{n}"
        assert list(work.glob("app-*/*/stderr")), f"no executor ran under worker {n}"
