"""docs/cluster.md followed step by step: its blocks marked `<!-- tested -->` (shell, run in order as
one script) and `<!-- tested: file NAME -->` (written to NAME in the working directory) run against
the test cluster and S3 server, with the page's placeholders replaced by their addresses, the
workers' interpreter by one without kfmt (support.bare_python), and the credentials in the
environment, as the page says to give them. Then what the steps made is checked against the
in-process runs and the corpus's truth.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pyarrow.dataset as ds
import pytest
from support.bare_python import python_without_kfmt
from support.cluster_checks import expected_query_result, local_kfmt, local_logs, s3_logs, same_export, same_tree  # noqa: F401 (the same sources, as fixtures of this module)

from kfmt.pipelines.ship import CACHE_ENV, FOLDER

pytestmark = [pytest.mark.cluster, pytest.mark.spark, pytest.mark.s3, pytest.mark.needs("java", "weed")]

DOC = Path(__file__).parents[2] / "docs" / "cluster.md"
BLOCK = re.compile(r"<!-- tested(?:: file (?P<file>[\w.-]+))? -->\n```(?P<lang>\w+)\n(?P<body>.*?)\n```", re.S)
#: what the page says -> what the test has (filled in by the test)
PLACEHOLDERS = ("spark://master-host:7077", "http://s3.internal:9000", "s3://kafka-archive/logs",
                "s3://kafka-archive/", "PYSPARK_PYTHON=/usr/bin/python3", "/shared/kafka-window")


def steps_of(text: str) -> tuple[str, dict[str, str]]:
    """(the shell script, {file name: content})."""
    script, files = [], {}
    for m in BLOCK.finditer(text):
        if m["file"]:
            files[m["file"]] = m["body"] + "\n"
        else:
            assert m["lang"] == "bash", m.group(0)[:80]
            script.append(m["body"])
    return "set -euo pipefail\n" + "\n".join(script) + "\n", files


def substitute(text: str, values: dict[str, str]) -> str:
    for placeholder in PLACEHOLDERS:  # in this order: the source before the bucket's other paths
        text = text.replace(placeholder, values[placeholder])
    return text


def test_the_page_has_tested_steps_and_placeholders():
    script, files = steps_of(DOC.read_text())
    text = script + "".join(files.values())
    assert "window.py" in files and script.count("kfmt ") >= 2 and "spark-submit" in script
    for placeholder in PLACEHOLDERS:
        assert placeholder in text, placeholder


def test_the_cluster_page_step_by_step(spark_cluster, s3_server, s3_logs, local_logs, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    prefix = f"s3://{s3_server.bucket}/doc-{uuid.uuid4().hex[:8]}/"
    window = tmp_path / "window"
    values = {"spark://master-host:7077": spark_cluster.master_url,
              "http://s3.internal:9000": s3_server.endpoint_url,
              "s3://kafka-archive/logs": s3_logs, "s3://kafka-archive/": prefix,
              "PYSPARK_PYTHON=/usr/bin/python3": f"PYSPARK_PYTHON={python_without_kfmt(tmp_path / 'bare')}",
              "/shared/kafka-window": str(window)}
    script, files = steps_of(DOC.read_text())
    for name, content in files.items():
        (work / name).write_text(substitute(content, values))
    (work / "steps.sh").write_text(substitute(script, values))
    env = {k: v for k, v in spark_cluster.env().items()
           if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON") and not k.startswith(("AWS_", "KFMT_"))}
    env.update({"AWS_ACCESS_KEY_ID": s3_server.key, "AWS_SECRET_ACCESS_KEY": s3_server.secret,
                "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}",
                CACHE_ENV: str(tmp_path / "ship-cache")})
    apps_before = {p.name for p in Path(spark_cluster.root).glob("worker-*/app-*")}
    result = subprocess.run(["bash", str(work / "steps.sh")], cwd=work, env=env, capture_output=True,
                            text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    assert s3_server.secret not in result.stdout + result.stderr + spark_cluster.logs()
    # the workers' interpreter has no kfmt: each executor of the steps' applications unpacked the
    # shipped archive, compiled kernels included, in its working directory
    apps = {p.name for p in Path(spark_cluster.root).glob("worker-*/app-*")} - apps_before
    from kfmt.format import kernels
    module = "_speedups*.so" if kernels.description.startswith("compiled") else "__init__.py"
    shipped = {p.parents[3].name for p in Path(spark_cluster.root).glob(f"worker-*/app-*/*/{FOLDER}/kfmt/{module}")}
    assert len(apps) == 3 and apps <= shipped, (apps, shipped)  # resegment, export, spark-submit

    expected = tmp_path / "expected"
    local_kfmt("resegment", local_logs, expected / "resegmented", "--no-progress", "--segment-bytes",
               "268435456", "--master", "inprocess")
    local_kfmt("export", local_logs, expected / "parquet", "--no-progress", "--master", "inprocess")
    same_tree(s3_server, prefix + "resegmented", expected / "resegmented")
    same_export(s3_server, prefix + "parquet", expected / "parquet", tmp_path)

    truth = expected_query_result()
    printed = [line.split() for line in result.stdout.splitlines() if re.fullmatch(r"\S+ \d+ \d+ \d+", line)]
    assert {topic: (int(n), int(lo), int(hi)) for topic, n, lo, hi in printed} == \
        {topic: (n, lo, hi) for topic, (n, lo, hi, _) in truth.items()}
    table = ds.dataset(window, format="parquet", partitioning="hive").to_table()
    counts = {t: table.filter(ds.field("topic") == t).num_rows for t in truth}
    assert counts == {topic: n for topic, (n, *_) in truth.items()} and table.num_rows == sum(counts.values())
