"""kfmt upgrade: v0/v1 to v2 by Kafka 4.0's rules (docs/format.md §16.3), checked against independent truth.

* The realkafka corpus: every v0/v1 partition upgraded as one log directory (on Spark, as the issue
  asks) must read back as the Java consumer read the originals (v0's NoTimestampType becoming
  CreateTime -1), verify clean, carry the companion files `kfmt reindex` builds for it, and hold
  exactly the batches 4.0 makes: one per source entry listed by kafka-dump-log (its deep iteration
  names each entry's inner offsets), with the entry's codec and timestamps.
* Peers: python-lz4 (which checks the LZ4 header checksum Kafka's v0 frames get wrong) and
  kafka-python, which builds the synthetic mixed-magic and transactional logs and reads outputs.
* The run's contract (CLI.md): dry run, exit codes, nothing published on bad data or a digest
  mismatch, the report, S3 URLs.

Helpers here are shared with test_resegment.py and test_recompress.py.
"""
from __future__ import annotations

import json
import os
import re
import struct
from pathlib import Path

import lz4.frame
import pytest
from support.cli import run_kfmt
from support.corpus import REAL_DIRS, REALKAFKA
from support.corpus_truth import consumer_records
from support.transform_runs import (
    MIXED,
    NOW_MS,
    SPARK,
    T0,
    assert_companions_are_reindexs,
    batches_of,
    cat_json,
    corpus_magic,
    expected_v2_batches,
    kfmt_ok,
    log_dir_of,
    peer_legacy,
    peer_records,
    records,
    transform,
    truth_as_v2,
    v2_layout,
    write_mixed,
)

from kfmt.format import segment
from kfmt.format.model import TimestampType, make_records
from kfmt.storage.store import open_storage
from kfmt.transforms.report import REPORT_NAME

LZ4_MAGIC = b"\x04\x22\x4d\x18"


# --- helpers (also used by test_resegment.py and test_recompress.py) ---


LEGACY_DIRS = [d for d in REAL_DIRS if corpus_magic(d) < 2]


# --- what Kafka 4.0 makes of each entry, from kafka-dump-log's listing of the source ---


# --- the corpus, as one log directory, on Spark ---

@pytest.mark.spark
def test_every_legacy_corpus_partition_upgraded_as_one_log_directory_on_spark(tmp_path):
    assert len(LEGACY_DIRS) >= 11
    src = log_dir_of(tmp_path, LEGACY_DIRS)
    before = {p.name: sorted(os.listdir(p)) for p in src.iterdir() if p.is_dir()}
    report = transform("upgrade", src, tmp_path / "out", master=SPARK)
    out = tmp_path / "out"
    assert report["totals"]["content_unchanged"] and report["totals"]["partitions"] == len(LEGACY_DIRS)
    assert {p.name: sorted(os.listdir(p)) for p in src.iterdir() if p.is_dir()} == before  # SRC untouched
    kfmt_ok("verify", out, "--deep")
    by_topic: dict[str, list] = {}
    for r in cat_json(out):
        by_topic.setdefault(f"{r.pop('topic')}-{r.pop('partition')}", []).append(r)
    for name in LEGACY_DIRS:
        assert by_topic[name] == truth_as_v2(name), name
        assert v2_layout(out / name) == expected_v2_batches(name), name
        # the source's segments, by base offset, and their modification times
        assert sorted(p.name for p in (out / name).glob("*.log")) == sorted(
            p.name for p in (src / name).glob("*.log"))
        for log in (src / name).glob("*.log"):
            assert os.stat(out / name / log.name).st_mtime_ns // 10**6 == log.stat().st_mtime_ns // 10**6
    assert_companions_are_reindexs(out, tmp_path)
    assert (out / "meta.properties").read_bytes() == (src / "meta.properties").read_bytes()


# --- single partitions, in process ---

