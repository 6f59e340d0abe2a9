"""Running the `kfmt` command line in the test process."""
from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass


@dataclass
class CliResult:
    code: int
    out: str
    err: str

    @property
    def lines(self) -> list[str]:
        return self.out.splitlines()


def run_kfmt(*args) -> CliResult:
    """Run `kfmt ARGS` in this process, capturing stdout, stderr and the exit code."""
    from kfmt.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in args])
        except SystemExit as exc:  # argparse usage errors and --help
            code = exc.code if isinstance(exc.code, int) else 1
    return CliResult(code, out.getvalue(), err.getvalue())
