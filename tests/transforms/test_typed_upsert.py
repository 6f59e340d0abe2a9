"""`kfmt export --mode upsert --append` into Iceberg: each run reads only what is new since the last one
and updates the table with a delete of the touched keys' rows and an append of their live rows; after
every run the table equals the topic's latest value per key, computed here from everything ever
produced (new records, tombstones, a compaction by `kfmt compact` in between), and the corpus's
changelog exported in three steps equals its latest-per-key truth. Dead letters of an upsert are
written, and published only with the commit."""
from __future__ import annotations

import shutil

import pytest
from support.schema_truth import SCHEMAS_DEV, latest_per_key, truth_records
from support.typed_inputs import schema_directory, write_partition

from kfmt.api.commands import compact, export
from kfmt.errors import UsageError

pytest.importorskip("pyiceberg")

V1 = {"type": "record", "name": "R", "fields": [{"name": "n", "type": "int"}]}


def framed(n: int) -> bytes:
    import io

    import fastavro

    out = io.BytesIO()
    fastavro.schemaless_writer(out, V1, {"n": n})
    return b"\x00" + (1).to_bytes(4, "big") + out.getvalue()


def table_rows(dst, table: str = "kafka.records"):
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog("kfmt", uri=f"sqlite:///{dst}/_catalog.db", warehouse=f"file://{dst}/warehouse")
    return catalog.load_table(table).scan().to_arrow()


def live_keys(dst) -> dict:
    return {r["key"]: r["value"]["n"] for r in table_rows(dst).to_pylist()}


def truth_of(history: dict) -> dict:
    """The latest value per key of every partition's records (in offset order), tombstones removing."""
    state = {}
    for records in history.values():
        for key, value in records:
            state.pop(key, None) if value is None else state.__setitem__(key, value)
    return state


def append_batch(log, base_offset: int, records) -> None:
    """Records appended to a partition's last segment as one v2 batch (kafka-python's builder)."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 24)
    for i, (key, value) in enumerate(records):
        builder.append(i, 1_700_000_100_000 + base_offset + i, key, value, [])
    batch = bytearray(builder.build())
    batch[0:8] = base_offset.to_bytes(8, "big")
    with open(log, "ab") as f:
        f.write(bytes(batch))


@pytest.mark.filterwarnings("ignore:.*no partition.metadata")  # kfmt compact's copy is for no cluster here
def test_upsert_append_updates_the_table_to_the_topics_state(tmp_path):
    logs, dst = tmp_path / "logs", tmp_path / "t"
    schemas = schema_directory(tmp_path / "s", [{"id": 1, "subject": "c-value", "version": 1, "schema": V1}])

    def run():
        return export(logs, dst, format="iceberg", mode="upsert", value_format="avro", schemas=str(schemas),
                      append=True)

    history = {p: [(b"p%d-k%d" % (p, i % 7), i) for i in range(30)] for p in (0, 1)}
    for p, records in history.items():
        write_partition(logs / f"c-{p}", [(k, framed(v)) for k, v in records], batch_records=4)
    run()
    assert live_keys(dst) == truth_of(history)
    # run 2: updates, tombstones (a removed key, one removed and written again), a new key
    later = {0: [(b"p0-k1", None), (b"p0-k2", 100), (b"p0-k3", None), (b"p0-k3", 101), (b"p0-k9", 102)],
             1: [(b"p1-k4", None)]}
    for p in history:
        history[p] += later[p]
        write_partition(logs / f"c-{p}", [(k, None if v is None else framed(v)) for k, v in history[p]],
                        batch_records=4)
    report = run()
    assert live_keys(dst) == truth_of(history)
    assert report["totals"]["output_records"] == 3  # p0-k2, p0-k3 and p0-k9: only the keys touched
    # run 3: more records, partly above the mark in the segment the cleaner then compacts (a new one
    # rolled after it), partly in the new active segment
    above = [(b"p0-k5", 300), (b"p0-k5", 301), (b"p0-k6", None), (b"p0-k2", None)]
    first_segment = logs / "c-0" / f"{0:020d}.log"
    append_batch(first_segment, len(history[0]), [(k, None if v is None else framed(v)) for k, v in above])
    history[0] += above
    newest = [(b"p0-k5", 302), (b"p0-k10", 303)]
    append_batch(logs / "c-0" / f"{len(history[0]):020d}.log", len(history[0]),
                 [(k, None if v is None else framed(v)) for k, v in newest])
    history[0] += newest
    compact(logs / "c-0", tmp_path / "compacted" / "c-0", delete_retention_ms=10**12)
    import kfmt

    assert kfmt.read(str(tmp_path / "compacted" / "c-0")).read_all().num_rows < len(history[0])
    shutil.rmtree(logs / "c-0")
    shutil.copytree(tmp_path / "compacted" / "c-0", logs / "c-0")
    run()
    assert live_keys(dst) == truth_of(history)
    # run 4: nothing new, no commit
    assert run()["totals"]["output_records"] == 0
    assert live_keys(dst) == truth_of(history)


def cut_changelog(dst, below: int) -> None:
    """The corpus's changelog partition with the segments from `below` on left out."""
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(SCHEMAS_DEV / "changelog-avro-0", dst)
    for path in dst.iterdir():
        if path.stem.isdigit() and int(path.stem) >= below and path.suffix != ".snapshot":
            path.unlink()


