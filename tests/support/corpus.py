"""Where the real-broker corpus is: tests/data/realkafka in this repository (see tests/data/README.md),
or the directory KFMT_REALKAFKA names (a newer generation of the same corpus, for instance)."""
from __future__ import annotations

import os
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
REPO = TESTS.parent
REALKAFKA = Path(os.environ.get("KFMT_REALKAFKA") or TESTS / "data" / "realkafka")


def corpus_problem() -> str | None:
    """Why the corpus cannot be used (one line), or None. The repository carries it, so this only
    fires for a KFMT_REALKAFKA that names the wrong directory or a damaged checkout."""
    if not REALKAFKA.is_dir():
        return f"the real-broker corpus is not at {REALKAFKA} (KFMT_REALKAFKA or tests/data/realkafka)"
    if not (REALKAFKA / "v2-none-0" / "00000000000000000000.log").is_file():
        return f"{REALKAFKA} holds no partition v2-none-0: is it the realkafka corpus?"
    return None


def real_partition_dirs() -> list[str]:
    """Names of the corpus's partition directories, in name order."""
    if not REALKAFKA.is_dir():
        return []
    return sorted(p.name for p in REALKAFKA.iterdir()
                  if p.is_dir() and not p.name.startswith("_") and not p.name.endswith(".truth"))


REAL_DIRS = real_partition_dirs()
