"""Lost tasks on the Spark standalone cluster (support.spark_cluster), S3 on both sides.

A task's Python process is killed after it wrote its files in staging and before it returned its
result (the test-only barrier kfmt.pipelines.task_hold holds it there): Spark runs the task again,
and what is published must equal the in-process run, with nothing duplicated or left over. Then all
workers die in the middle of a job: the driver fails in one line naming the master and what it lost,
publishes nothing, and the same command succeeds once workers are back.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pyarrow.parquet as pq
import pytest
from support.cluster_checks import SOURCES, downloaded, local_kfmt, same_tree
from support.corpus import REALKAFKA

from kfmt.pipelines.task_hold import HOLD_ENV, RELEASE
from kfmt.storage.manifest import MANIFEST, PENDING_DIR
from kfmt.storage.store import open_storage
from kfmt.transforms.export import REPORT_NAME as EXPORT_REPORT_NAME

pytestmark = [pytest.mark.cluster, pytest.mark.spark, pytest.mark.s3, pytest.mark.needs("java", "weed")]

NOW_MS = 1_795_000_000_000
HELD_JOBS = {"export": "export", "upgrade": "upgrade: segments"}  # command -> its write job's name
WAIT_S = 240


@pytest.fixture(scope="module")
def source(s3_server, tmp_path_factory):
    """The corpus partitions SOURCES on S3 and as a local copy."""
    url = s3_server.url("failures-src")
    storage, root = open_storage(url, s3_server.storage_options)
    local = tmp_path_factory.mktemp("failures-src")
    for name in SOURCES:
        (local / name).mkdir()
        for f in sorted((REALKAFKA / name).iterdir()):
            storage.write(storage.join(root, name, f.name), f.read_bytes())
            (local / name / f.name).write_bytes(f.read_bytes())
    return url, local


def attempts(directory: Path) -> list[tuple[int, int]]:
    """(task index, pid) of every attempt that reached the barrier."""
    return sorted((int(p.name.split("-")[1]), int(p.name.split("-")[2]))
                  for p in directory.glob("attempt-*") if not p.name.endswith(".tmp"))


def wait_for_attempt(directory: Path, driver: subprocess.Popen, processes: int = 1) -> tuple[int, int]:
    """The first attempt at the barrier, once attempts from `processes` different processes are there
    (2: both executors of the cluster are running a task, so the driver has them both)."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        found = attempts(directory)
        if len({pid for _, pid in found}) >= processes:
            return found[0]
        assert driver.poll() is None, "the driver ended before its tasks reached the barrier"
        time.sleep(0.05)
    raise AssertionError(f"no {processes} task process(es) reached the barrier {directory} within {WAIT_S} s")


def under_a_worker(pid: int, cluster) -> bool:
    """Whether `pid` descends from one of the cluster's worker JVMs (it is an executor's Python
    worker, not the driver)."""
    workers = {p.pid for p in cluster.workers.values()}
    return any(parent.pid in workers for parent in psutil.Process(pid).parents())


def kfmt_args(command, src, dst, s3_server, master, *options):
    return [command, src, dst, "--no-progress", *map(str, options), *map(str, s3_server.cli_options()),
            "--master", master]


DRIVER = """
import json, sys
from kfmt.cli import main
for args in json.loads(sys.argv[1]):
    code = main(args)
    print(f"=== {args[0]} exit {code}", flush=True)
    if code:
        sys.exit(code)
"""


