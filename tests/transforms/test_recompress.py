"""kfmt recompress: v2 data batches re-encoded with another codec or level, everything else kept.

Truth: the corpus (records as the Java consumer read them, batch header facts as the broker wrote
them), kafka-python as an independent decoder of every codec kfmt writes, `kfmt reindex` for the
companion files.
"""
from __future__ import annotations

import os
import types

import cramjam
import kafka.codec
import pytest
from support.cli import run_kfmt
from support.corpus import REAL_DIRS, REALKAFKA
from support.transform_runs import (
    SPARK,
    assert_companions_are_reindexs,
    batches_of,
    cat_json,
    corpus_magic,
    expected_v2_batches,
    kfmt_ok,
    log_dir_of,
    peer_records,
    records,
    transform,
    truth_as_v2,
    v2_layout,
    write_mixed,
)

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
# what a batch keeps through recompression: all of its header but the codec, CRC and size
KEPT = ("magic", "base_offset", "last_offset", "timestamp_type", "max_timestamp", "base_timestamp",
        "partition_leader_epoch", "producer_id", "producer_epoch", "base_sequence", "records_count",
        "is_transactional", "is_control", "has_delete_horizon")


@pytest.fixture(autouse=True)
def snappy_for_kafka_python(monkeypatch):
    """python-snappy's raw-block API, served by cramjam, so kafka-python can run its xerial code."""
    if not kafka.codec.has_snappy():
        monkeypatch.setattr(kafka.codec, "snappy", types.SimpleNamespace(
            compress=lambda data: bytes(cramjam.snappy.compress_raw(bytes(data))),
            decompress=lambda data: bytes(cramjam.snappy.decompress_raw(bytes(data)))))


def kept_facts(batches) -> list[tuple]:
    return [tuple(getattr(b.header, f) for f in KEPT) for b in batches]


@pytest.mark.parametrize("name", REAL_DIRS)
def test_every_corpus_partition_recompressed_with_zstd(tmp_path, name):
    src, out = REALKAFKA / name, tmp_path / "out"
    report = transform("recompress", src, out, "--compression", "zstd")
    assert cat_json(out) == (truth_as_v2(name) if corpus_magic(name) < 2 else cat_json(src))
    assert report["inputs"][0]["content_digest"] == report["outputs"][0]["content_digest"]
    before, after = batches_of(src), batches_of(out)
    for b in after:
        h = b.header
        assert h.magic == 2
        assert h.compression == (0 if h.is_control or h.records_count == 0 else CODECS["zstd"])
    if corpus_magic(name) == 2:  # every batch keeps its header facts; markers their bytes
        assert kept_facts(after) == kept_facts(before)
        src_markers = [b for b in before if b.header.is_control]
        assert [b.records for b in after if b.header.is_control] == [b.records for b in src_markers]
    else:  # converted by Kafka 4.0's rules first: the same batches as upgrade, in zstd
        assert [layout[:3] + layout[4:] for layout in v2_layout(out)] == [
            e[:3] + e[4:] for e in expected_v2_batches(name)]
    assert [p.name for p in sorted(out.glob("*.log"))] == [p.name for p in sorted(src.glob("*.log"))]
    kfmt_ok("verify", out, "--deep")
    assert_companions_are_reindexs(out, tmp_path)


@pytest.mark.parametrize("codec", sorted(CODECS))
@pytest.mark.parametrize("name", ["txn-v2-none-0", "v2-gzip-0", "compact-v2-none-0"])
def test_kafka_python_reads_every_codec_kfmt_writes(tmp_path, name, codec):
    src, out = REALKAFKA / name, tmp_path / "out"
    transform("recompress", src, out, "--compression", codec)
    assert {b.header.compression for b in batches_of(out) if not b.header.is_control
            and b.header.records_count} == {CODECS[codec]}
    assert peer_records(out) == peer_records(src)  # an independent decoder agrees
    assert records(out) == records(src)
    assert kept_facts(batches_of(out)) == kept_facts(batches_of(src))


def test_a_batch_already_in_the_codec_is_copied_unless_a_level_is_given(tmp_path):
    src = REALKAFKA / "v2-zstd-0"
    transform("recompress", src, tmp_path / "same", "--compression", "zstd")
    for log in src.glob("*.log"):
        assert (tmp_path / "same" / log.name).read_bytes() == log.read_bytes()
    report = transform("recompress", src, tmp_path / "level", "--compression", "zstd", "--level", 19)
    assert report["options"]["level"] == 19
    changed = [log.name for log in src.glob("*.log")
               if (tmp_path / "level" / log.name).read_bytes() != log.read_bytes()]
    assert len(changed) == len(list(src.glob("*.log")))
    assert records(tmp_path / "level") == records(src)
    assert peer_records(tmp_path / "level") == peer_records(src)


