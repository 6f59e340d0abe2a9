"""Copy a corpus partition to a scratch place (inputs are never modified in place)."""
from __future__ import annotations

import shutil
from pathlib import Path

from support.corpus import REALKAFKA


def copy_partition(name: str, tmp_path: Path) -> Path:
    dst = tmp_path / name
    shutil.copytree(REALKAFKA / name, dst, copy_function=shutil.copyfile)  # writable copies
    return dst
