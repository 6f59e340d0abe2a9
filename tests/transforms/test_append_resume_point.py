"""Where `kfmt export --append` resumes: the mark a run records is a batch boundary of the log it read,
and a later run never exports a record twice, even when the log was rewritten in between so that the
mark falls inside a batch (batches regrouped), or compacted by Kafka's log cleaner (the corpus's
compacted topic and its uncompacted twin: the same records before and after a real cleaning), or when
read_committed stopped the earlier run at an open transaction."""
from __future__ import annotations

import shutil

import pyarrow.compute as pc
import pyarrow.dataset as ds
from support.corpus import REALKAFKA
from support.typed_inputs import write_partition

from kfmt.api.commands import export


def exported_offsets(dst) -> list[int]:
    table = ds.dataset(dst, partitioning="hive").to_table(columns=["offset"])
    return sorted(table.column("offset").to_pylist())


def records(n: int) -> list[tuple[bytes, bytes]]:
    return [(b"k%d" % (i % 4), b"v%d" % i) for i in range(n)]


def test_a_mark_inside_a_regrouped_batch_exports_nothing_twice(tmp_path):
    logs, dst = tmp_path / "logs", tmp_path / "out"
    write_partition(logs / "t-0", records(10), batch_records=3)  # batches 0-2, 3-5, 6-8, 9
    first = export(logs, dst, format="parquet")
    assert first["totals"]["output_records"] == 10
    write_partition(logs / "t-0", records(15), batch_records=4)  # now 0-3, 4-7, 8-11, 12-14: 10 inside
    report = export(logs, dst, format="parquet", append=True)
    assert exported_offsets(dst) == list(range(15))
    assert report["totals"]["output_records"] == 5
    (entry,) = report["inputs"]
    assert entry["left_out_records"] == {"below_resume_offset": 2}  # offsets 8 and 9, read again


def test_a_mark_inside_a_batch_of_a_table_export(tmp_path):
    import pyiceberg  # noqa: F401
    from pyiceberg.catalog.sql import SqlCatalog

    logs, dst = tmp_path / "logs", tmp_path / "t"
    write_partition(logs / "t-0", records(10), batch_records=3)
    export(logs, dst, format="iceberg")
    write_partition(logs / "t-0", records(15), batch_records=4)
    export(logs, dst, format="iceberg", append=True)
    catalog = SqlCatalog("kfmt", uri=f"sqlite:///{dst}/_catalog.db", warehouse=f"file://{dst}/warehouse")
    offsets = catalog.load_table("kafka.records").scan().to_arrow().column("offset").to_pylist()
    assert sorted(offsets) == list(range(15))


def test_kafkas_log_cleaner_keeps_the_marks_on_batch_boundaries(tmp_path):
    """Run 1 reads the uncompacted twin cut at a segment; the real cleaner then compacted the topic;
    run 2 appends from the compacted log: each offset once, the compacted records from the mark on."""
    twin, cleaned = REALKAFKA / "compact-v2-none-twin-0", REALKAFKA / "compact-v2-none-0"
    logs, dst = tmp_path / "logs", tmp_path / "out"
    bases = sorted(int(p.stem) for p in twin.glob("*.log"))
    cut = bases[len(bases) // 2]
    shutil.copytree(twin, logs / "c-0")
    for path in (logs / "c-0").iterdir():
        if path.stem.isdigit() and int(path.stem) >= cut:
            path.unlink()
    export(logs, dst, format="parquet")
    before = exported_offsets(dst)
    assert before == list(range(cut))
    shutil.rmtree(logs / "c-0")
    shutil.copytree(cleaned, logs / "c-0")
    report = export(logs, dst, format="parquet", append=True)
    assert report["inputs"][0]["left_out_records"].get("below_resume_offset") is None
    kept = ds.dataset(REALKAFKA / "compact-v2-none-0.truth" / "kept.jsonl.gz", format="json").to_table()
    want = sorted(set(range(cut)) | set(pc.filter(kept.column("offset"),
                                                    pc.greater_equal(kept.column("offset"), cut)).to_pylist()))
    assert exported_offsets(dst) == want
