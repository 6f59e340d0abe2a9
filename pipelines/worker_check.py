"""Whether Spark's Python workers can run kfmt, asked before a query or a job needs them to, and
kfmt shipped to them when they cannot (kfmt.pipelines.ship).

Spark starts its Python workers with the interpreter PYSPARK_PYTHON names (on a cluster, the one on
each executor's machine), not the driver's. Where that interpreter lacks kfmt, every task of a
`kafka-log` query fails with a ModuleNotFoundError deep in a worker's traceback. One tiny job asks a
worker which of kfmt's distributions it has and whether kfmt imports; what is missing is shipped
(KFMT_SHIP, default auto), the worker is asked again, and a failure becomes one line that says which
interpreter and what to do.
"""
from __future__ import annotations

import sys

from kfmt.errors import KfmtError


def _import_probe(names: list[str]):
    """A function cloudpickle sends by value (it is local), so that unpickling it on a worker does
    not itself need kfmt; it reports the worker's interpreter, what importing kfmt raised, and the
    versions it has of the distributions `names`."""
    def probe(_):
        import importlib
        import importlib.metadata
        import sys as worker_sys

        versions = {}
        for name in names:
            try:
                versions[name] = importlib.metadata.version(name)
            except Exception:
                versions[name] = None
        try:  # the modules the data source's tasks unpickle and run (by name: no import cycle)
            for module in ("kfmt.pipelines.datasource", "kfmt.rows.ranges"):
                importlib.import_module(module)
        except ImportError as err:
            return worker_sys.executable, f"{type(err).__name__}: {err}", versions
        return worker_sys.executable, None, versions
    return probe


def _ask_a_worker(spark, names: list[str]):
    """(the worker's interpreter, what importing kfmt raised or None, {distribution: version or
    None} or None when the worker could not run the probe). A cluster that gives the job no
    executor raises EngineError (one line) after KFMT_SPARK_EXECUTOR_WAIT, as any kfmt job does."""
    from kfmt.errors import EngineError
    from kfmt.pipelines.watch import collect_watched

    sc = spark.sparkContext
    try:
        ((python, problem, versions),) = collect_watched(
            sc, sc.parallelize([0], 1).map(_import_probe(names)), 1, "kfmt: check the workers")
    except EngineError:
        raise
    except Exception as err:  # the worker did not even start: report Spark's last Python error line
        return "the workers' Python", _last_error_line(err), None
    return python, problem, versions


def check_workers_import_kfmt(spark) -> None:
    """Make sure Spark's Python workers run kfmt: ship it to them where they lack it (KFMT_SHIP), and
    raise KfmtError (one line, with the fix) when they still cannot import it."""
    from kfmt.pipelines.ship import needed_distributions, ship, ship_mode, to_ship

    mode = ship_mode()
    driver = needed_distributions()
    python, problem, versions = _ask_a_worker(spark, sorted(driver))
    shipped = []
    if versions is not None and mode != "never":
        shipped = to_ship(driver, versions, problem is None, mode)
        if shipped:
            ship(spark, shipped)
            python, problem, versions = _ask_a_worker(spark, sorted(driver))
    if problem is not None:
        raise KfmtError(_cannot_import(python, problem, shipped, mode if versions is not None else None))


def _cannot_import(python: str, problem: str, shipped: list[str], mode: str | None) -> str:
    """The one line; `mode` None: the workers' interpreter could not even run the probe."""
    from kfmt.pipelines.ship import SHIP_ENV

    head = f"Spark's Python workers ({python}) cannot import kfmt ({problem}"
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    if shipped:
        others = len(shipped) - ("kfmt" in shipped)
        return (f"{head}, with kfmt and {others} dependencies shipped to them); give PYSPARK_PYTHON an "
                f"interpreter with PySpark's own requirements (pyarrow, numpy, pandas) and Python "
                f"{version}, as this driver's; see docs/cluster.md")
    ship = (f"or let kfmt ship itself to the workers ({SHIP_ENV}=auto, not {mode})" if mode else
            f"or with PySpark's own requirements for kfmt to ship itself ({SHIP_ENV}=auto)")
    return (f"{head}); set PYSPARK_PYTHON to an interpreter on the workers that has kfmt installed, "
            f"{ship}; see docs/cluster.md")


def _last_error_line(err: Exception) -> str:
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    for line in reversed(lines):
        if line.split(":", 1)[0].endswith(("Error", "Exception")) and not line.startswith(("org.", "java.", "py4j")):
            return line
    return lines[0] if lines else type(err).__name__