@pytest.mark.parametrize("name", ["v0-lz4-0", "v1-lz4-0"])
def test_lz4_frames_are_reencoded_with_the_correct_header_checksum(tmp_path, name):
    src_frames = [bytes(b) for b in _wrapper_values(REALKAFKA / name)]
    transform("upgrade", REALKAFKA / name, tmp_path / "out")
    out = [bytes(segment.entry_bytes(d, h))[61:] for d, h in _entries(tmp_path / "out")]
    assert len(out) == len(src_frames) == len(expected_v2_batches(name))
    # Kafka's LZ4 frame: FLG 0x60, BD 0x40, then HC = (xxh32(FLG BD) >> 8) & 0xff = 0x82 (docs/format.md §5.4)
    assert {p[:7] for p in out} == {LZ4_MAGIC + b"\x60\x40\x82"}
    for payload in out:
        lz4.frame.decompress(payload)  # python-lz4 checks the header checksum
    if name.startswith("v0"):  # the source frames carry v0's historical checksum, which it refuses
        assert {f[6] for f in src_frames} == {0x1A}
        with pytest.raises(RuntimeError):
            lz4.frame.decompress(src_frames[0])


def _entries(path: Path):
    for log in sorted(Path(path).glob("*.log")):
        data = log.read_bytes()
        for h in segment.scan(data, str(log)):
            yield data, h


def _wrapper_values(path: Path):
    """The compressed payloads (wrapper values) of a legacy partition's entries."""
    for data, h in _entries(path):
        entry = segment.entry_bytes(data, h)
        key_at = 18 if h.magic == 0 else 26
        klen = struct.unpack_from(">i", entry, key_at)[0]
        vat = key_at + 4 + max(klen, 0)
        vlen = struct.unpack_from(">i", entry, vat)[0]
        yield entry[vat + 4:vat + 4 + vlen]


@pytest.mark.parametrize("name", [d for d in REAL_DIRS if d.startswith("v2-")])
def test_v2_batches_are_copied_byte_for_byte(tmp_path, name):
    report = transform("upgrade", REALKAFKA / name, tmp_path / "out")
    for log in (REALKAFKA / name).glob("*.log"):
        assert (tmp_path / "out" / log.name).read_bytes() == log.read_bytes()
    assert report["inputs"][0]["content_digest"] == report["outputs"][0]["content_digest"]


@pytest.mark.parametrize("name", ["v1-none-0", "v0-none-0", "v1-logappendtime-gzip-0"])
def test_rebatch_groups_uncompressed_messages_and_keeps_every_offset(tmp_path, name):
    report = transform("upgrade", REALKAFKA / name, tmp_path / "out", "--rebatch", "--max-batch-bytes", 4000)
    out = tmp_path / "out"
    assert cat_json(out) == truth_as_v2(name)
    kfmt_ok("verify", out, "--deep")
    batches = batches_of(out)
    expected = expected_v2_batches(name)
    if name == "v1-logappendtime-gzip-0":  # nothing to group: wrappers stay one batch each
        assert v2_layout(out) == expected
        return
    assert len(batches) < len(expected) / 4  # grouped
    assert all(b.header.size <= 4000 or len(b) == 1 for b in batches)  # a larger message stays alone
    assert any(len(b) == 1 and b.header.size > 4000 for b in batches)
    assert sum(b.header.size for b in batches) < sum(s["log_bytes"] for s in report["inputs"])
    assert report["options"]["rebatch"] and report["totals"]["output_batches"] == len(batches)
    assert_companions_are_reindexs(out, tmp_path)


def test_rebatch_needs_rebatch():
    result = run_kfmt("upgrade", "a", "b", "--max-batch-bytes", "100")
    assert result.code == 2 and "--rebatch" in result.err


# --- mixed magics and transactions after legacy data (built with kafka-python, the peer) ---


