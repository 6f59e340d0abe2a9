"""What a partition holds, by kind of entry (magic, codec, control), counted from frame headers
alone: the dry run of upgrade and recompress prints it, each kind with what the rewrite makes of it."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from kfmt.format import segment
from kfmt.format.layout import ATTR_CONTROL, MAGIC_V2
from kfmt.format.model import BatchHeader
from kfmt.plugin import registry
from kfmt.transforms.run import SourceSegment, TaskResult


@dataclass
class Census:
    """Entries of a partition by (magic, codec, control), from headers alone: [entries, bytes]."""

    counts: dict = field(default_factory=dict)

    def add(self, header: BatchHeader) -> None:
        self._add((header.magic, header.compression, header.is_control), 1, header.size)

    def add_rows(self, rows: np.ndarray) -> None:
        """add() for rows of frames (kfmt.format.frames), many at a time."""
        control = (rows["magic"] >= MAGIC_V2) & (rows["attributes"] & ATTR_CONTROL != 0)
        keys = np.stack([rows["magic"].astype(np.int64), rows["compression"].astype(np.int64),
                         control.astype(np.int64)], axis=1)
        kinds, where = np.unique(keys, axis=0, return_inverse=True)
        where = where.reshape(-1)
        sizes = np.bincount(where, weights=rows["size"].astype(np.float64), minlength=len(kinds))
        counts = np.bincount(where, minlength=len(kinds))
        for (magic, codec, is_control), n, size in zip(kinds.tolist(), counts.tolist(), sizes.tolist()):
            self._add((magic, codec, bool(is_control)), n, int(size))

    def _add(self, key: tuple, n: int, size: int) -> None:
        entries, total = self.counts.get(key, (0, 0))
        self.counts[key] = (entries + n, total + size)

    def merge(self, other: "Census") -> "Census":
        for key, (n, size) in other.counts.items():
            self._add(key, n, size)
        return self

    def lines(self, verb: Callable[[int, int, bool], str]) -> list[str]:
        """One line per kind of entry: 'v1 gzip: 38 entries, 70693 bytes -> <verb(...)>'."""
        codecs = registry.get().compressions
        out = []
        for (magic, codec, control), (n, size) in sorted(self.counts.items()):
            name = codecs[codec].name if codec in codecs else f"codec {codec}"
            kind = f"v{magic} {name}{' control' if control else ''}"
            out.append(f"{kind}: {n} entries, {size} bytes -> {verb(magic, codec, control)}")
        return out or ["no entries"]


@dataclass(frozen=True)
class CensusTask:
    partition: int
    sources: tuple[SourceSegment, ...]

    def run(self) -> TaskResult:
        census = Census()
        result = TaskResult(self.partition, detail=census)
        for src in self.sources:
            scanner = segment.FrameScanner(src.read(), src.file)
            for rows in scanner.chunks():
                census.add_rows(rows)
            src.check_tail(scanner.tail, result.notes)
        return result
