"""The package installs under one import namespace: a built wheel holds kfmt/ only (the repository's
plugins/ and pipelines/ folders land as kfmt.default_plugins and kfmt.pipelines), and that wheel, not
this checkout, imports and finds its built-in plugins through its entry points."""
import os
import subprocess
import sys
import zipfile

import pytest
from support.corpus import REPO

# one worker builds the wheel once for both tests (pytest-xdist deals tests out one by one otherwise)
pytestmark = pytest.mark.xdist_group("packaging")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
                    "-w", str(out), str(REPO)], check=True, capture_output=True)
    [path] = out.glob("kfmt-*.whl")
    return path


def test_the_wheel_holds_only_the_kfmt_namespace(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/", 1)[0] for n in names}
    assert {t for t in top if not t.endswith(".dist-info")} == {"kfmt"}
    for expected in ("kfmt/default_plugins/formats/v2.py", "kfmt/default_plugins/compression/lz4.py",
                     "kfmt/transforms/upgrade.py", "kfmt/pipelines/runner.py", "kfmt/pipelines/log4j2.properties", "kfmt/cli/cat.py"):
        assert expected in names
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "[kfmt]" in text and "kfmt.default_plugins.formats.v2" in text


def test_the_installed_wheel_imports_and_reads(wheel, tmp_path, realkafka):
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target),
                    str(wheel)], check=True, capture_output=True)
    script = (
        "import kfmt, kfmt.pipelines.datasource, kfmt.default_plugins.formats.legacy as legacy\n"
        f"assert kfmt.__file__.startswith({str(target)!r}), kfmt.__file__\n"
        f"assert legacy.__file__.startswith({str(target)!r}), legacy.__file__\n"
        "from kfmt.cli import main\n"
        f"raise SystemExit(main(['cat', {str(realkafka / 'v0-lz4-0')!r}, '--max-records', '1']))\n")
    env = {**os.environ, "PYTHONPATH": str(target)}
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                            cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("offset=0 ")
