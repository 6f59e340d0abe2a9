"""Transactions under both protocols (KIP-890, docs/format.md §7.1), in partitions built from the rules
(tests/support/txn_scenarios.py), whose outcome is known from the construction: producers of
transaction version 1 and 2 side by side (and producers moving from one to the other), epoch
overflow onto a new producer id, retried markers, fenced producers, idempotent data in between.
Every reader and writer must agree with the construction: read_committed and read_uncommitted,
the `.txnindex` and producer snapshots reindex rebuilds, verify, and compaction."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.txn_scenarios import ABORTED, MAX_EPOCH, build, write_partition

import kfmt
from kfmt.partition.snapshots import read_snapshot
from kfmt.partition.txnindex import read_txn_index

T_NOW = 1_700_000_000_000 + 60_000  # a minute after the data: no producer expired

OPERATIONS = st.lists(st.tuples(
    st.sampled_from(["write", "write", "write", "commit", "abort", "fence", "retry", "upgrade", "plain"]),
    st.integers(0, 3), st.integers(1, 3)), min_size=1, max_size=40)
PRODUCERS = st.lists(st.tuples(st.sampled_from([1, 2]), st.sampled_from([0, 3, MAX_EPOCH - 2, MAX_EPOCH - 1])),
                     min_size=1, max_size=3)


def offsets(path, isolation: str) -> list[int]:
    return kfmt.read(path, isolation=isolation).read_all().column("offset").to_pylist()


def check_partition(log, producers, path, tmp_path) -> None:
    assert offsets(path, "read_uncommitted") == log.data_offsets()
    assert offsets(path, "read_committed") == log.committed_offsets(producers)

    out = tmp_path / "reindexed" / path.name
    kfmt.reindex(path, out, now_ms=T_NOW)
    indexed = [(e.producer_id, e.first_offset, e.last_offset, e.last_stable_offset)
               for f in sorted(out.glob("*.txnindex")) for e in read_txn_index(f.read_bytes())]
    assert indexed == log.aborted
    final = read_snapshot((out / f"{log.next_offset:020d}.snapshot").read_bytes())
    assert {e.producer_id: (e.producer_epoch, e.current_txn_first_offset) for e in final} == log.final

    report = kfmt.verify(out).detail  # the source has no .txnindex: verify would rightly miss it
    assert report.ok, [p.text() for p in report.problems]

    compacted = tmp_path / "compacted" / path.name
    result = kfmt.compact(path, compacted, now_ms=T_NOW)
    cleaned_until = result["partitions"][0]["cleaned_until"] or 0
    assert offsets(compacted, "read_committed") == log.committed_offsets(producers)
    kept = set(offsets(compacted, "read_uncommitted"))
    assert not [o for o, s in log.status.items() if s == ABORTED and o < cleaned_until and o in kept]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(operations=OPERATIONS, producers=PRODUCERS, data=st.data())
def test_partitions_built_from_the_rules(tmp_path_factory, operations, producers, data):
    log, state = build(operations, *zip(*producers))
    if not log.batches:
        return
    cuts = data.draw(st.sets(st.integers(1, max(1, len(log.batches) - 1)), max_size=4))
    tmp_path = tmp_path_factory.mktemp("txn")
    path = tmp_path / "txn-0"
    write_partition(log, path, cuts)
    check_partition(log, state, path, tmp_path)


# --- the cases by name -------------------------------------------------------------------------

def run_case(tmp_path, operations, producers, cuts=()):
    log, state = build(operations, *zip(*producers))
    path = tmp_path / "txn-0"
    write_partition(log, path, set(cuts))
    check_partition(log, state, path, tmp_path)
    return log, state


def test_version_2_markers_carry_the_bumped_epoch_and_version_1_markers_the_same(tmp_path):
    """Producer 1 (version 1) and producer 2 (version 2) interleave: each marker ends its own
    producer's transaction, whatever its epoch."""
    log, _ = run_case(tmp_path, [("write", 0, 2), ("write", 1, 2), ("commit", 1, 1), ("abort", 0, 1),
                                 ("write", 1, 1), ("write", 0, 1), ("abort", 1, 1), ("commit", 0, 1)],
                      [(1, 5), (2, 5)], cuts=[3])
    assert log.final == {1: (5, -1), 2: (7, -1)}
    assert log.aborted == [(1, 0, 5, 6), (2, 6, 8, 7)]  # 1 opened another at 7 before 2 aborted


def test_epoch_overflow_moves_the_producer_to_a_new_id(tmp_path):
    """Version 2 at epoch 32766: the commit marker carries 32767 and the next transaction is written
    by a new producer id at epoch 0, which an abort then ends."""
    log, _ = run_case(tmp_path, [("write", 0, 2), ("commit", 0, 1), ("write", 0, 2), ("abort", 0, 1)],
                      [(2, MAX_EPOCH - 1)])
    assert log.final == {1: (MAX_EPOCH, -1), 100: (1, -1)}
    assert log.aborted == [(100, 3, 5, 6)]


def test_a_retried_marker_is_idempotent_under_version_2_and_ends_the_next_transaction_under_version_1(tmp_path):
    log, producers = run_case(tmp_path, [("write", 0, 1), ("commit", 0, 1), ("retry", 0, 1), ("write", 0, 2),
                                 ("write", 1, 1), ("commit", 1, 1), ("write", 1, 2), ("retry", 1, 1)],
                      [(2, 0), (1, 0)])
    # version 2: the retried COMMIT (offset 2, epoch 1) ends nothing, 3-4 stay open
    # version 1: the retried COMMIT (offset 9) ends the transaction 7-8 it was never meant for
    assert log.status[3] == log.status[4] == "open" and log.status[7] == log.status[8] == "committed"
    assert log.committed_offsets(producers) == [0]  # the last stable offset is 3


def test_a_fenced_producer_is_aborted_with_the_bumped_epoch(tmp_path):
    """A new instance (InitProducerId) aborts the open transaction with epoch + 1 under either
    version; the old instance's data is the aborted transaction's."""
    log, _ = run_case(tmp_path, [("write", 0, 3), ("plain", 0, 2), ("fence", 0, 1), ("write", 0, 1),
                                 ("commit", 0, 1)], [(2, 4)])
    assert log.aborted == [(1, 0, 5, 6)] and log.final[1] == (6, -1)


def test_verify_notes_an_epoch_going_down(tmp_path):
    """A marker below the epoch its producer id reached is what a leader refuses under either
    version; replay takes it (docs/format.md §7.1): a note, not an error, and nothing else changes."""
    from support.transform_runs import kfmt_marker

    from kfmt.format.control import ControlType

    log, producers = build([("write", 0, 2), ("commit", 0, 1)], [2], [5])
    log.batches.append((3, kfmt_marker(3, 1, 4, ControlType.ABORT)))
    path = tmp_path / "txn-0"
    write_partition(log, path, set())
    kfmt.reindex(path, tmp_path / "out" / "txn-0", now_ms=T_NOW)
    report = kfmt.verify(tmp_path / "out" / "txn-0").detail
    notes = [p for p in report.problems if p.check == "txn-epoch"]
    assert report.ok and len(notes) == 1 and "producer epoch 4, below the epoch 6" in notes[0].text()
    assert offsets(path, "read_committed") == [0, 1]