def test_the_corpus_changelog_in_three_runs_equals_its_latest_per_key_truth(tmp_path):
    logs, dst = tmp_path / "logs", tmp_path / "t"
    shutil.copytree(SCHEMAS_DEV / "_schemas-0", logs / "_schemas-0")
    truth = truth_records("changelog-avro")
    for below in (226, 456, None):
        cut_changelog(logs / "changelog-avro-0", below if below is not None else 10**9)
        export(logs, dst, format="iceberg", mode="upsert", key_format="avro", value_format="avro",
               keep_raw=True, isolation="read_committed", append=True, topic="changelog-avro")
        seen = [t for t in truth if below is None or t["offset"] < below]
        want = {}
        for t in seen:
            want.pop(t["key"], None) if t["value"] is None else want.__setitem__(t["key"], t["offset"])
        got = {r["key"]: r["offset"] for r in table_rows(dst).to_pylist()}
        assert got == want
    assert sorted(got.items()) == sorted((t["key"], t["offset"]) for t in latest_per_key("changelog-avro"))


def test_upsert_append_needs_the_stored_key_bytes(tmp_path):
    logs, dst = tmp_path / "logs", tmp_path / "t"
    shutil.copytree(SCHEMAS_DEV / "_schemas-0", logs / "_schemas-0")
    cut_changelog(logs / "changelog-avro-0", 226)
    export(logs, dst, format="iceberg", mode="upsert", key_format="avro", value_format="avro",
           topic="changelog-avro")
    with pytest.raises(UsageError, match="finds a key's rows by its stored bytes.*--keep-raw"):
        export(logs, dst, format="iceberg", mode="upsert", key_format="avro", value_format="avro",
               topic="changelog-avro", append=True)


def test_a_records_table_is_not_appended_to_as_a_changelog(tmp_path):
    logs, dst = tmp_path / "logs", tmp_path / "t"
    write_partition(logs / "c-0", [(b"a", b"1")])
    export(logs, dst, format="iceberg")
    with pytest.raises(UsageError, match="the table was exported with mode records; --append must use the same"):
        export(logs, dst, format="iceberg", mode="upsert", append=True)


def dead_offsets(dst) -> list[int]:
    import pyarrow.parquet as pq

    files = sorted((dst / "_errors").rglob("*.parquet"))
    assert not [f for f in files if "_pending-" in str(f)]
    return sorted(o for f in files for o in pq.read_table(f).column("offset").to_pylist())


def test_an_upsert_writes_its_dead_letters(tmp_path):
    """The live rows that do not decode go to _errors/ as a records export sends them (that export's
    dead letters are checked against the deserializers' truth in test_typed_export)."""
    export(SCHEMAS_DEV, tmp_path / "records", format="iceberg", topic="mixed-bad", value_format="avro")
    report = export(SCHEMAS_DEV, tmp_path / "t", format="iceberg", mode="upsert", topic="mixed-bad",
                    value_format="avro")
    live = set(table_rows(tmp_path / "t").column("offset").to_pylist())
    want = [o for o in dead_offsets(tmp_path / "records") if o in live]
    assert want and dead_offsets(tmp_path / "t") == want
    assert sum(e["dead_letters"] for e in report["decoding"]) == len(want)
    report = export(SCHEMAS_DEV, tmp_path / "f", mode="upsert", topic="mixed-bad", value_format="avro")
    assert dead_offsets(tmp_path / "f") == want  # into Parquet files the same
