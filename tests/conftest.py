"""Shared test fixtures: the real-broker corpus, and running the CLI in-process."""
from __future__ import annotations

import contextlib
import io
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
REALKAFKA = Path(os.environ.get("KFMT_REALKAFKA", REPO.parent / "shared" / "realkafka"))
sys._called_from_test = True


CORPUS_MISSING = "the realkafka corpus (../shared/realkafka, or KFMT_REALKAFKA) is not on this machine"


def require_corpus() -> None:
    """Skip the calling test when the corpus is missing (the helpers that read it call this)."""
    if not REALKAFKA.is_dir():
        pytest.skip(CORPUS_MISSING)


def real_partition_dirs() -> list[str]:
    """Names of the partition directories in the corpus (empty if the corpus is missing)."""
    if not REALKAFKA.is_dir():
        return []
    return sorted(p.name for p in REALKAFKA.iterdir()
                  if p.is_dir() and not p.name.startswith("_") and not p.name.endswith(".truth"))


REAL_DIRS = real_partition_dirs()
needs_realkafka = pytest.mark.skipif(not REAL_DIRS, reason=CORPUS_MISSING)


def real_dir_params(names=None):
    """pytest.param per corpus directory, skipped cleanly when the corpus is missing."""
    names = REAL_DIRS if names is None else names
    if not names or not REALKAFKA.is_dir():
        return [pytest.param(None, marks=needs_realkafka, id="no-corpus")]
    return names


@pytest.fixture
def realkafka() -> Path:
    require_corpus()
    return REALKAFKA


@dataclass
class CliResult:
    code: int
    out: str
    err: str

    @property
    def lines(self) -> list[str]:
        return self.out.splitlines()


def run_kfmt(*args: str) -> CliResult:
    """Run `kfmt ARGS` in this process, capturing stdout, stderr and the exit code."""
    from kfmt.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in args])
        except SystemExit as exc:  # argparse usage errors and --help
            code = exc.code if isinstance(exc.code, int) else 1
    return CliResult(code, out.getvalue(), err.getvalue())


def pytest_report_header(config):
    """Which code the run tests: the compiled kernels or the pure-Python fallback (KFMT_PURE_PYTHON=1)."""
    from kfmt.format import kernels as speedups
    return f"kfmt runs {speedups.description}"
