"""One switch between kfmt's compiled kernels and their pure-Python references.

`kfmt._speedups` (C sources in kfmt/csrc/, built by setup.py when a compiler is present, skipped
with a warning when not) moves per-record work out of the interpreter: v2 record decode/encode,
the content digest, frame scans, index building and runs of uncompressed legacy messages. Each
kernel has a pure-Python reference beside the kfmt/format function that chooses between them, and
both give identical results, error messages included (tests/format/test_speedups.py compares them; `KFMT_PURE_PYTHON=1 pytest` runs the whole
suite on the references).

`native` is the extension module, or None when it is not built or KFMT_PURE_PYTHON is set to
anything but 0. Only kfmt/format imports it (tests/test_architecture.py; docs/architecture.md,
"Kernels and their references", lists where each choice is made, and the value formats' two
exceptions): a caller elsewhere calls a kfmt/format function and never sees which runs. Kernels return
NotImplemented for inputs they leave to the reference (types other than RECORD_SCHEMA's, values
beyond int64), so the references stay the single definition of every edge case.

`python -m kfmt.format.kernels` says which one runs and why.
"""
from __future__ import annotations

import os

ENV_SWITCH = "KFMT_PURE_PYTHON"
PURE_PYTHON = os.environ.get(ENV_SWITCH, "").strip() not in ("", "0")


def _load():
    if PURE_PYTHON:
        return None, f"pure Python ({ENV_SWITCH} is set)"
    try:
        from kfmt import _speedups
    except ImportError as exc:
        return None, f"pure Python (kfmt._speedups is not built: {exc})"
    # pyarrow (about 20 ms of a command's start) is imported when a kernel first returns record
    # columns, not here: the legacy upgrade and the byte-for-byte copies never do
    _speedups.configure(_first_record_batch, None)
    details = ", ".join(f"{k} {v}" for k, v in _speedups.implementation().items())
    return _speedups, f"compiled kernels (kfmt._speedups: {details})"


def _first_record_batch(address: int, _schema):
    """The kernels' first record batch: imports pyarrow, hands the kernels pyarrow's own importer
    and RECORD_SCHEMA for every later batch, and imports this one."""
    import pyarrow as pa

    from kfmt.format.model import RECORD_SCHEMA

    native.configure(pa.RecordBatch._import_from_c, RECORD_SCHEMA)
    return pa.RecordBatch._import_from_c(address, RECORD_SCHEMA)


native, description = _load()

if __name__ == "__main__":
    print(description)
