"""kfmt.rows.changelog against a plain model of what a consumer reading the whole topic concludes."""
from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from kfmt.rows.changelog import Latest

SCHEMA = pa.schema([("key", pa.binary()), ("value", pa.binary()), ("partition", pa.int32()),
                    ("offset", pa.int64()), ("timestamp_ms", pa.int64())])
records = st.lists(st.tuples(st.sampled_from([None, b"a", b"b", b"c", b""]),  # key
                             st.one_of(st.none(), st.binary(max_size=3)),   # value (None: a tombstone)
                             st.integers(0, 2),                              # partition
                             st.integers(0, 5)),                             # timestamp
                   max_size=40)


def model(recs: list) -> dict:
    """key -> (partition, offset) of the record that holds its value, by the module's rule."""
    last_in_partition = {}
    for offset, (key, value, partition, ts) in enumerate(recs):
        if key is not None:
            last_in_partition[(key, partition)] = (ts, partition, offset, value)
    best = {}
    for (key, _), (ts, partition, offset, value) in last_in_partition.items():
        if key not in best or (ts, partition) > best[key][:2]:
            best[key] = (ts, partition, offset, value)
    return {k: (p, o) for k, (_, p, o, v) in best.items() if v is not None}


@settings(max_examples=200, deadline=None)
@given(records, st.integers(1, 7))
def test_latest_matches_the_model(recs, chunk):
    rows = pa.table({"key": [r[0] for r in recs], "value": [r[1] for r in recs],
                     "partition": [r[2] for r in recs], "offset": list(range(len(recs))),
                     "timestamp_ms": [r[3] for r in recs]}, schema=SCHEMA)
    latest = Latest(SCHEMA)
    for start in range(0, rows.num_rows, chunk):  # however the chunks fall
        latest.add(rows.slice(start, chunk))
    got = latest.table()
    assert {k: (p, o) for k, p, o in zip(got.column("key").to_pylist(), got.column("partition").to_pylist(),
                                         got.column("offset").to_pylist())} == model(recs)
    assert latest.keyless == sum(r[0] is None for r in recs)