def test_mixed_magic_log_with_transactions_after_legacy_data(tmp_path):
    src = write_mixed(tmp_path / "mixed-0")
    report = transform("upgrade", src, tmp_path / "out")
    out = tmp_path / "out"
    kfmt_ok("verify", out, "--deep")
    assert sorted(p.name for p in out.glob("*.log")) == sorted(p.name for p in src.glob("*.log"))
    # the records as kafka-python reads the source, v0's missing timestamps as -1 (CreateTime)
    expected = [(o, -1 if t is None else t, k, v, h) for o, t, k, v, h in peer_records(src)]
    assert [o for o, *_ in expected] == list(range(22)) + [23, 24, 25]
    assert [t for o, t, *_ in expected if o in (15, 16)] == [T0 + 999_999] * 2  # the append time
    assert records(out) == expected
    assert peer_records(out) == expected
    layout = [(b.header.magic, b.header.base_offset, b.header.last_offset, b.header.compression,
               b.header.timestamp_type, b.header.producer_id, b.header.is_control) for b in batches_of(out)]
    C, L = TimestampType.CREATE_TIME, TimestampType.LOG_APPEND_TIME
    assert layout == [
        (2, 0, 2, 0, C, 7, False), (2, 3, 4, 0, C, 7, False),  # v2: copied
        (2, 5, 8, 1, C, -1, False),  # the gzip wrapper: one batch
        (2, 9, 9, 0, C, -1, False), (2, 10, 10, 0, C, -1, False), (2, 11, 11, 0, C, -1, False),
        (2, 12, 14, 1, C, -1, False),  # v0 gzip: CreateTime -1
        (2, 15, 16, 3, L, -1, False),  # the LogAppendTime wrapper stays LogAppendTime
        (2, 17, 17, 0, C, -1, False), (2, 18, 18, 0, C, -1, False),
        (2, 19, 20, 0, C, 9, False), (2, 21, 21, 0, C, 7, False), (2, 22, 22, 0, C, 9, True),
        (2, 23, 25, 1, C, 9, False), (2, 26, 26, 0, C, 9, True)]
    # the v2 batches are the source's bytes
    src_v2 = {bytes(segment.entry_bytes(d, h)) for d, h in _entries(src) if h.magic == 2}
    out_v2 = {bytes(segment.entry_bytes(d, h)) for d, h in _entries(out)}
    assert src_v2 <= out_v2 and len(src_v2) == 7
    # the aborted transaction is indexed in the segment of its marker; epochs and producers follow
    assert (out / f"{17:020d}.txnindex").exists()
    assert (out / "leader-epoch-checkpoint").read_text() == "0\n3\n0 0\n1 19\n2 23\n"
    assert_companions_are_reindexs(out, tmp_path)
    assert report["totals"]["input_records"] == report["totals"]["output_records"] == 25


# --- the run's contract ---

def test_dry_run_prints_the_plan_and_writes_nothing(tmp_path):
    src = write_mixed(tmp_path / "mixed-0")
    out = kfmt_ok("upgrade", src, tmp_path / "out", "--dry-run", "--master", "inprocess")
    assert not (tmp_path / "out").exists()
    assert "v1 gzip: 1 entries" in out and "one v2 batch each, same codec (Kafka 4.0)" in out
    assert "v0 none: 2 entries" in out and "one single-record v2 batch each" in out
    assert "v2 none control: 2 entries" in out and "copied byte for byte" in out
    plan = json.loads(kfmt_ok("upgrade", src, tmp_path / "out", "--dry-run", "--master", "inprocess",
                              "--format", "json"))
    assert plan["command"] == "upgrade" and plan["partitions"][0]["segments"] == 3
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "x").write_text("x")
    result = run_kfmt("upgrade", src, tmp_path / "busy", "--dry-run", "--master", "inprocess")
    assert result.code == 2 and "not empty" in result.err


def test_bad_data_exits_65_naming_file_position_and_offset_and_publishes_nothing(tmp_path):
    src = write_mixed(tmp_path / "mixed-0")
    log = src / f"{5:020d}.log"
    data = bytearray(log.read_bytes())
    data[-3] ^= 0xFF  # inside the last entry of the segment (the LZ4 LogAppendTime wrapper)
    log.write_bytes(bytes(data))
    position = sum(len(e) for e in MIXED[1][1][:-1])
    result = run_kfmt("upgrade", src, tmp_path / "out", "--master", "inprocess")
    assert result.code == 65, result.err
    assert f"{log}, position {position}, offset 16" in result.err and "crc" in result.err
    assert len(result.err.strip().splitlines()) == 1
    assert os.listdir(tmp_path) == ["mixed-0"]  # no DST, no staging left behind


