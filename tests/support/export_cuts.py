"""Corpus partitions cut at chosen offsets, and completed later, for the incremental export tests."""
from __future__ import annotations

import shutil
from pathlib import Path

from support.corpus import REALKAFKA
from support.export_truth import listing

# partition -> (the last segment kept in the cut copy, its batch at whose position it is cut)
CUTS = {"v2-none-0": (116, 1), "v1-gzip-0": None, "txn-v2-none-0": None}


NEW_PARTITION = "v0-none-0"  # appears in SRC only for the append run


def segment_bases(name: str) -> list[int]:
    return sorted(int(p.stem) for p in (REALKAFKA / name).glob("*.log"))


def cut_copy(name: str, dst: Path, cut: tuple[int, int] | None) -> None:
    """A copy of a corpus partition without the segments after `cut[0]`, whose .log ends before its
    batch number `cut[1]` (None: the first half of the segments, whole)."""
    bases = segment_bases(name)
    if cut is None:
        cut = (bases[len(bases) // 2 - 1], None)
    last, batch = cut
    shutil.copytree(REALKAFKA / name, dst)
    for path in dst.iterdir():
        if path.stem.isdigit() and int(path.stem) > last:
            path.unlink()
    if batch is not None:
        positions = sorted(pos for base, pos in listing(name) if base == last)
        log = dst / f"{last:020d}.log"
        log.write_bytes(log.read_bytes()[:positions[batch]])


def cut_log_dir(root: Path) -> Path:
    root.mkdir()
    for name, cut in CUTS.items():
        cut_copy(name, root / name, cut)
    return root


def complete_log_dir(root: Path) -> None:
    """Put back every segment of the cut partitions, and add a new partition."""
    for name in CUTS:
        shutil.rmtree(root / name)
        shutil.copytree(REALKAFKA / name, root / name)
    shutil.copytree(REALKAFKA / NEW_PARTITION, root / NEW_PARTITION)
