"""kfmt shipped to executors that do not have it (kfmt.pipelines.ship), on the Spark standalone
cluster with S3 on both sides.

The workers' Python (PYSPARK_PYTHON) is an interpreter with PySpark, pyarrow, numpy and pandas but
neither kfmt nor any of its own dependencies (support.bare_python). The driver, a process with kfmt
installed started outside the checkout, ships what the workers lack; upgrade and the `kafka-log` data
source must then give what the in-process run gives, with the compiled kernels on
the executors, and again with the executors on the pure-Python fallback (KFMT_PURE_PYTHON=1 in
their environment through spark.executorEnv, as docs/cluster.md says to set it).
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from support.bare_python import python_without_kfmt
from support.cluster_checks import (  # noqa: F401 (the same sources, as fixtures of this module)
    DRIVER,
    NOW_MS,
    expected_query_result,
    local_kfmt,
    local_logs,
    query_result,
    s3_logs,
    same_tree,
    window_query,
)

from kfmt.pipelines.ship import CACHE_ENV, FOLDER

pytestmark = [pytest.mark.cluster, pytest.mark.spark, pytest.mark.s3, pytest.mark.needs("java", "weed")]

# After the driver's commands and query: where the executors' Python workers imported kfmt from and
# which kernels they run (four tasks, so both workers answer).
EXECUTORS = DRIVER + """
def where(_):
    import os
    import kfmt
    from kfmt.format import kernels
    return os.path.relpath(kfmt.__file__), kernels.description
print("=== executors " + json.dumps(sorted(set(
    spark.sparkContext.parallelize(range(4), 4).map(where).collect()))), flush=True)
"""


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory) -> str:
    return python_without_kfmt(tmp_path_factory.mktemp("bare-python"))


@pytest.fixture(scope="module")
def inprocess(local_logs, tmp_path_factory):
    root = tmp_path_factory.mktemp("ship-expected")
    local_kfmt("upgrade", local_logs, root / "upgrade", "--no-progress", "--now", NOW_MS, "--master", "inprocess")
    return root


@pytest.fixture(scope="module")
def ship_cache(tmp_path_factory):
    """One archive cache for the module: the second driver reuses the first one's archive."""
    return tmp_path_factory.mktemp("ship-cache")


def run_driver(spark_cluster, s3_server, s3_logs, python, out, cwd, cache, extra_env):
    storage = [str(o) for o in s3_server.cli_options()]
    master = ["--master", spark_cluster.master_url]
    commands = [["upgrade", s3_logs, f"{out}/upgrade", "--no-progress", "--now", str(NOW_MS), *storage, *master]]
    env = {**spark_cluster.env(), "PYSPARK_PYTHON": python, "KFMT_SPARK_MASTER": spark_cluster.master_url,
           CACHE_ENV: str(cache), **extra_env}
    result = subprocess.run([sys.executable, "-c", EXECUTORS, json.dumps([commands, window_query(s3_server, s3_logs)])],
                            env=env, capture_output=True, text=True, timeout=600, cwd=cwd)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    (line,) = [l for l in result.stdout.splitlines() if l.startswith("=== executors ")]
    return result, json.loads(line[len("=== executors "):])


def test_shipped_kfmt_on_pure_python_executors(spark_cluster, s3_server, s3_logs, bare_python, inprocess,
                                               ship_cache, tmp_path):
    """upgrade and the query with the executors on the pure-Python fallback. The same workers with
    the compiled kernels shipped run resegment, export and a query in test_cluster_doc (which
    follows docs/cluster.md), to keep the cluster tests short."""
    out = s3_server.url("ship-pure")
    extra = {"PYSPARK_SUBMIT_ARGS": "--conf spark.executorEnv.KFMT_PURE_PYTHON=1 pyspark-shell"}
    result, executors = run_driver(spark_cluster, s3_server, s3_logs, bare_python, out, tmp_path, ship_cache,
                                   extra)
    # every executor imported kfmt from the archive unpacked in its working directory
    assert {path for path, _ in executors} == {f"{FOLDER}/kfmt/__init__.py"}, executors
    assert {d for _, d in executors} == {"pure Python (KFMT_PURE_PYTHON is set)"}, executors
    same_tree(s3_server, f"{out}/upgrade", inprocess / "upgrade")
    assert query_result(result.stdout) == expected_query_result()
    assert s3_server.secret not in result.stdout + result.stderr
