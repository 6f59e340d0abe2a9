"""Fixtures and hooks only; the helpers tests import live in tests/support/."""
from __future__ import annotations

import atexit
import sys
import uuid
from pathlib import Path

import pytest

# The helpers in tests/support/ check with `assert` as tests do: have pytest rewrite their asserts
# too (before any of them is imported), so that a failing check there shows its values.
pytest.register_assert_rewrite("support")

from support.corpus import REALKAFKA, corpus_problem  # noqa: E402
from support.s3server import SeaweedServer  # noqa: E402
from support.spark_cluster import SparkCluster  # noqa: E402
from support.tools import missing, require, weed  # noqa: E402


def pytest_configure(config):
    """The corpus comes with the repository: a run without it is a broken setup, not a skip."""
    problem = corpus_problem()
    if problem is not None:
        raise pytest.UsageError(problem)


def pytest_collection_modifyitems(items):
    """@pytest.mark.needs("java", ...): skipped, with the tool's reason, when a tool is missing (probed
    once per tool, and only when a collected test needs it)."""
    for item in items:
        for mark in item.iter_markers("needs"):
            for tool in mark.args:
                reason = missing(tool)
                if reason is not None:
                    item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture
def realkafka() -> Path:
    return REALKAFKA


@pytest.fixture(scope="session")
def s3_server():
    """A real S3 server (SeaweedFS) on 127.0.0.1 for the session: its endpoint and credentials (S3Endpoint)."""
    require("weed")
    server = SeaweedServer(weed())
    atexit.register(server.stop)  # a last resort; the finaliser below normally stops it
    try:
        yield server.start()
    finally:
        server.stop()


@pytest.fixture(scope="session")
def spark_cluster():
    """A Spark standalone master and two one-core workers on 127.0.0.1 for the session
    (support.spark_cluster.SparkCluster); tests that use it are marked `cluster`."""
    require("java")
    cluster = SparkCluster(python=sys.executable)
    atexit.register(cluster.stop)  # a last resort; the finaliser below normally stops it
    try:
        yield cluster.start()
    finally:
        cluster.stop()


@pytest.fixture
def s3_url(s3_server, request):
    """A fresh prefix of the test bucket. Not emptied afterwards: prefixes are unique, and the whole
    bucket goes with the server's temporary directory at the end of the session."""
    name = request.node.name[:40].replace("[", "-").replace("]", "")
    return s3_server.url(f"{name}-{uuid.uuid4().hex[:8]}")


def pytest_report_header(config):
    """Which code the run tests: the compiled kernels or the pure-Python fallback (KFMT_PURE_PYTHON=1),
    and which corpus."""
    from kfmt.format import kernels as speedups
    return [f"kfmt runs {speedups.description}", f"real-broker corpus: {REALKAFKA}"]
