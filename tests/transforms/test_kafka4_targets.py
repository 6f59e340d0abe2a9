"""Writing for a Kafka 4.x KRaft cluster (docs/format.md §10, §12.6; docs/transforms.md "Writing for
Kafka 4.x"): every transform that writes partition directories stamps the target topic's id into
partition.metadata, given (`--topic-id`) or looked up by name in a copy of the target cluster's
metadata log (`--cluster-metadata`), and warns about any output a KRaft broker would set aside as a
stray; verify notes the same. Truth: the Kafka 4.1 corpus, whose partition directories a 4.1 broker
loaded (its own partition.metadata files, byte for byte) and whose topic ids `kafka-topics
--describe` printed; the 3.6 corpus's KRaft metadata log and its `--describe`.

Also: resegment refuses segment.bytes below 4.x's 1 MiB floor unless asked for 3.x, and an empty
cleanup.policy (Kafka 4.2, KIP-1161) keeps everything in retain and compact."""
from __future__ import annotations

import json
import re
import shutil

import pytest
from support.cli import run_kfmt
from support.corpus import REALKAFKA
from support.corpus4 import REALKAFKA4, described_topic_ids

from kfmt.partition.cluster_topics import read_cluster_topics
from kfmt.storage.store import open_storage

METADATA4 = REALKAFKA4 / "__cluster_metadata-0"
SOURCE_ID = "q4Ft5cS2R8KbU1oQ3v9xZw"  # another cluster's id for the same topic
COMMANDS = [("upgrade",), ("resegment", "--segment-bytes", "1048576"), ("recompress", "--compression", "zstd"),
            ("compact",), ("retain",), ("reindex",), ("salvage",)]


def described(truth_file) -> dict[str, tuple[str, dict[int, list[int]]]]:
    """topic -> (id, partition -> replicas) from `kafka-topics --describe` output."""
    out: dict = {}
    for line in truth_file.read_text().splitlines():
        if m := re.match(r"Topic: (\S+)\tTopicId: (\S+)", line):
            out[m[1]] = (m[2], {})
        elif m := re.match(r"\tTopic: (\S+)\tPartition: (\d+)\t.*Replicas: ([\d,]+)", line):
            out[m[1]][1][int(m[2])] = [int(r) for r in m[3].split(",")]
    return out


@pytest.mark.parametrize("metadata", [REALKAFKA4, REALKAFKA / "_internal" / "__cluster_metadata-0"],
                         ids=["kafka-4.1", "kafka-3.6"])
def test_topics_read_from_the_metadata_log_are_what_kafka_topics_described(metadata):
    truth = described((metadata if metadata.name.startswith("__") else metadata / "__cluster_metadata-0")
                      .with_name("__cluster_metadata-0.truth") / "topics.describe.txt")
    topics = read_cluster_topics(*open_storage(str(metadata)))
    assert {t: (topics.ids[t], topics.partitions[topics.ids[t]]) for t in topics.ids} == truth


def source_partition(tmp_path, metadata: bytes | None) -> object:
    """d4-txa-0 as another cluster would have it: its partition.metadata replaced (or gone)."""
    src = tmp_path / "src" / "d4-txa-0"
    shutil.copytree(REALKAFKA4 / "d4-txa-0", src)
    (src / "partition.metadata").unlink()
    if metadata is not None:
        (src / "partition.metadata").write_bytes(metadata)
    return src


def run(command, src, dst, *args):
    result = run_kfmt(command[0], src, dst, *command[1:], "--master", "inprocess", "--no-progress",
                      "--format", "json", *args)
    assert result.code == 0, result.err
    return result, json.loads(result.out)


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_stamped_from_the_target_clusters_metadata_as_the_broker_wrote_it(tmp_path, command):
    """The stamped file is byte for byte the one the 4.1 broker wrote for the topic it loaded."""
    src = source_partition(tmp_path, f"version: 0\ntopic_id: {SOURCE_ID}".encode())
    result, report = run(command, src, tmp_path / "out", "--cluster-metadata", METADATA4)
    assert (tmp_path / "out" / "partition.metadata").read_bytes() == \
        (REALKAFKA4 / "d4-txa-0" / "partition.metadata").read_bytes()
    assert "stray" not in result.err
    assert any("stamped with topic d4-txa's id" in n for n in report["notes"])


