"""Index files read as columns (kfmt.partition.indexes): the same entries, in the same order, and the
same lookups as a plain reading of the file by docs/format.md §6, whatever the bytes (preallocated
zeros, out-of-order entries, partial trailing entries)."""
from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from kfmt.partition import indexes
from kfmt.rows.ranges import split_points


def _by_the_doc(data: bytes, layout: str, base: int) -> list[tuple[int, int]]:
    """Whole entries in file order until the first slot after slot 0 whose relative offset is 0."""
    size = struct.calcsize(layout)
    out = []
    for slot in range(len(data) // size):
        fields = struct.unpack_from(layout, data, slot * size)
        relative = fields[0] if layout == ">ii" else fields[1]
        if relative == 0 and slot > 0:
            break
        out.append((base + relative, fields[1]) if layout == ">ii" else (fields[0], base + relative))
    return out


def _largest_at_or_below(pairs: list[tuple[int, int]], key, target: int):
    """The binary search of docs/format.md §6.5 written out (it also answers for unsorted files)."""
    lo, hi = 0, len(pairs)
    while lo < hi:
        mid = (lo + hi) // 2
        if key(pairs[mid]) <= target:
            lo = mid + 1
        else:
            hi = mid
    return pairs[lo - 1] if lo else None


# slots of a few likely values, so that zero slots and ordered runs come up often
_slot_values = st.sampled_from([0, 1, 2, 7, 4096, 2**31 - 1, -1, -2**31])
_offset_slots = st.lists(st.tuples(_slot_values | st.integers(-2**31, 2**31 - 1), _slot_values), max_size=40)
_time_slots = st.lists(st.tuples(st.integers(-2**63, 2**63 - 1) | st.sampled_from([-1, 0, 1700000000000]),
                                 _slot_values), max_size=40)


@settings(max_examples=400, deadline=None, derandomize=True, database=None)
@given(slots=_offset_slots, extra=st.binary(max_size=7), base=st.integers(0, 2**62),
       targets=st.lists(st.integers(0, 2**63 - 1), max_size=5))
def test_offset_index_columns(slots, extra, base, targets):
    data = b"".join(struct.pack(">ii", rel, pos) for rel, pos in slots) + extra
    expected = _by_the_doc(data, ">ii", base)
    columns = indexes.offset_columns(data, base)
    assert [(e.offset, e.position) for e in indexes.read_offset_index(data, base)] == expected
    assert list(zip(columns.offsets.tolist(), columns.positions.tolist())) == expected
    for target in [base, base + 5, *targets]:
        found = _largest_at_or_below(expected, lambda p: p[0], target)
        entry = columns.lookup(target)
        assert (entry.offset, entry.position) == (found or (base, 0))
        assert entry == indexes.lookup_offset(indexes.read_offset_index(data, base), target, base)


@settings(max_examples=400, deadline=None, derandomize=True, database=None)
@given(slots=_time_slots, extra=st.binary(max_size=11), base=st.integers(0, 2**62),
       targets=st.lists(st.integers(-2**63, 2**63 - 1), max_size=5))
def test_time_index_columns(slots, extra, base, targets):
    data = b"".join(struct.pack(">qi", ts, rel) for ts, rel in slots) + extra
    expected = _by_the_doc(data, ">qi", base)
    columns = indexes.time_columns(data, base)
    assert [(e.timestamp, e.offset) for e in indexes.read_time_index(data, base)] == expected
    assert list(zip(columns.timestamps.tolist(), columns.offsets.tolist())) == expected
    for target in [1700000000000, *targets]:
        found = _largest_at_or_below(expected, lambda p: p[0], target)
        entry = columns.lookup(target)
        assert (entry.timestamp, entry.offset) == (found or (-1, base))


@settings(max_examples=400, deadline=None, derandomize=True, database=None)
@given(size=st.integers(0, 2000), starts=st.lists(st.integers(-100, 2100), max_size=60),
       split=st.integers(1, 500), unusable=st.sets(st.integers(-100, 2100), max_size=200),
       first=st.integers(0, 1000))
def test_split_points_take_the_first_usable_start_a_split_after_the_last_cut(size, starts, split, unusable, first):
    first = min(first, size)
    cuts = [first]
    for position in sorted(set(starts)):
        if position - cuts[-1] >= split and position < size and position not in unusable:
            cuts.append(position)
    asked = []

    def usable(position):
        asked.append(position)
        return position not in unusable

    assert split_points(size, starts, split, usable, start=first) == cuts + [size]
    assert all(position < size for position in asked)  # only candidates are checked
