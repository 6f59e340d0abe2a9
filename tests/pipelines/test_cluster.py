"""kfmt's pipelines on a real Spark standalone cluster (support.spark_cluster: a master and two
one-core workers in their own JVMs), reading from and writing to S3 on the suite's SeaweedFS server.

The driver is a `kfmt` process of its own, as a user would start it: executors share no memory and
no disk with it, so everything a task needs (storage options, the plan) travels to them in the
task. Each result must equal the in-process run of the same command on local files: segment files
byte for byte, the report's digests and file checksums, the records `kfmt cat` prints. The S3
secret must not show in any output, report or log.
"""
from __future__ import annotations

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

from kfmt.storage.store import open_storage
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

@pytest.mark.parametrize("command", ["upgrade"])
def test_transform_on_the_cluster_equals_the_inprocess_run(command, spark_cluster, s3_server, s3_logs,
                                                          local_logs, s3_url, tmp_path):
    out = f"{s3_url}/out"
    result = kfmt_process(spark_cluster, command, s3_logs, out, "--no-progress", "--now", NOW_MS,
                          *s3_server.cli_options(), "--master", spark_cluster.master_url)
    assert result.returncode == 0, result.stderr[-3000:]
    local_kfmt(command, local_logs, tmp_path / "local", "--no-progress", "--now", NOW_MS,
               "--master", "inprocess")

    written = downloaded(s3_server, out)
    report = json.loads(written.pop(REPORT_NAME))
    assert written.pop("_kfmt_manifest.json")  # object storage publishes through a manifest
    local_report = json.loads((tmp_path / "local" / REPORT_NAME).read_text())
    assert comparable(report) == comparable(local_report)
    assert report["totals"]["content_unchanged"]
    expected = {str(p.relative_to(tmp_path / "local")): p.read_bytes()
                for p in (tmp_path / "local").rglob("*") if p.is_file() and p.name != REPORT_NAME}
    assert written == expected  # byte for byte, names included
    for name in SOURCES:
        assert local_kfmt("cat", f"{out}/{name}", "--format", "json", *s3_server.cli_options()) == \
            local_kfmt("cat", tmp_path / "local" / name, "--format", "json")
    assert_no_secret(s3_server, spark_cluster, result.stdout, result.stderr, json.dumps(report))


def test_export_on_the_cluster_equals_the_inprocess_run(spark_cluster, s3_server, s3_logs, local_logs,
                                                       s3_url, tmp_path):
    out = f"{s3_url}/export"
    result = kfmt_process(spark_cluster, "export", s3_logs, out, "--no-progress",
                          *s3_server.cli_options(), "--master", spark_cluster.master_url)
    assert result.returncode == 0, result.stderr[-3000:]
    local_kfmt("export", local_logs, tmp_path / "local", "--no-progress", "--master", "inprocess")

    written = downloaded(s3_server, out)
    local = {str(p.relative_to(tmp_path / "local")): p.read_bytes()
             for p in (tmp_path / "local").rglob("*") if p.is_file()}
    data = sorted(name for name in local if name.endswith(".parquet"))
    assert data and sorted(n for n in written if n.endswith(".parquet")) == data
    report = json.loads(written[REPORT_NAME])
    assert report["totals"] == json.loads(local[REPORT_NAME])["totals"]
    for name in data:  # the same rows in the same files (Parquet metadata names the writer's time)
        (tmp_path / "s3.parquet").write_bytes(written[name])
        assert pq.read_table(tmp_path / "s3.parquet").equals(pq.read_table(tmp_path / "local" / name))
    assert_no_secret(s3_server, spark_cluster, result.stdout, result.stderr,
                     *(v.decode("utf-8", "replace") for k, v in written.items() if k.endswith(".json")))


# Several commands run by one driver process (one Spark application, as a notebook or a scheduled
# script would run them): the JVMs start once, which keeps the cluster tests within minutes.
DRIVER = """
import json, sys
from kfmt.cli import main
for args in json.loads(sys.argv[1]):
    code = main(args)
    print(f"=== {args[0]} exit {code}", flush=True)
    if code:
        sys.exit(code)
"""

MORE = {  # command -> its options (the source is the log directory, the destination a new folder)
    "resegment": ["--segment-bytes", "3000"],
    "recompress": ["--compression", "zstd"],
    "compact": ["--now", NOW_MS, "--keep-format"],
    "retain": ["--retention-ms", "1000", "--include-active", "--now", "1700000300000"],
    "archive": [],
}


def same_tree(s3_server, url: str, local: Path) -> None:
    """The files under `url` equal those under `local`, byte for byte, except the report (compared
    by its digests and checksums) and object storage's publication manifest."""
    written = downloaded(s3_server, url)
    written.pop("_kfmt_manifest.json", None)
    expected = {str(p.relative_to(local)): p.read_bytes() for p in local.rglob("*") if p.is_file()}
    expected.pop("_kfmt_manifest.json", None)
    for name in [n for n in written if n.endswith(REPORT_NAME)]:
        assert comparable(json.loads(written.pop(name))) == comparable(json.loads(expected.pop(name))), name
    assert sorted(written) == sorted(expected)
    for name in expected:
        assert written[name] == expected[name], name


def test_every_transform_on_the_cluster_equals_the_inprocess_run(spark_cluster, s3_server, s3_logs,
                                                                local_logs, s3_url, tmp_path):
    storage = [str(o) for o in s3_server.cli_options()]
    remote = [[command, s3_logs, f"{s3_url}/{command}", "--no-progress", *map(str, options), *storage,
               "--master", spark_cluster.master_url] for command, options in MORE.items()]
    remote.append(["restore", f"{s3_url}/archive", f"{s3_url}/restore", "--no-progress", *storage,
                   "--master", spark_cluster.master_url])
    result = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(remote)], env=spark_cluster.env(),
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]

    for command, options in MORE.items():
        local_kfmt(command, local_logs, tmp_path / command, "--no-progress", *options, "--master", "inprocess")
    local_kfmt("restore", tmp_path / "archive", tmp_path / "restore", "--no-progress", "--master", "inprocess")
    for command in [*MORE, "restore"]:
        if command != "archive":  # an archive names its source and time; its restore is compared
            same_tree(s3_server, f"{s3_url}/{command}", tmp_path / command)
    assert local_kfmt("cat", f"{s3_url}/restore", "--format", "json", *storage) == \
        local_kfmt("cat", local_logs, "--format", "json")
    assert_no_secret(s3_server, spark_cluster, result.stdout, result.stderr,
                     *(v.decode("utf-8", "replace") for v in downloaded(s3_server, s3_url).values()
                       if b"\0" not in v[:512]))
