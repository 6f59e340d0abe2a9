"""read_committed: which transactional batches a committed reader may see.

A transactional data batch is settled by the next end-transaction marker (control record ABORT or
COMMIT) its producer writes after it. Kafka's consumer learns the aborted ones from the broker's
`.txnindex`; kfmt derives them from the log itself, looking ahead only as far as the next marker of
each producer, so stale or missing transaction indexes cannot mislead it. A batch whose transaction
has no marker yet is open: the last stable offset lies before it, and a read_committed reader stops.
"""
from __future__ import annotations

from collections import defaultdict, deque
from typing import Iterator

from kfmt.control import ControlType, control_type
from kfmt.errors import DataError
from kfmt.model import BatchHeader

ABORTED, COMMITTED, OPEN = "aborted", "committed", "open"


class TransactionStatus:
    def __init__(self, markers: Iterator[tuple[int, int, ControlType]]):
        """`markers` yields (producer id, marker offset, ABORT|COMMIT) in offset order, from the
        point reading starts."""
        self._markers = markers
        self._pending: dict[int, deque] = defaultdict(deque)
        self._done = False

    def status(self, header: BatchHeader) -> str:
        queue = self._pending[header.producer_id]
        while True:
            while queue and queue[0][0] < header.last_offset:
                queue.popleft()  # markers of earlier transactions of this producer
            if queue or self._done:
                break
            self._advance()
        if not queue:
            return OPEN
        return ABORTED if queue[0][1] == ControlType.ABORT else COMMITTED

    def _advance(self) -> None:
        for pid, offset, kind in self._markers:
            self._pending[pid].append((offset, kind))
            return
        self._done = True


def end_markers(reader, seg_index: int, position: int):
    """(producer id, offset, type) of the ABORT/COMMIT markers from a point of a partition on."""
    segs = reader.part.segments
    for i in range(seg_index, len(segs)):
        for header in reader.frames(segs[i], position if i == seg_index else 0):
            if not header.is_control:
                continue
            batch = reader.decode(segs[i], header)
            if not len(batch):
                continue  # an empty control batch left by compaction marks nothing
            try:
                kind = control_type(batch.records.column(2)[0].as_py())
            except DataError as err:
                raise err.located(file=reader.part.display(segs[i].log), base_position=header.position,
                                  offset=header.base_offset) from None
            if kind in (ControlType.ABORT, ControlType.COMMIT):
                yield header.producer_id, header.base_offset, kind