@pytest.mark.parametrize("given", ["ID", "d4-txa=ID"])
def test_stamped_from_topic_id(tmp_path, given):
    src = source_partition(tmp_path, None)
    topic_id = described_topic_ids()["d4-txa"]
    result, _ = run(("upgrade",), src, tmp_path / "out", "--topic-id", given.replace("ID", topic_id))
    assert (tmp_path / "out" / "partition.metadata").read_bytes() == \
        (REALKAFKA4 / "d4-txa-0" / "partition.metadata").read_bytes()
    assert result.err == ""


# salvage copies what it finds when no target is given (it judges nothing then): not here
@pytest.mark.parametrize("command", [c for c in COMMANDS if c[0] != "salvage"], ids=lambda c: c[0])
def test_no_topic_id_is_a_stray_and_warned_about(tmp_path, command):
    src = source_partition(tmp_path, None)
    result, report = run(command, src, tmp_path / "out")
    assert not (tmp_path / "out" / "partition.metadata").exists()
    warning = [line for line in result.err.splitlines() if "d4-txa-0.<uuid>-stray" in line]
    assert len(warning) == 1 and "no partition.metadata" in warning[0] and "--topic-id" in warning[0]
    assert any("d4-txa-0.<uuid>-stray" in n for n in report["notes"])


def test_the_source_id_is_kept_without_a_target_and_said(tmp_path):
    src = source_partition(tmp_path, f"version: 0\ntopic_id: {SOURCE_ID}".encode())
    result, report = run(("reindex",), src, tmp_path / "out")
    assert (tmp_path / "out" / "partition.metadata").read_bytes() == (src / "partition.metadata").read_bytes()
    assert result.err == "" and any(f"copied from the source (topic id {SOURCE_ID})" in n for n in report["notes"])


def test_a_topic_or_partition_the_target_does_not_have_is_warned_about(tmp_path):
    src = tmp_path / "logs"
    shutil.copytree(REALKAFKA / "v2-zstd-0", src / "v2-zstd-0")
    shutil.copytree(REALKAFKA4 / "d4-txa-0", src / "d4-txa-7")
    result, _ = run(("reindex",), src, tmp_path / "out", "--cluster-metadata", REALKAFKA4)
    assert "has no topic v2-zstd" in result.err and "v2-zstd-0.<uuid>-stray" in result.err
    assert "has no partition 7" in result.err and "d4-txa-7.<uuid>-stray" in result.err


def test_a_dry_run_warns_too_and_a_failed_run_stays_one_line(tmp_path):
    src = source_partition(tmp_path, None)
    dry = run_kfmt("upgrade", src, tmp_path / "out", "--dry-run", "--master", "inprocess")
    assert dry.code == 0 and "d4-txa-0.<uuid>-stray" in dry.err
    log = sorted(src.glob("*.log"))[1]
    data = bytearray(log.read_bytes())
    data[100] ^= 0xFF
    log.write_bytes(bytes(data))
    failed = run_kfmt("upgrade", src, tmp_path / "out", "--master", "inprocess", "--no-progress")
    assert failed.code == 65 and len(failed.err.strip().splitlines()) == 1, failed.err


def test_bad_topic_ids_are_usage_errors(tmp_path):
    logs = tmp_path / "logs"
    for name in ("d4-txa-0", "d4-txb-0"):
        shutil.copytree(REALKAFKA4 / name, logs / name)
    for args in (["--topic-id", "xyz"], ["--topic-id", "AAAAAAAAAAAAAAAAAAAAAA"],
                 ["--topic-id", described_topic_ids()["d4-txa"]],  # no name, two topics
                 ["--topic-id", "nope=" + described_topic_ids()["d4-txa"]],
                 ["--cluster-metadata", tmp_path]):
        result = run_kfmt("reindex", logs, tmp_path / "out", *args)
        assert result.code in (2, 65) and len(result.err.strip().splitlines()) == 1, (args, result.err)
        assert not (tmp_path / "out").exists()


def test_restore_stamps_the_target_id(tmp_path):
    src = source_partition(tmp_path, f"version: 0\ntopic_id: {SOURCE_ID}".encode())
    archived = run_kfmt("archive", src.parent, tmp_path / "archive", "--master", "inprocess", "--no-progress",
                        "--include-active")
    assert archived.code == 0, archived.err
    result, _ = run(("restore",), tmp_path / "archive", tmp_path / "out", "--cluster-metadata", METADATA4)
    assert (tmp_path / "out" / "d4-txa-0" / "partition.metadata").read_bytes() == \
        (REALKAFKA4 / "d4-txa-0" / "partition.metadata").read_bytes()


# --- the source node's own files, for another cluster ----------------------------------------------

