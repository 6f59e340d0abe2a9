"""Transactional partitions built from the protocol's rules, with what every reader must make of them
known from the construction (never from kfmt): which records are committed, aborted or still open,
the `.txnindex` entries, the producers' final epochs.

The rules (KIP-98, KIP-890; docs/format.md §7.1): a transactional producer writes batches with its
current epoch; the coordinator ends the transaction with a COMMIT or ABORT marker in every partition
the transaction touched. Under transaction version 1 the marker carries the producer's epoch; under
version 2 it carries the epoch + 1, which becomes the producer's epoch, and when that is 32767
(Short.MAX_VALUE) the producer continues under a new producer id at epoch 0. A new instance of the
same transactional id (InitProducerId) bumps the epoch and aborts an open transaction with a marker of
the bumped epoch. A retried marker repeats the last one (same epoch and type): version 2 accepts it
only when no transaction is open; version 1 accepts it always, and it then ends whatever is open
(the hanging-transaction problem KIP-890 closes). Data batches are built by kafka-python (an
independent encoder); markers by kfmt (kafka-python builds no control batch).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from support.transform_runs import kfmt_marker, peer_v2

from kfmt.format.control import ControlType

MAX_EPOCH = 32767  # Short.MAX_VALUE
PLAIN_PID = 900  # an idempotent producer writing outside transactions
COMMITTED, ABORTED, OPEN, PLAIN = "committed", "aborted", "open", "plain"


@dataclass
class TxnProducer:
    version: int  # transaction version, 1 or 2
    pid: int
    epoch: int
    sequence: int = 0
    first: int | None = None  # first offset of its open transaction
    offsets: list[int] = field(default_factory=list)  # data offsets of its open transaction
    last_marker: tuple[int, int, ControlType] | None = None  # (pid, epoch, type) of its latest marker


@dataclass
class TxnLog:
    batches: list[tuple[int, bytes]] = field(default_factory=list)  # (base offset, entry)
    status: dict[int, str] = field(default_factory=dict)  # data offset -> what became of it
    aborted: list[tuple[int, int, int, int]] = field(default_factory=list)  # .txnindex entries
    final: dict[int, tuple[int, int]] = field(default_factory=dict)  # pid -> (epoch, open first or -1)
    next_offset: int = 0
    next_pid: int = 100

    # --- what readers must see ---
    def open_firsts(self, producers, but: int | None = None) -> list[int]:
        return [p.first for p in producers if p.first is not None and p.pid != but]

    def committed_offsets(self, producers) -> list[int]:
        lso = min(self.open_firsts(producers), default=None)
        return sorted(o for o, s in self.status.items()
                      if s in (COMMITTED, PLAIN) and (lso is None or o < lso))

    def data_offsets(self) -> list[int]:
        return sorted(self.status)

    # --- writing ---
    def _append(self, base: int, entry: bytes, last: int) -> None:
        self.batches.append((base, entry))
        self.next_offset = last + 1

    def write(self, p: TxnProducer, n: int) -> None:
        base = self.next_offset
        self._append(base, peer_v2(base, n, pid=p.pid, epoch=p.epoch, seq=p.sequence, transactional=True),
                     base + n - 1)
        p.sequence += n
        if p.first is None:
            p.first = base
        p.offsets += range(base, base + n)
        for o in range(base, base + n):
            self.status[o] = OPEN
        self.final[p.pid] = (p.epoch, p.first)

    def plain(self, n: int, sequence: int) -> None:
        base = self.next_offset
        self._append(base, peer_v2(base, n, pid=PLAIN_PID, epoch=0, seq=sequence), base + n - 1)
        for o in range(base, base + n):
            self.status[o] = PLAIN
        self.final[PLAIN_PID] = (0, -1)

    def marker(self, p: TxnProducer, kind: ControlType, epoch: int, producers, pid: int | None = None) -> None:
        """A marker of p's pid (or of `pid`, an id p had before): it ends whatever transaction that
        producer id has open (the replay rule)."""
        offset, pid = self.next_offset, p.pid if pid is None else pid
        self._append(offset, kfmt_marker(offset, pid, epoch, kind), offset)
        self.final[pid] = (epoch, -1)
        if pid != p.pid:
            return
        if p.first is not None:
            fate = ABORTED if kind == ControlType.ABORT else COMMITTED
            for o in p.offsets:
                self.status[o] = fate
            if kind == ControlType.ABORT:
                lso = min(self.open_firsts(producers, but=p.pid), default=offset + 1)
                self.aborted.append((p.pid, p.first, offset, lso))
        p.first, p.offsets, p.last_marker = None, [], (pid, epoch, kind)

    def bump(self, p: TxnProducer, epoch: int) -> None:
        """p's epoch after a marker or an InitProducerId: a new producer id once it is exhausted."""
        if epoch >= MAX_EPOCH:
            p.pid, self.next_pid, p.epoch = self.next_pid, self.next_pid + 1, 0
        else:
            p.epoch = epoch
        p.sequence = 0


def end(log: TxnLog, p: TxnProducer, kind: ControlType, producers) -> None:
    if p.first is None:
        return  # the partition was not in the transaction: no marker here
    epoch = p.epoch + 1 if p.version >= 2 else p.epoch
    log.marker(p, kind, epoch, producers)
    if p.version >= 2:
        log.bump(p, epoch)


def fence(log: TxnLog, p: TxnProducer, producers) -> None:
    epoch = p.epoch + 1
    if p.first is not None:
        log.marker(p, ControlType.ABORT, epoch, producers)
    log.bump(p, epoch)


def retry(log: TxnLog, p: TxnProducer, producers) -> None:
    """The coordinator resends p's last marker with the epoch it had (version 2 rejects it while a
    transaction is open; version 1 takes it and ends that transaction)."""
    if p.last_marker is None or (p.version >= 2 and p.first is not None):
        return
    pid, epoch, kind = p.last_marker
    if pid == p.pid and epoch < p.epoch:
        return  # a fenced epoch: every version rejects it (InvalidProducerEpochException)
    log.marker(p, kind, epoch, producers, pid)


def build(operations, versions, start_epochs) -> tuple[TxnLog, list[TxnProducer]]:
    """Run `operations` ((name, producer index, n)) for producers of the given transaction versions
    and first epochs."""
    log = TxnLog()
    producers = [TxnProducer(v, i + 1, e) for i, (v, e) in enumerate(zip(versions, start_epochs))]
    plain_sequence = 0
    for name, i, n in operations:
        p = producers[i % len(producers)]
        if name == "write":
            log.write(p, n)
        elif name in ("commit", "abort"):
            end(log, p, ControlType.COMMIT if name == "commit" else ControlType.ABORT, producers)
        elif name == "fence":
            fence(log, p, producers)
        elif name == "retry":
            retry(log, p, producers)
        elif name == "upgrade" and p.first is None:
            p.version = 2  # the cluster finalized transaction version 2; the client re-initialised
        elif name == "plain":
            log.plain(n, plain_sequence)
            plain_sequence += n
    return log, producers


def write_partition(log: TxnLog, path: Path, cuts: set[int]) -> list[int]:
    """The batches as segments, a new one at each batch index in `cuts`; returns the segment bases."""
    path.mkdir(parents=True)
    segments: list[list[tuple[int, bytes]]] = []
    for i, batch in enumerate(log.batches):
        if not segments or i in cuts:
            segments.append([])
        segments[-1].append(batch)
    for seg in segments:
        (path / f"{seg[0][0]:020d}.log").write_bytes(b"".join(e for _, e in seg))
    return [seg[0][0] for seg in segments]