def _lossy(recs):  # a broken conversion: the last record's value is lost
    values = recs.column(3).to_pylist()
    return make_records(recs.column(0).to_pylist(), recs.column(1).to_pylist(), recs.column(2).to_pylist(),
                        values[:-1] + [None])


@pytest.mark.parametrize("path", ["one by one", "blocks"])
def test_a_content_digest_mismatch_fails_the_run_and_publishes_nothing(tmp_path, monkeypatch, path):
    from kfmt.format import wrapper_runs

    if path == "one by one":
        real = wrapper_runs.convert_batch

        def lossy(batch):
            header, recs = real(batch)
            return header, _lossy(recs)

        monkeypatch.setattr(wrapper_runs, "available", lambda: False)
        monkeypatch.setattr(wrapper_runs, "convert_batch", lossy)
    else:
        if not wrapper_runs.available():
            pytest.skip("the block path needs the kernels")
        kernels = wrapper_runs.native

        class LossyKernels:  # the record encoder of the block path loses a value
            def __getattr__(self, name):
                return getattr(kernels, name)

            def encode_v2_bodies(self, recs, table):
                return kernels.encode_v2_bodies(_lossy(recs), table)

        monkeypatch.setattr(wrapper_runs, "native", LossyKernels())
    result = run_kfmt("upgrade", write_mixed(tmp_path / "mixed-0"), tmp_path / "out", "--master", "inprocess")
    assert result.code == 1
    assert "differ from the records read" in result.err and "nothing was published" in result.err
    assert os.listdir(tmp_path) == ["mixed-0"]


def test_the_report(tmp_path):
    src = log_dir_of(tmp_path, ["v0-gzip-0", "v2-none-0"])
    report = transform("upgrade", src, tmp_path / "out")
    assert report["command"] == "upgrade" and report["duration_ms"] >= 0
    assert [p["topic"] for p in report["inputs"]] == ["v0-gzip", "v2-none"]
    for before, after, name in zip(report["inputs"], report["outputs"], ["v0-gzip-0", "v2-none-0"]):
        assert before["content_digest"] == after["content_digest"]
        assert before["records"] == after["records"] == len(consumer_records(name))
        assert before["segments"] == after["segments"] == len(list((REALKAFKA / name).glob("*.log")))
        assert before["path"] == str(src / name) and after["path"] == str(tmp_path / "out" / name)
    assert report["inputs"][0]["log_bytes"] == sum(p.stat().st_size
                                                   for p in (src / "v0-gzip-0").glob("*.log"))
    listed = {rel for rel in report["files"]}
    written = {str(p.relative_to(tmp_path / "out")) for p in (tmp_path / "out").rglob("*") if p.is_file()}
    assert listed == written - {REPORT_NAME}


def test_the_readme_command_upgrades_the_bundled_samples(tmp_path, monkeypatch):
    """`bin/kfmt upgrade samples/kafka-logs /tmp/x`: by default (--master auto) so small an input runs
    in process; every partition comes out v2 (its records unchanged, as the job's digest check and
    verify confirm)."""
    monkeypatch.delenv("KFMT_SPARK_MASTER", raising=False)
    samples = Path(__file__).resolve().parents[2] / "samples" / "kafka-logs"
    result = run_kfmt("upgrade", samples, tmp_path / "x")
    assert result.code == 0, result.err
    assert re.fullmatch(r"upgrade: 6 partition\(s\), \d+ batches and 2042 records in, \d+ batches and "
                        r"2042 records out, into \S+ \(\d+\.\d s, in process: input 476 KB below the "
                        r"64 MB threshold for a worker pool\)\n", result.out)
    kfmt_ok("verify", tmp_path / "x", "--deep")
    assert {b.header.magic for p in (tmp_path / "x").iterdir() if p.is_dir() for b in batches_of(p)} == {2}


