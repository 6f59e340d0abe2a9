"""A broker log directory built from corpus partitions and the log-dir files the broker left."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

from support.corpus import REALKAFKA


def make_log_dir(root: Path, names) -> Path:
    """A broker's log directory holding corpus partitions and the log-dir files the broker left,
    every file writable and every .log with a distinct modification time (restore must bring them
    back: time retention of timestamp-less segments depends on them)."""
    root.mkdir(parents=True)
    for name in names:
        shutil.copytree(REALKAFKA / name, root / name)
    for f in (REALKAFKA / "_logdir-root").iterdir():
        shutil.copy2(f, root / f.name)
    for i, path in enumerate(sorted(root.rglob("*"))):
        path.chmod(0o755 if path.is_dir() else 0o644)
        if path.suffix == ".log":
            ns = (1_650_000_000_000 + 1_000 * i + i % 7) * 1_000_000
            os.utime(path, ns=(ns, ns))
    return root
