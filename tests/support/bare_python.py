"""An interpreter like a Spark worker's that has PySpark and its own requirements but not kfmt nor
any of kfmt's dependencies, made in a second or so without a download.

A venv (no pip) on the suite's base interpreter, whose site-packages holds one .pth file naming a
folder of symbolic links to the test environment's installs of PySpark's worker requirements only.
The editable kfmt's import hook lives in a .pth file of the test environment's own site-packages,
which this interpreter never processes, so `import kfmt` fails there (from any directory outside
the checkout: a worker's current directory is its executor's work folder).
"""
from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

#: what a PySpark worker with Arrow has (by the start of the names in site-packages)
SPARK_WORKER_PACKAGES = ("pyspark", "py4j", "pyarrow", "numpy", "pandas", "dateutil", "python_dateutil",
                         "pytz", "tzdata", "six")


def python_without_kfmt(root: Path) -> str:
    """The path of such an interpreter under `root`."""
    env = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    python = env / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    ours = Path(sysconfig.get_paths()["purelib"])
    farm = root / "spark-worker-packages"
    farm.mkdir()
    for entry in ours.iterdir():
        if entry.name.lower().startswith(SPARK_WORKER_PACKAGES):
            os.symlink(entry, farm / entry.name)
    (site / "spark-worker-packages.pth").write_text(f"{farm}\n")
    check = subprocess.run([str(python), "-c", "import pyarrow, pandas, pyspark\n"
                                               "try:\n import kfmt\nexcept ImportError: pass\n"
                                               "else: raise SystemExit('kfmt imports')"],
                           capture_output=True, text=True, cwd=root)
    assert check.returncode == 0, check.stderr
    return str(python)
