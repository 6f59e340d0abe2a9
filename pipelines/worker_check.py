"""Whether Spark's Python workers can import kfmt, asked before a query needs them to.

Spark starts its Python workers with the interpreter PYSPARK_PYTHON names (on a cluster, the one on
each executor's machine), not the driver's. Where that interpreter lacks kfmt, every task of a
`kafka-log` query fails with a ModuleNotFoundError deep in a worker's traceback. One tiny job at
registration asks a worker to import kfmt, and a failure becomes one line that says which
interpreter and what to do.
"""
from __future__ import annotations

import sys

from kfmt.errors import KfmtError


def _import_probe():
    """A function cloudpickle sends by value (it is local), so that unpickling it on a worker does
    not itself need kfmt; it reports the worker's interpreter and what importing kfmt raised."""
    def probe(_):
        import importlib
        import sys as worker_sys

        try:  # the modules the data source's tasks unpickle and run (by name: no import cycle)
            for module in ("kfmt.pipelines.datasource", "kfmt.rows.ranges"):
                importlib.import_module(module)
        except ImportError as err:
            return worker_sys.executable, f"{type(err).__name__}: {err}"
        return worker_sys.executable, None
    return probe


def check_workers_import_kfmt(spark) -> None:
    """Raise KfmtError (one line, with the fix) when a Python worker of `spark` cannot import kfmt."""
    try:
        ((python, problem),) = spark.sparkContext.parallelize([0], 1).map(_import_probe()).collect()
    except Exception as err:  # the worker did not even start: report Spark's last Python error line
        python, problem = "the workers' Python", _last_error_line(err)
    if problem is not None:
        raise KfmtError(
            f"kafka-log: Spark's Python workers ({python}) cannot import kfmt ({problem}); start the "
            f"session with PYSPARK_PYTHON set to an interpreter that has kfmt installed (this driver "
            f"runs {sys.executable}), or ship kfmt to the executors (spark.archives with a packed "
            f"environment)")


def _last_error_line(err: Exception) -> str:
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    for line in reversed(lines):
        if line.split(":", 1)[0].endswith(("Error", "Exception")) and not line.startswith(("org.", "java.", "py4j")):
            return line
    return lines[0] if lines else type(err).__name__