def test_delete_horizons_and_empty_batches_survive(tmp_path):
    src = REALKAFKA / "compact-v2-none-0"
    transform("recompress", src, tmp_path / "out", "--compression", "gzip", "--level", 1)
    before, after = batches_of(src), batches_of(tmp_path / "out")
    horizons = [(b.header.base_offset, b.header.base_timestamp) for b in before
                if b.header.has_delete_horizon]
    assert len(horizons) == 5
    assert [(b.header.base_offset, b.header.base_timestamp) for b in after
            if b.header.has_delete_horizon] == horizons


def test_legacy_entries_are_converted_then_recompressed(tmp_path):
    src = write_mixed(tmp_path / "mixed-0")
    transform("recompress", src, tmp_path / "out", "--compression", "snappy")
    out_batches = batches_of(tmp_path / "out")
    assert {b.header.magic for b in out_batches} == {2}
    assert len(out_batches) == len(batches_of(src))  # one v2 batch per legacy entry, as 4.0 makes them
    data = [b for b in out_batches if not b.header.is_control]
    assert {b.header.compression for b in data} == {CODECS["snappy"]}
    assert [b.header.compression for b in out_batches if b.header.is_control] == [0, 0]
    assert peer_records(tmp_path / "out") == [(o, -1 if t is None else t, k, v, h)
                                              for o, t, k, v, h in peer_records(src)]
    kfmt_ok("verify", tmp_path / "out", "--deep")
    assert_companions_are_reindexs(tmp_path / "out", tmp_path)


@pytest.mark.parametrize("args, message", [
    (["--compression", "snappy", "--level", "1"], "snappy has no compression levels"),
    (["--compression", "gzip", "--level", "10"], "outside gzip's levels 1..9"),
    (["--compression", "zstd", "--level", "23"], "outside zstd's levels"),
    (["--compression", "brotli"], "unknown compression 'brotli' (known: gzip, lz4, none, snappy, zstd)"),
    ([], "required"),
])
def test_usage_errors_exit_2(tmp_path, args, message):
    src = write_mixed(tmp_path / "mixed-0")
    result = run_kfmt("recompress", src, tmp_path / "out", "--master", "inprocess", *args)
    assert result.code == 2 and message in result.err
    assert sorted(os.listdir(tmp_path)) == ["mixed-0"]


def test_dry_run_says_what_each_kind_of_entry_becomes(tmp_path):
    src = write_mixed(tmp_path / "mixed-0")
    out = kfmt_ok("recompress", src, tmp_path / "out", "--compression", "lz4", "--level", 12,
                  "--dry-run", "--master", "inprocess")
    assert not (tmp_path / "out").exists()
    assert "v2 none control: 2 entries" in out and "Kafka never compresses control batches" in out
    assert "v1 gzip: 1 entries" in out and "converted by Kafka 4.0's rules, then lz4 level 12" in out
    assert "v2 gzip: 1 entries" in out and "re-encoded with lz4 level 12" in out


@pytest.mark.spark
def test_a_log_directory_recompressed_on_spark(tmp_path):
    names = [n for n in ("v1-snappy-0", "v2-none-0", "txn-v2-none-0", "v2-lz4-0") if n in REAL_DIRS]
    src = log_dir_of(tmp_path, names)
    report = transform("recompress", src, tmp_path / "out", "--compression", "lz4",
                       master=SPARK)
    assert report["totals"]["content_unchanged"] and report["options"]["compression"] == "lz4"
    for name in names:
        assert peer_records(tmp_path / "out" / name) == peer_records(src / name)
        assert records(tmp_path / "out" / name) == records(src / name)
        assert {b.header.compression for b in batches_of(tmp_path / "out" / name)
                if not b.header.is_control} == {CODECS["lz4"]}
    kfmt_ok("verify", tmp_path / "out", "--deep")
    assert_companions_are_reindexs(tmp_path / "out", tmp_path)


@pytest.mark.parametrize("codec", sorted(set(CODECS) - {"none"}))
@pytest.mark.parametrize("name", ["v0-none-0", "v1-none-0"])
def test_uncompressed_legacy_messages_become_batches_of_the_codec(tmp_path, name, codec):
    """One-message legacy entries go through the run kernels and are compressed batch by batch
    (kfmt.format.compress_runs): Kafka 4.0's records, read back by kfmt and by kafka-python."""
    src, out = REALKAFKA / name, tmp_path / "out"
    transform("recompress", src, out, "--compression", codec)
    out_batches = batches_of(out)
    assert len(out_batches) == len(batches_of(src))  # one v2 batch per message
    assert {(b.header.magic, b.header.compression) for b in out_batches} == {(2, CODECS[codec])}
    assert cat_json(out) == truth_as_v2(name)
    assert peer_records(out) == records(out)  # an independent decoder agrees
    kfmt_ok("verify", out, "--deep")
