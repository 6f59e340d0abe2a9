"""The Spark session kfmt's jobs run on: embedded local[*] by default, a cluster with --master.

Settings these machines require (reference/environment-notes.md): the workers must run this
interpreter (it has pyarrow and kfmt), Spark binds 127.0.0.1 only, and the UI (which listens on all
interfaces) is off.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")

_session = None


def spark_session(master: str | None = None, app_name: str = "kfmt"):
    """The shared SparkSession (created on first use)."""
    global _session
    if _session is not None:
        return _session
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.appName(app_name)
               .master(master or _site_spark_master())
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.sql.execution.arrow.pyspark.enabled", "true")
               .config("spark.python.worker.reuse", "true")
               .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={LOG4J_CONFIG}")
               .config("spark.executor.extraJavaOptions", f"-Dlog4j2.configurationFile={LOG4J_CONFIG}"))
    _session = builder.getOrCreate()
    return _session


def _site_spark_master() -> str:
    """KFMT_SPARK_MASTER when it names a Spark master, else local[*] (it may also say auto, pool or
    inprocess, which choose kfmt's engine, not Spark's: kfmt.pipelines.engine)."""
    from kfmt.pipelines.engine import choose_engine

    engine = choose_engine(None, 0)
    return engine.master if engine.engine == "spark" else "local[*]"


def stop_session() -> None:
    global _session
    if _session is not None:
        _session.stop()
        _session = None