@pytest.mark.s3
@pytest.mark.spark
def test_upgrade_from_s3_to_s3_on_spark(s3_server, s3_url, tmp_path):
    """Executors open object storage from the picklable options the CLI was given (Spark here has
    no s3a); the output is published with its manifest and holds what a local upgrade writes."""
    local_src = tmp_path / "logs"
    write_mixed(local_src / "mixed-0")
    storage, root = open_storage(s3_url, s3_server.storage_options)
    for f in sorted((local_src / "mixed-0").iterdir()):  # a plain upload, as `aws s3 sync` makes
        storage.write(storage.join(root, "logs", "mixed-0", f.name), f.read_bytes())
    kfmt_ok("upgrade", f"{s3_url}/logs", f"{s3_url}/out", "--no-progress", "--now", NOW_MS,
            *s3_server.cli_options(), "--master", SPARK)
    report = json.loads(bytes(storage.read(storage.join(root, "out", REPORT_NAME))))
    assert report["totals"]["content_unchanged"] and report["source"] == f"{s3_url}/logs"
    transform("upgrade", local_src, tmp_path / "local")
    written = {info.name: bytes(storage.read(info.path))
               for info in storage.walk(storage.join(root, "out", "mixed-0"))}
    assert written == {f.name: f.read_bytes() for f in (tmp_path / "local" / "mixed-0").iterdir()}
    assert run_kfmt("verify", f"{s3_url}/out", *s3_server.cli_options()).code == 0
    assert [json.loads(line)["offset"] for line in kfmt_ok(
        "cat", f"{s3_url}/out", "--format", "json", *s3_server.cli_options()).splitlines()] == \
        list(range(22)) + [23, 24, 25]


def test_what_a_task_sends_back_does_not_grow_with_its_batches(tmp_path):
    """A segment of uncompressed legacy messages becomes one v2 batch per message: the task's result
    (file records, counts, digests, segment facts) must not hold anything per batch."""
    import pickle

    from kfmt.storage.staging import StagedOutput
    from kfmt.storage.store import StorageSpec
    from kfmt.transforms.rewrite import RewriteSegmentsTask
    from kfmt.transforms.run import SourceSegment
    from kfmt.transforms.upgrade import UpgradeRewriter
    from kfmt.write.planner import RollPolicy

    def result_size(messages: int) -> int:
        src = tmp_path / f"legacy{messages}-0"
        src.mkdir()
        log = src / f"{0:020d}.log"
        log.write_bytes(b"".join(peer_legacy(1, 0, i, 1) for i in range(messages)))
        storage, dst = open_storage(str(tmp_path / f"out{messages}"))
        out = StagedOutput(storage, dst)
        try:
            task = RewriteSegmentsTask(0, (SourceSegment(StorageSpec.of(str(src)), str(log), str(log), 0,
                                                         log.stat().st_size, None),),
                                       out.target(), "", RollPolicy(index_interval_bytes=64), UpgradeRewriter())
            result = task.run()
        finally:
            out.abort()
        assert result.after.summary.batches == messages
        return len(pickle.dumps(result))

    small, large = result_size(500), result_size(10_000)
    assert large < small + 200 and large < 8000


# --- which engine: threads where the upgrade kernels do the work ---

@pytest.mark.parametrize("name", LEGACY_DIRS)
def test_threads_suffice_for_partitions_of_legacy_entries(name):
    """The engine's guess from each partition's first entry (kfmt.transforms.rewrite): uncompressed
    messages are converted in the upgrade kernels, which release the GIL, and so are compressed
    wrappers, a block at a time around their codec (kfmt.format.wrapper_runs); without the kernels
    everything is Python, where only worker processes run in parallel."""
    from kfmt.partition.layout import find_partitions
    from kfmt.transforms.rewrite import first_entry_kind
    from kfmt.transforms.run import SourceSegment
    from kfmt.transforms.upgrade import UpgradeRewriter

    storage, path = open_storage(str(REALKAFKA / name))
    part = find_partitions(storage, path)[0]
    first = next(s for s in part.segments if s.size)
    data = bytes(storage.read(first.log.path, 0, first.size))
    entry = next(segment.scan(data, str(first.log.path)))
    source = SourceSegment(storage.spec, first.log.path, name, first.base_offset, first.size, None)
    assert first_entry_kind(source) == (entry.magic, entry.compression)
    from kfmt.format.kernels import native

    assert UpgradeRewriter().in_kernels(*first_entry_kind(source)) == (native is not None)
