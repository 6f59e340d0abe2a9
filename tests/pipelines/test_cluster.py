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
import subprocess
import sys
from pathlib import Path

import pytest
from support.cluster_checks import (  # noqa: F401  (fixtures of this module)
    DRIVER,
    NOW_MS,
    SOURCES,
    downloaded,
    expected_query_result,
    local_kfmt,
    local_logs,
    query_result,
    s3_logs,
    same_export,
    same_tree,
    window_query,
)

pytestmark = [pytest.mark.cluster, pytest.mark.spark, pytest.mark.s3, pytest.mark.needs("java", "weed")]


def kfmt_process(cluster, *args) -> subprocess.CompletedProcess:
    """`kfmt ARGS` as its own process with the cluster's environment (the driver of a Spark job)."""
    return subprocess.run([sys.executable, "-m", "kfmt", *map(str, args)], env=cluster.env(),
                          capture_output=True, text=True, timeout=300)


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


TRANSFORMS = {  # command -> its options (the source is the log directory, the destination a new folder)
    "upgrade": ["--now", NOW_MS],
    "resegment": ["--segment-bytes", "3000", "--kafka-version", "3.9"],
    "recompress": ["--compression", "zstd"],
    "compact": ["--now", NOW_MS, "--keep-format"],
    "retain": ["--retention-ms", "1000", "--include-active", "--now", "1700000300000"],
    "archive": ["--include-active"],  # a stopped broker's copy: every segment
    "export": [],
}


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


def test_export_on_the_cluster_equals_the_inprocess_run(cluster_run, local_run, s3_server, tmp_path):
    _, out = cluster_run
    same_export(s3_server, f"{out}/export", local_run / "export", tmp_path)


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
