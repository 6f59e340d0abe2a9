"""The pieces of running on a cluster that need no cluster: where the driver binds, when workers are
checked, what is shipped and how the shipped tree looks to another interpreter, which credentials
travel with tasks, and the test-only task barrier's switch."""
from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import zipfile

import pytest

from kfmt.errors import UsageError
from kfmt.pipelines.session import needs_worker_check, on_loopback
from kfmt.pipelines.ship import build, needed_distributions, ship_mode, to_ship
from kfmt.pipelines.task_hold import hold_directory
from kfmt.storage.store import with_forwarded_credentials


@pytest.mark.parametrize("master, expected", [
    ("local[*]", True), ("local", True), ("spark://127.0.0.1:7077", True), ("spark://localhost:7077", True),
    ("spark://127.0.0.1:7077,localhost:7078", True), ("spark://10.1.2.3:7077", False),
    ("spark://127.0.0.1:7077,master-2:7077", False), ("yarn", False), ("k8s://https://k:443", False)])
def test_the_driver_binds_loopback_only_when_every_executor_is_here(master, expected):
    assert on_loopback(master) is expected


def test_workers_are_checked_on_clusters_and_for_another_local_interpreter():
    assert needs_worker_check("spark://127.0.0.1:7077", {})
    assert needs_worker_check("yarn", {"PYSPARK_PYTHON": sys.executable})
    assert not needs_worker_check("local[2]", {"PYSPARK_PYTHON": sys.executable})
    assert not needs_worker_check("local[2]", {})
    assert needs_worker_check("local[2]", {"PYSPARK_PYTHON": "/usr/bin/python3"})


def test_what_is_shipped():
    driver = {"kfmt": "0.1.0", "pluggy": "1.7.0", "pyarrow": "26.0.1", "fsspec": "2026.9.0"}
    same = dict(driver)
    assert to_ship(driver, same, True, "auto") == []
    assert to_ship(driver, same, True, "always") == ["kfmt"]
    # kfmt missing, pluggy older, pyarrow missing (PySpark's own: never shipped)
    workers = {"kfmt": None, "pluggy": "1.0.0", "pyarrow": None, "fsspec": "2026.9.0"}
    assert to_ship(driver, workers, False, "auto") == ["kfmt", "pluggy"]
    # the same version, but not importable (a dist-info without its package): shipped
    assert to_ship(driver, same, False, "auto") == ["kfmt"]


def test_ship_mode():
    assert ship_mode({}) == "auto" and ship_mode({"KFMT_SHIP": "Never"}) == "never"
    with pytest.raises(UsageError, match="KFMT_SHIP=sometimes: expected one of auto, always, never"):
        ship_mode({"KFMT_SHIP": "sometimes"})


def test_needed_distributions_follow_kfmts_requirements():
    needed = needed_distributions()
    assert needed["kfmt"] == importlib.metadata.version("kfmt")
    for name in ("pluggy", "fsspec", "pyarrow", "crc32c", "s3fs", "botocore"):
        assert name in needed, name
    assert "pyspark" not in needed and "pytest" not in needed


def test_the_shipped_tree_is_found_by_another_interpreter(tmp_path, monkeypatch):
    """An interpreter without site-packages and the tree on PYTHONPATH finds kfmt's plugins through
    the shipped entry points, its compiled kernels (when built) and the shipped pluggy inside the
    tree; the zip holds the same files. A second build is the cached one."""
    monkeypatch.setenv("KFMT_SHIP_CACHE", str(tmp_path / "cache"))
    tree, archive = build(["kfmt", "pluggy"])
    assert build(["kfmt", "pluggy"]) == (tree, archive)
    files = sorted(str(p.relative_to(tree)) for p in tree.rglob("*") if p.is_file())
    with zipfile.ZipFile(archive) as zf:
        assert sorted(zf.namelist()) == files
    assert not [f for f in files if "__pycache__" in f or f.endswith((".c", ".h"))]
    probe = ("import importlib, importlib.metadata as m, importlib.util as u, json\n"
             "eps = sorted(e.name for e in m.entry_points(group='kfmt'))\n"
             "spec = u.find_spec('kfmt._speedups')\n"
             "spec and importlib.import_module('kfmt._speedups')  # loads in this interpreter\n"
             "print(json.dumps([eps, spec and spec.origin, u.find_spec('pluggy').origin]))")
    out = subprocess.run([sys.executable, "-S", "-c", probe], env={"PYTHONPATH": str(tree), "PATH": os.environ["PATH"]},
                         capture_output=True, text=True, cwd=tmp_path, check=True).stdout
    eps, speedups, pluggy = json.loads(out)
    expected = sorted(e.name for e in importlib.metadata.entry_points(group="kfmt")
                      if e.dist and e.dist.name == "kfmt")
    assert eps == expected and "formats-v2" in eps
    assert pluggy.startswith(str(tree))
    from kfmt.format import kernels
    if kernels.description.startswith("compiled"):
        assert speedups and speedups.startswith(str(tree)), speedups


def test_s3_credentials_of_the_driver_travel_with_tasks():
    env = {"AWS_ACCESS_KEY_ID": "AK", "AWS_SECRET_ACCESS_KEY": "SK", "AWS_SESSION_TOKEN": "T"}
    assert with_forwarded_credentials("s3://b/logs", {"endpoint_url": "http://e"}, env) == \
        {"endpoint_url": "http://e", "key": "AK", "secret": "SK", "token": "T"}
    for given in ({"key": "k2", "secret": "s2"}, {"anon": True}, {"profile": "p"}):
        assert with_forwarded_credentials("s3://b/logs", given, env) == given
    assert with_forwarded_credentials("/data/logs", {}, env) == {}
    assert with_forwarded_credentials("s3://b/logs", {}, {"AWS_ACCESS_KEY_ID": "AK"}) == {}


def test_the_task_barrier_is_off_unless_a_test_asks(tmp_path):
    assert hold_directory("export", {}) is None
    env = {"KFMT_TEST_HOLD_TASKS": str(tmp_path)}
    assert hold_directory("export", env) is None  # no directory for that job
    (tmp_path / "export").mkdir()
    assert hold_directory("export", env) == str(tmp_path / "export")
    assert hold_directory("upgrade: segments", env) is None
