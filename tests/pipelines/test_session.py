"""The options kfmt's Spark session starts its JVM with, read back from the running JVM itself."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from kfmt.pipelines.session import SCHEDULER_JVM_OPTIONS, driver_java_options

# the arguments the running JVM was started with, as the JVM itself reports them
JVM_ARGUMENTS = ("list(spark_session().sparkContext._jvm.java.lang.management.ManagementFactory"
                 ".getRuntimeMXBean().getInputArguments())")


def _jvm_arguments(start: str) -> list[str]:
    """The JVM arguments of a session started by `start` in a fresh process."""
    code = textwrap.dedent(f"""
        import json
        from kfmt.pipelines.runner import run_tasks
        from kfmt.pipelines.session import spark_session
        {start}
        print(json.dumps({JVM_ARGUMENTS}))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.spark
def test_the_jvm_that_runs_kfmts_tasks_compiles_with_the_quick_compiler_only():
    arguments = _jvm_arguments("assert run_tasks(abs, [-1, -2], master='local[1]', progress=False) == [1, 2]")
    assert set(SCHEDULER_JVM_OPTIONS) <= set(arguments)
    assert any(a.startswith("-Dlog4j2.configurationFile=") for a in arguments)


def test_a_session_for_queries_keeps_the_jvms_default_compilers():
    """The kafka-log data source's rows are made in the JVM, where the optimizing compiler pays."""
    assert not set(SCHEDULER_JVM_OPTIONS) & set(driver_java_options(scheduler_only=False))
    assert set(SCHEDULER_JVM_OPTIONS) <= set(driver_java_options(scheduler_only=True))
