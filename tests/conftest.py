"""Fixtures and hooks only; the helpers tests import live in tests/support/."""
from __future__ import annotations

import atexit
import os
import sys
import uuid
import warnings
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


#: what makes a test start a JVM of Spark's: these fixtures (support.spark_session, the session's
#: standalone cluster) or these markers
JVM_FIXTURES = frozenset({"spark", "spark_cluster"})
JVM_MARKERS = ("spark", "cluster")


def pytest_xdist_auto_num_workers(config):
    """`-n auto` (pyproject's addopts): one worker per core this process may run on, or
    KFMT_TEST_WORKERS (docs/testing.md)."""
    wanted = os.environ.get("KFMT_TEST_WORKERS", "")
    return int(wanted) if wanted.isdigit() else len(os.sched_getaffinity(0))


def starts_a_jvm(item) -> bool:
    return bool(JVM_FIXTURES & set(getattr(item, "fixturenames", ()))) or any(
        item.get_closest_marker(name) is not None for name in JVM_MARKERS)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the xdist_group markers
def pytest_collection_modifyitems(items):
    """Tests that start Spark go to one worker, in the order collected (--dist loadgroup): a Spark
    job already uses every core, two JVMs at once only contend for them, and that worker starts
    the session's JVM, local sessions and standalone cluster once.

    @pytest.mark.needs("java", ...): skipped, with the tool's reason, when a tool is missing (probed
    once per tool, and only when a collected test needs it)."""
    for item in items:
        if starts_a_jvm(item):
            item.add_marker(pytest.mark.xdist_group("jvm"))
        for mark in item.iter_markers("needs"):
            for tool in mark.args:
                reason = missing(tool)
                if reason is not None:
                    item.add_marker(pytest.mark.skip(reason=reason))


# after pytest-xdist has put each group's name into its tests' ids
@pytest.hookimpl(trylast=True, specname="pytest_collection_modifyitems")
def warn_when_groups_are_lost(config, items):
    """A warning when --dist loadgroup did not take (a pytest that pytest-xdist does not know:
    pyproject.toml pins it): then JVM tests run on several workers at once, slower but correct."""
    if "PYTEST_XDIST_WORKER" not in os.environ or not config.getvalue("loadgroup"):
        return
    lost = [item.nodeid for item in items if item.get_closest_marker("xdist_group") and "@" not in item.nodeid]
    if lost:
        warnings.warn(pytest.PytestWarning(f"pytest-xdist ignored the xdist_group of {len(lost)} tests "
                                           f"(the first: {lost[0]}): they may run on several workers at once"))


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