NODE_FILES = ("meta.properties", "bootstrap.checkpoint", "__cluster_metadata-0")


def log_directory(tmp_path):
    logs = tmp_path / "logs"
    shutil.copytree(REALKAFKA4, logs, ignore=shutil.ignore_patterns("*.truth", "__*_state-0", "__consumer_offsets-0"))
    return logs


def target_metadata(tmp_path, cluster_id: str):
    """A copy of the 4.1 cluster's metadata log in a log directory whose meta.properties says
    `cluster_id`: the same topics, as another cluster's metadata would name them."""
    target = tmp_path / "target"
    shutil.copytree(METADATA4, target / "__cluster_metadata-0")
    text = (REALKAFKA4 / "meta.properties").read_text()
    (target / "meta.properties").write_text(re.sub(r"cluster\.id=\S+", f"cluster.id={cluster_id}", text))
    return target


def node_warnings(result) -> list[str]:
    return [line for line in result.err.splitlines() if "meta.properties, bootstrap.checkpoint" in line]


@pytest.mark.parametrize("command", [("reindex",), ("upgrade",), ("compact",), ("salvage",)], ids=lambda c: c[0])
def test_for_another_cluster_the_source_nodes_files_are_left_out_and_said(tmp_path, command):
    """Kafka refuses a log directory whose meta.properties names another cluster
    (MetaPropertiesEnsemble.verify) or a data directory holding __cluster_metadata-0: an output for
    another cluster gets neither, the offset checkpoints and the partitions all the same."""
    logs = log_directory(tmp_path)
    result, report = run(command, logs, tmp_path / "out", "--cluster-metadata",
                         target_metadata(tmp_path, "T3RoZXJDbHVzdGVySWQwMA"))
    out = tmp_path / "out"
    assert not [n for n in NODE_FILES if (out / n).exists()]
    assert (out / "log-start-offset-checkpoint").exists() and (out / "d4-txa-0" / "partition.metadata").exists()
    [warning] = node_warnings(result)
    assert "cluster T3RoZXJDbHVzdGVySWQwMA" in warning and "kafka-storage.sh format" in warning
    left_out = [n for n in report["notes"] if "left out: the output is for another cluster" in n]
    assert all(any(name in n for n in left_out) for name in NODE_FILES)


def test_for_the_same_cluster_the_node_files_are_carried(tmp_path):
    logs = log_directory(tmp_path)
    cluster_id = re.search(r"cluster\.id=(\S+)", (REALKAFKA4 / "meta.properties").read_text())[1]
    result, _ = run(("reindex",), logs, tmp_path / "out", "--cluster-metadata", target_metadata(tmp_path, cluster_id))
    assert node_warnings(result) == []
    for name in ("meta.properties", "bootstrap.checkpoint", "__cluster_metadata-0/quorum-state"):
        assert (tmp_path / "out" / name).read_bytes() == (logs / name).read_bytes()


@pytest.mark.parametrize("same", [True, False])
def test_topic_ids_say_which_cluster_when_no_cluster_id_does(tmp_path, same):
    """--topic-id names no cluster: ids other than the source's own mean another cluster."""
    logs = tmp_path / "logs"
    for name in ("d4-txa-0", "__cluster_metadata-0", "meta.properties", "bootstrap.checkpoint"):
        (shutil.copytree if (REALKAFKA4 / name).is_dir() else shutil.copy)(REALKAFKA4 / name, logs / name)
    topic_id = described_topic_ids()["d4-txa"] if same else SOURCE_ID
    result, _ = run(("reindex",), logs, tmp_path / "out", "--topic-id", f"d4-txa={topic_id}")
    assert (tmp_path / "out" / "meta.properties").exists() == same
    assert len(node_warnings(result)) == (0 if same else 1)


def test_a_dry_run_says_it_too(tmp_path):
    dry = run_kfmt("reindex", log_directory(tmp_path), tmp_path / "out", "--dry-run", "--topic-id",
                   f"d4-txa={SOURCE_ID}", "--topic", "d4-txa")
    assert dry.code == 0 and len(node_warnings(dry)) == 1
    assert "skip meta.properties: left out: the output is for another cluster" in dry.out


# --- verify ------------------------------------------------------------------------------------

