"""kfmt info's many-entries-at-a-time path (kfmt.inspect.info over the compiled entry_facts,
v2_records_facts and legacy_set_facts) gives exactly what it gives over the references (entries
decoded: kfmt.format.entry_facts_reference, and the per-batch path for compressed batches): the same summary, or the same error, on the corpus (with and without the records below the
log start offset), on hypothesis-made segments of every magic and codec (damaged tails included),
and on wrappers whose inner offsets and timestamps are out of order -- counting compressed batches
from their headers (the default) and from their records (`deep`)."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.corpus import REAL_DIRS, REALKAFKA
from support.kernels import NATIVE_USERS, SETTINGS, both, segments
from support.verify_inputs import gzip_wrapper, partition_with

from kfmt.partition.layout import find_partitions
from kfmt.storage.store import open_storage

INFO_NATIVE = NATIVE_USERS + ["kfmt.inspect.info"]


def infos(path, include_deleted: bool, deep: bool) -> list:
    from kfmt.inspect.info import partition_info

    storage, root = open_storage(str(path))
    return [partition_info(p, include_deleted, deep).to_json() for p in find_partitions(storage, root)]


def same_both_ways(path, include_deleted: bool = False) -> list:
    for deep in (False, True):
        fast, reference = both(lambda: infos(path, include_deleted, deep), INFO_NATIVE)
        assert fast == reference
    return fast


@pytest.mark.parametrize("include_deleted", [False, True])
@pytest.mark.parametrize("name", REAL_DIRS)
def test_info_is_the_same_on_the_corpus(name, include_deleted):
    same_both_ways(REALKAFKA / name, include_deleted)


@SETTINGS
@given(segments())
def test_info_is_the_same_on_made_up_segments(tmp_path_factory, data):
    same_both_ways(partition_with(tmp_path_factory.mktemp("i"), data))


@SETTINGS
@given(st.lists(st.integers(0, 6), min_size=1, max_size=5), st.integers(0, 12),
       st.lists(st.integers(1_699_999_999_990, 1_700_000_000_010), min_size=5, max_size=5))
def test_info_of_wrappers_is_the_same(tmp_path_factory, inner, wrapper, ts):
    log = gzip_wrapper(wrapper, ts[:len(inner)], inner) + gzip_wrapper(wrapper + 20, ts[:1], [0])
    same_both_ways(partition_with(tmp_path_factory.mktemp("i"), log))