def test_a_killed_task_is_retried_and_the_result_is_identical(spark_cluster, s3_server, source, tmp_path):
    """export (Parquet) and upgrade: in each, one task's Python worker is killed at the barrier; both
    commands succeed, the killed task ran again, and the destinations equal the in-process run's
    (no part or segment file twice, nothing outside the manifest, no pending claim)."""
    src, local_src = source
    out = s3_server.url("failures-killed")
    hold = tmp_path / "hold"
    for job in HELD_JOBS.values():
        (hold / job).mkdir(parents=True)
    commands = [kfmt_args("export", src, f"{out}/export", s3_server, spark_cluster.master_url),
                kfmt_args("upgrade", src, f"{out}/upgrade", s3_server, spark_cluster.master_url,
                          "--now", NOW_MS)]
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, json.dumps(commands)],
                              env={**spark_cluster.env(), HOLD_ENV: str(hold)},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    killed = {}
    try:
        for job in HELD_JOBS.values():
            index, pid = wait_for_attempt(hold / job, driver)
            assert under_a_worker(pid, spark_cluster), f"task {index} of {job} did not run on an executor"
            os.kill(pid, signal.SIGKILL)
            killed[job] = (index, pid)
            (hold / job / RELEASE).touch()
        stdout, stderr = driver.communicate(timeout=WAIT_S)
    finally:
        for job in HELD_JOBS.values():
            (hold / job / RELEASE).touch()
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    assert driver.returncode == 0, stdout[-2000:] + stderr[-3000:]
    for job, (index, pid) in killed.items():
        again = [p for i, p in attempts(hold / job) if i == index and p != pid]
        assert again, f"task {index} of {job} was not run again after its worker was killed"

    expected = tmp_path / "expected"
    local_kfmt("export", local_src, expected / "export", "--no-progress", "--master", "inprocess")
    local_kfmt("upgrade", local_src, expected / "upgrade", "--no-progress", "--now", NOW_MS,
               "--master", "inprocess")
    same_tree(s3_server, f"{out}/upgrade", expected / "upgrade")
    written = downloaded(s3_server, f"{out}/export")
    assert not [name for name in written if name.startswith(PENDING_DIR)]
    listed = json.loads(written.pop(MANIFEST))["files"]
    assert set(listed) == set(written)  # every object is published, none unaccounted for
    local = {str(p.relative_to(expected / "export")): p for p in (expected / "export").rglob("*") if p.is_file()}
    assert sorted(written) == sorted(local)
    assert json.loads(written[EXPORT_REPORT_NAME])["totals"] == \
        json.loads(local[EXPORT_REPORT_NAME].read_bytes())["totals"]
    for name in [n for n in local if n.endswith(".parquet")]:
        (tmp_path / "s3.parquet").write_bytes(written[name])
        assert pq.read_table(tmp_path / "s3.parquet").equals(pq.read_table(local[name])), name


def test_all_workers_lost_fails_in_one_line_and_reruns(spark_cluster, s3_server, source, tmp_path):
    """Both workers are killed (JVMs, executors and Python workers) while resegment's tasks are
    held: the driver gives up after KFMT_SPARK_EXECUTOR_WAIT with one line naming the master and
    what it lost, the destination is left empty (not even a claim), and once the workers are back
    the same command publishes what the in-process run does."""
    src, local_src = source
    dst = s3_server.url("failures-lost") + "/resegment"
    hold = tmp_path / "hold"
    (hold / "resegment: segments").mkdir(parents=True)
    args = kfmt_args("resegment", src, dst, s3_server, spark_cluster.master_url, "--segment-bytes", 3000,
                     "--kafka-version", "3.9")
    env = {**spark_cluster.env(), HOLD_ENV: str(hold), "KFMT_SPARK_EXECUTOR_WAIT": "5"}
    driver = subprocess.Popen([sys.executable, "-m", "kfmt", *map(str, args)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # both executors holding a task, and a second for the driver's watcher (it counts executors
        # every 0.5 s) to have seen them both: otherwise the line may say it lost "its executor"
        wait_for_attempt(hold / "resegment: segments", driver, processes=2)
        time.sleep(1.0)
        killer = threading.Thread(target=spark_cluster.kill_workers)
        killer.start()
        killer.join()
        stdout, stderr = driver.communicate(timeout=WAIT_S)
    finally:
        (hold / "resegment: segments" / RELEASE).touch()
        if driver.poll() is None:
            driver.kill()
            driver.wait()
        if not spark_cluster.workers:
            spark_cluster.start_workers()  # the other cluster tests need them
    lines = stderr.strip().splitlines()
    assert driver.returncode == 1 and len(lines) == 1, stderr
    assert lines[0].startswith("kfmt: error: the Spark job cannot finish: it lost all 2 of its executors "
                               f"on master {spark_cluster.master_url}"), lines[0]
    assert "Traceback" not in stderr + stdout
    assert downloaded(s3_server, dst) == {}

    rerun = subprocess.run([sys.executable, "-m", "kfmt", *map(str, args)], env=spark_cluster.env(),
                           capture_output=True, text=True, timeout=WAIT_S)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    expected = tmp_path / "expected"
    local_kfmt("resegment", local_src, expected, "--no-progress", "--segment-bytes", 3000,
               "--kafka-version", "3.9", "--master", "inprocess")
    same_tree(s3_server, dst, expected)
