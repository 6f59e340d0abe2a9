"""kfmt verify's index checks judged on all entries at once (kfmt.inspect.verify.indexes
.offset_entries_clean, time_entries_clean) report exactly what the entry-by-entry walk reports: the
same problems in the same order, on the corpus and on its index files damaged (entries changed,
swapped, cut) in copies of its partitions."""
from __future__ import annotations

import random
import shutil
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.corpus import REAL_DIRS, REALKAFKA
from support.kernels import SETTINGS
from support.verify_inputs import verified

from kfmt.inspect.verify import indexes as index_checks
from kfmt.storage.store import open_storage


def same_both_ways(path) -> tuple:
    fast = verified(path)
    with pytest.MonkeyPatch.context() as patched:  # every entry through the walk
        patched.setattr(index_checks, "offset_entries_clean", lambda *a: False)
        patched.setattr(index_checks, "time_entries_clean", lambda *a: False)
        walked = verified(path)
    assert fast == walked
    return fast


@pytest.mark.parametrize("name", REAL_DIRS)
def test_the_same_on_the_corpus(name):
    same_both_ways(REALKAFKA / name)


INDEXED = [name for name in REAL_DIRS if any((REALKAFKA / name).glob("*.timeindex"))][:8]


@SETTINGS
@given(st.sampled_from(INDEXED), st.sampled_from(["index", "timeindex"]), st.randoms(use_true_random=False),
       st.sampled_from(["offset", "position", "swap", "cut", "zero"]))
def test_the_same_on_damaged_indexes(tmp_path_factory, name, kind, rng: random.Random, how):
    copy = tmp_path_factory.mktemp("v") / name
    shutil.copytree(REALKAFKA / name, copy)
    files = [f for f in sorted(copy.glob(f"*.{kind}")) if f.stat().st_size >= 24]
    if not files:
        return
    f = rng.choice(files)
    data = bytearray(f.read_bytes())
    slots = len(data) // 12 if kind == "timeindex" else len(data) // 8
    size = 12 if kind == "timeindex" else 8
    slot = rng.randrange(slots)
    at = slot * size
    if how == "offset":  # the relative offset (the last 4 bytes of a time entry, the first of an offset entry)
        field = at + 8 if kind == "timeindex" else at
        struct.pack_into(">i", data, field, struct.unpack_from(">i", data, field)[0] + rng.choice([-5, -1, 1, 7]))
    elif how == "position":  # the position, or a time entry's timestamp
        field, fmt = (at, ">q") if kind == "timeindex" else (at + 4, ">i")
        struct.pack_into(fmt, data, field, struct.unpack_from(fmt, data, field)[0] + rng.choice([-100, -1, 1, 3]))
    elif how == "swap" and slots > 1:
        other = rng.randrange(slots) * size
        data[at:at + size], data[other:other + size] = data[other:other + size], data[at:at + size]
    elif how == "cut":
        del data[at:]
    else:
        data[at:at + size] = bytes(size)
    f.write_bytes(bytes(data))
    same_both_ways(copy)


@SETTINGS
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 60)), max_size=5),
       st.lists(st.tuples(st.integers(-1, 6), st.integers(0, 70), st.sampled_from([1, 2])), min_size=1,
                max_size=30))
def test_the_leader_epoch_check_is_shown_every_batch_it_would_report(tmp_path_factory, entries, batches):
    """LeaderEpochs.wants (which rows of a clean run log_runs shows the check) leaves out only rows
    whose on_batch, shown the rows in order, reports nothing, whatever the checkpoint (unordered
    entries too; none: its absence is noted once)."""
    import numpy as np

    from kfmt.format.frames import FRAME_DTYPE
    from kfmt.inspect.verify.checkpoints import LeaderEpochs
    from kfmt.inspect.verify.log import BatchFacts
    from kfmt.inspect.verify.problems import VerifyReport
    from kfmt.partition.layout import load_partition

    directory = tmp_path_factory.mktemp("p") / "t-0"
    directory.mkdir()
    (directory / "00000000000000000000.log").write_bytes(b"")
    (directory / "leader-epoch-checkpoint").write_text(
        f"0\n{len(entries)}\n" + "".join(f"{e} {o}\n" for e, o in entries))
    storage, root = open_storage(str(directory))
    rows = np.zeros(len(batches), FRAME_DTYPE)
    rows["partition_leader_epoch"] = [e for e, _, _ in batches]
    rows["base_offset"] = [o for _, o, _ in batches]
    rows["magic"] = [m for _, _, m in batches]
    wanted = LeaderEpochs(load_partition(storage, root), VerifyReport()).wants(rows)
    walked = LeaderEpochs(load_partition(storage, root), VerifyReport())
    for i, (epoch, offset, magic) in enumerate(batches):
        before = len(walked.report.problems)
        walked.on_batch(BatchFacts(0, 70, offset, offset, -1, magic, partition_leader_epoch=epoch), "f",
                        walked.report)
        if len(walked.report.problems) > before:
            assert wanted[i]