def test_verify_notes_the_partitions_a_broker_of_the_cluster_would_set_aside(tmp_path):
    logs = tmp_path / "logs"
    shutil.copytree(REALKAFKA4, logs, ignore=shutil.ignore_patterns("*.truth"))
    clean = json.loads(run_kfmt("verify", logs, "--format", "json").out)
    assert not [p for p in clean["problems"] if p["check"] == "stray"]
    (logs / "d4-txb-0" / "partition.metadata").write_text(f"version: 0\ntopic_id: {SOURCE_ID}")
    shutil.move(logs / "d4-zstd-0", logs / "d4-zstd-3")
    found = json.loads(run_kfmt("verify", logs, "--format", "json").out)
    strays = sorted(p["file"].split("/")[-2] for p in found["problems"] if p["check"] == "stray")
    assert strays == ["d4-txb-0", "d4-zstd-3"] and found["summary"]["ok"]
    other = json.loads(run_kfmt("verify", logs / "d4-txa-0", "--format", "json", "--cluster-metadata",
                                REALKAFKA / "_internal").out)
    assert [p["check"] for p in other["problems"] if p["check"] == "stray"] == ["stray"]


def test_verify_notes_a_log_directory_of_another_cluster(tmp_path):
    logs = log_directory(tmp_path)
    for cluster_id, notes in (("T3RoZXJDbHVzdGVySWQwMA", 1), (None, 0)):
        target = target_metadata(tmp_path / str(notes), cluster_id or
                                 re.search(r"cluster\.id=(\S+)", (logs / "meta.properties").read_text())[1])
        found = json.loads(run_kfmt("verify", logs, "--format", "json", "--cluster-metadata", target).out)
        noted = [p for p in found["problems"] if p["check"] == "cluster-id"]
        assert len(noted) == notes and found["summary"]["ok"]
        assert all("T3RoZXJDbHVzdGVySWQwMA" in p["message"] and p["file"].endswith("meta.properties")
                   for p in noted)


# --- Kafka 4.x topic configs -------------------------------------------------------------------

def test_resegment_refuses_segments_below_4x_floor_unless_for_3x(tmp_path):
    src = REALKAFKA4 / "d4-zstd-0"
    refused = run_kfmt("resegment", src, tmp_path / "out", "--segment-bytes", "16384")
    assert refused.code == 2 and "1048576" in refused.err and "--kafka-version" in refused.err
    assert not (tmp_path / "out").exists()
    assert run_kfmt("resegment", src, tmp_path / "out", "--segment-bytes", "1048575", "--kafka-version",
                    "4.0").code == 2
    for version in ("3.9", "3.6.2", "2"):
        out = tmp_path / f"out-{version}"
        assert run_kfmt("resegment", src, out, "--segment-bytes", "16384", "--kafka-version", version,
                        "--master", "inprocess").code == 0
        assert len(list(out.glob("*.log"))) > 1
    assert run_kfmt("resegment", src, tmp_path / "o", "--segment-bytes", "16384", "--kafka-version", "x").code == 2


def test_an_empty_cleanup_policy_keeps_everything(tmp_path):
    """KIP-1161: an empty cleanup.policy is infinite retention: retention.ms and retention.bytes do not
    apply, nothing is compacted; DeleteRecords (the log start offset) still removes data."""
    src = REALKAFKA4 / "d4-zstd-0"
    logs = sorted(p.name for p in src.glob("*.log"))
    _, kept = run(("retain", "--retention-bytes", "0", "--retention-ms", "0", "--cleanup-policy", ""), src,
                  tmp_path / "kept")
    assert sorted(p.name for p in (tmp_path / "kept").glob("*.log")) == logs
    assert any("has no 'delete'" in n for n in kept["partitions"][0]["notes"])
    _, deleted = run(("retain", "--retention-bytes", "0", "--cleanup-policy", "delete,compact"), src,
                     tmp_path / "deleted")
    assert len(deleted["partitions"][0]["deleted"]) == len(logs) - 1
    _, moved = run(("retain", "--log-start-offset", "200", "--cleanup-policy", ""), src, tmp_path / "moved")
    assert moved["partitions"][0]["deleted"] and moved["partitions"][0]["log_start_offset"] == 200
    compact_src = tmp_path / "alone" / "d4-compact-0"
    shutil.copytree(REALKAFKA4 / "d4-compact-0", compact_src)
    _, compacted = run(("compact", "--now", "1795922960000", "--cleanup-policy", ""), compact_src,
                       tmp_path / "compacted")
    entry = compacted["partitions"][0]
    assert not entry["cleanable"] and entry["first_uncleanable_is"] == "cleanup.policy without compact"
    assert run_kfmt("retain", src, tmp_path / "bad", "--cleanup-policy", "forever").code == 2
