"""kfmt.format.frames.first_undescribed: the compiled check and the numpy reference name the same
first row whose entry does not begin as the row says (stored offset, size, magic), on the frames of
hypothesis-made segments with one row made wrong, and none when nothing was."""
from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from support.kernels import SETTINGS, both, segments

from kfmt.format import segment
from kfmt.format.frames import first_undescribed


@SETTINGS
@given(segments(), st.sampled_from(["none", "base_offset", "last_offset", "size", "magic"]), st.integers(0, 10),
       st.integers(0, 100))
def test_the_first_row_not_describing_its_entry(data, field, at, base):
    chunks = list(segment.FrameScanner(memoryview(data), "seg.log").chunks())
    if not chunks:
        return
    rows = np.concatenate(chunks).copy()
    end = int(rows["position"][-1] + rows["size"][-1])
    entries, at = data[:end], at % len(rows)
    rows["position"] += base
    if field != "none":
        rows[field][at] += 1
    fast, reference = both(lambda: first_undescribed(entries, rows, base))
    assert fast == reference
    wrong = field == "size" or field == ("base_offset" if rows["magic"][at] == 2 else "last_offset") \
        or field == "magic"
    assert reference == ("value", at if wrong else len(rows))
