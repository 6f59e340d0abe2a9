"""Producer-state replay of rows of data batches (CompanionBuilder.add_frames, RecoveredSegmentBuilder
.add_frames) sees only the rows kfmt.partition.segment_recovery.producer_rows keeps: the companion files
and the writer-side facts are those of every batch replayed one by one, whatever the producers, their
epochs, sequences and transactional runs, and wherever the rows are cut into chunks."""
from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from support.kernels import SETTINGS, outcome

from kfmt.format.frames import FRAME_DTYPE, header_of
from kfmt.partition.companions import CompanionBuilder
from kfmt.partition.segment_recovery import RecoveredSegmentBuilder, producer_rows


@st.composite
def data_rows(draw):
    n = draw(st.integers(1, 40))
    rows = np.zeros(n, FRAME_DTYPE)
    offset, position = draw(st.integers(0, 1000)), 0
    for i in range(n):
        count = draw(st.integers(1, 4))
        row = rows[i]
        row["position"], row["size"] = position, 100
        row["base_offset"], row["last_offset"] = offset, offset + count - 1
        row["records_count"] = count
        row["magic"] = 2
        row["max_timestamp"] = row["base_timestamp"] = 1_700_000_000_000 + draw(st.integers(0, 10**6))
        row["producer_id"] = draw(st.sampled_from([-1, 7, 8, 2**40]))
        row["producer_epoch"] = draw(st.sampled_from([0, 1]))
        row["base_sequence"] = draw(st.sampled_from([-1, 0, 5, 2**31 - 2]))
        row["attributes"] = draw(st.sampled_from([0, 0, 0x10]))
        row["partition_leader_epoch"] = draw(st.sampled_from([-1, 0, 3]))
        row["timestamp_type"] = 0
        position += 100
        offset += count + draw(st.integers(0, 2))
    return rows


def replayed(rows: np.ndarray, cuts: list[int], by_rows: bool):
    builder = CompanionBuilder(now_ms=1_800_000_000_000)
    base = int(rows["base_offset"][0])
    builder.begin_segment(base)
    writer_side = RecoveredSegmentBuilder(base)
    edges = sorted({0, len(rows), *(c % len(rows) for c in cuts)})
    for a, b in zip(edges, edges[1:]):
        if by_rows:
            builder.add_frames(rows[a:b])
            writer_side.add_frames(rows[a:b])
        else:
            for row in rows[a:b].tolist():
                builder.add_batch(header_of(row))
                writer_side.add(header_of(row))
    companions, facts = writer_side.finish()
    return builder.end_segment().files(), builder.finish().files(), companions.files(), facts


@SETTINGS
@given(data_rows(), st.lists(st.integers(0, 40), max_size=3))
def test_replaying_the_kept_rows_is_replaying_every_row(rows, cuts):
    assert outcome(lambda: replayed(rows, cuts, True)) == outcome(lambda: replayed(rows, cuts, False))


def test_a_long_run_keeps_its_first_second_and_last_batch():
    rows = np.zeros(10, FRAME_DTYPE)
    rows["producer_id"], rows["magic"] = 7, 2
    rows["base_offset"] = rows["last_offset"] = np.arange(10)
    assert producer_rows(rows)["base_offset"].tolist() == [0, 1, 9]
