"""Kafka 4.x's internal topics: `kfmt dump` with every decoder, as Kafka 4.1's kafka-dump-log prints
them (the default `--kafka-version`), and `kfmt offsets` for every group kind.

Truth: tests/data/realkafka4 (tests/data/README.md), the internal topics of a real Kafka 4.1 broker
in KRaft mode (classic and KIP-848 consumer groups, a KIP-932 share group, transactions under
transaction version 2, the metadata log and its snapshot), with kafka-dump-log 4.1's own output for
each of their files and what the AdminClient reported for group offsets. Record types the corpus
lacks (streams groups, the regular-expression record, some metadata records, tiered storage's
records) are encoded by a peer (kafka-python's codec of Kafka's message definitions) and decoded
by kfmt.
"""
from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.cli import run_kfmt
from support.corpus import TESTS
from support.kafka_messages import peer_encode, values_for

from kfmt.format import segment
from kfmt.format.internal_topics.protocol import read_message
from kfmt.format.internal_topics.share_state import SHARE_STATE_RECORDS
from kfmt.format.internal_topics.transactions import TRANSACTION_RECORDS
from kfmt.format.message_formats import LENIENT
from kfmt.inspect.dump.decoders.coordinator import GROUP_RECORDS, parse_offsets, parse_transaction_log, read_record

REALKAFKA4 = TESTS / "data" / "realkafka4"
DECODER_OF = {"__consumer_offsets-0": "--offsets-decoder",
              "__transaction_state-0": "--transaction-log-decoder",
              "__share_group_state-0": "--share-group-state-decoder",
              "__cluster_metadata-0": "--cluster-metadata-decoder"}
RECORDS_OF = {"__consumer_offsets-0": GROUP_RECORDS, "__transaction_state-0": TRANSACTION_RECORDS,
              "__share_group_state-0": SHARE_STATE_RECORDS}
TRUTH_OF_KIND = {"index": "dump-index.txt", "timeindex": "dump-timeindex.txt",
                 "snapshot": "dump-snapshot.txt", "txnindex": "dump-txnindex.txt"}


def _truth(part: str, name: str) -> str:
    path = REALKAFKA4 / f"{part}.truth" / name
    if not path.exists():
        path = path.with_name(name + ".gz")
    if path.suffix == ".gz":
        with gzip.open(path, "rt", encoding="utf-8") as f:
            return f.read()
    return path.read_text(encoding="utf-8")


def _dump(monkeypatch, part: str, kind: str, *args):
    """kafka-dump-log's invocation of the corpus: in the partition directory, every file of a kind
    in name order, in one --files list."""
    monkeypatch.chdir(REALKAFKA4 / part)
    names = sorted(p.name for p in Path(".").glob(f"*.{kind}"))
    return run_kfmt("dump", *args, "--files", ",".join(names))


@pytest.mark.parametrize("part", sorted(DECODER_OF))
def test_decoded_dump_equals_kafka_41(part, monkeypatch):
    result = _dump(monkeypatch, part, "log", DECODER_OF[part])
    assert result.code == 0, result.err
    assert result.out == _truth(part, "dump-log.deep.txt.gz")
    assert result.err == ""


@pytest.mark.parametrize("part", sorted(DECODER_OF))
def test_batch_dump_equals_kafka_41(part, monkeypatch):
    result = _dump(monkeypatch, part, "log")
    assert result.code == 0, result.err
    assert result.out == _truth(part, "dump-log.batches.txt")


CASES = [(part, kind) for part in sorted(DECODER_OF) for kind in TRUTH_OF_KIND
         if (REALKAFKA4 / f"{part}.truth" / TRUTH_OF_KIND[kind]).exists()]


@pytest.mark.parametrize("part,kind", CASES)
def test_companion_dumps_equal_kafka_41(part, kind, monkeypatch):
    result = _dump(monkeypatch, part, kind)
    assert result.code == 0, result.err
    assert result.out == _truth(part, TRUTH_OF_KIND[kind])


def test_kraft_snapshots_equal_kafka_41(monkeypatch):
    result = _dump(monkeypatch, "__cluster_metadata-0", "checkpoint", "--cluster-metadata-decoder")
    assert result.out == _truth("__cluster_metadata-0", "dump-checkpoint.deep.txt")
    monkeypatch.chdir(REALKAFKA4)
    result = run_kfmt("dump", "--cluster-metadata-decoder", "--files", "bootstrap.checkpoint")
    assert result.out == (REALKAFKA4 / "bootstrap.checkpoint.truth.txt").read_text(encoding="utf-8")


def test_every_file_kind_of_the_corpus_is_compared():
    assert len(CASES) == 13  # 4 dirs x index, timeindex, snapshot; __consumer_offsets' txnindex
    truth = _truth("__cluster_metadata-0", "dump-log.deep.txt.gz")
    for line in ("LeaderChange: {", "KRaftVersion {", "KRaftVoters {", '"CLEAR_ELR_RECORD"',
                 '"PARTITION_RECORD","version":2', '"eligibleLeaderReplicas":[1]'):
        assert line in truth


def test_kafka_36_rendering_of_the_same_files(monkeypatch):
    """--kafka-version 3.6 prints what 3.6's tool printed: its control type names, its offsets text
    (a record type it did not know as unknown::version=N), no share-group-state decoder."""
    meta = _dump(monkeypatch, "__cluster_metadata-0", "log", "--deep-iteration", "--kafka-version", "3.6")
    assert "controlType: LEADER_CHANGE(2)" in meta.out and "controlType: UNKNOWN(5)" in meta.out
    assert "LeaderChange:" not in meta.out
    offsets = _dump(monkeypatch, "__consumer_offsets-0", "log", "--offsets-decoder", "--kafka-version", "3.6")
    assert "key: group_metadata::group=d4-g-classic payload: " in offsets.out
    assert "key: unknown::version=5" in offsets.out and '"type":"5"' not in offsets.out
    share = _dump(monkeypatch, "__share_group_state-0", "log", "--share-group-state-decoder",
                  "--kafka-version", "3.6")
    assert share.code == 2 and share.err.count("\n") == 1 and "no --share-group-state-decoder" in share.err


_RECORD_LINE = re.compile(r"^\| offset: (\d+) .*?(?: key: (.*?))?(?: payload: (.*))?$")


@pytest.mark.parametrize("part", sorted(DECODER_OF))
def test_json_form_carries_what_the_text_says(part, monkeypatch):
    text = {}
    for line in _truth(part, "dump-log.deep.txt.gz").splitlines():
        m = _RECORD_LINE.match(line)
        if m and ("payload: " in line or " key: " in line):
            text[int(m[1])] = (m[2], m[3])
    result = _dump(monkeypatch, part, "log", DECODER_OF[part], "--format", "json")
    seen = {}
    for obj in map(json.loads, result.lines):
        for record in obj.get("records", []):
            if "decoded" not in record:
                continue
            d = record["decoded"]
            seen[record["offset"]] = (d["key"], d["payload"])
            if part == "__cluster_metadata-0":
                assert json.loads(d["payload"]) == d["record"]
            else:
                assert json.loads(d["key"]) == d["record"]["key"]
                assert d["payload"] == "<DELETE>" or json.loads(d["payload"]) == d["record"]["value"]
    assert seen == text and seen


def _records(part: str):
    for path in sorted((REALKAFKA4 / part).glob("*.log")):
        for batch in segment.batches(path.read_bytes(), str(path), LENIENT):
            if not batch.header.is_control:
                cols = batch.records.to_pydict()
                yield from zip(cols["key"], cols["value"])


@pytest.mark.parametrize("part,types", [
    ("__consumer_offsets-0", {1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13, 14, 15}),
    ("__transaction_state-0", {0}),
    ("__share_group_state-0", {0, 1}),
])
def test_schemas_account_for_every_byte(part, types):
    """Each record of the corpus decodes to its last byte (Kafka's readers ignore trailing bytes; a
    schema that missed a field would leave some), and every record type it holds is met."""
    records = RECORDS_OF[part]
    seen = set()
    for key, value in _records(part):
        record_type, _k, version, _v = read_record(records, key, value)
        seen.add(record_type)
        if value is not None:
            read_message(records[record_type][1], value[2:], version, exact=True)
    assert seen == types


# --- record types the corpus does not hold, from a peer's encoding --------------------------------

def _peer_cases():
    from kfmt.format.internal_topics.control import LEADER_CHANGE, VOTERS
    from kfmt.format.internal_topics.metadata import TYPES as METADATA
    from kfmt.format.internal_topics.remote_log import TYPES as REMOTE

    cases = [(f"group type {t}", value) for t, (_key, value) in GROUP_RECORDS.items()]
    cases += [(f"metadata {name}", schema) for name, schema in METADATA.values() if schema.fields]
    cases += [(f"remote {name}", schema) for name, schema in REMOTE.values()]
    cases += [("transaction log", TRANSACTION_RECORDS[0][1]), ("leader change", LEADER_CHANGE),
              ("voters", VOTERS)] + [(f"share state {t}", v) for t, (_k, v) in SHARE_STATE_RECORDS.items()]
    return cases


@pytest.mark.parametrize("name,schema", _peer_cases(), ids=lambda x: x if isinstance(x, str) else "")
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_peer_encoded_records_decode(name, schema, data):
    version = data.draw(st.integers(schema.valid[0], schema.valid[1]))
    values = data.draw(values_for(schema.fields, version))
    encoded = peer_encode(schema, values, version)
    assert read_message(schema, encoded, version, exact=True) == values


def test_streams_group_records_print_as_coordinator_json():
    """A streams group's record (type 17), encoded by the peer, prints as Kafka's other
    coordinator records do."""
    key_schema, value_schema = GROUP_RECORDS[17]
    defaults = {f.name: f.default_value() for f in value_schema.fields}
    key = (17).to_bytes(2, "big") + peer_encode(key_schema, {"groupId": "app-1"}, 0)
    value = (0).to_bytes(2, "big") + peer_encode(value_schema, defaults | {"epoch": 4}, 0)
    decoded = parse_offsets(key, value, 9)
    assert (decoded.key, decoded.payload) == ('{"type":"17","data":{"groupId":"app-1"}}',
                                              '{"version":"0","data":{"epoch":4,"metadataHash":0}}')


def test_streams_group_metadata_of_kafka_4_3_with_its_tagged_fields():
    """StreamsGroupMetadataValue as Kafka 4.2-4.3 lay it out, written here by the wire rules: epoch 7,
    metadataHash, then two tagged fields: validatedTopologyEpoch (tag 0, 4 bytes) and
    lastAssignmentConfigs (tag 1: a compact array of one {key, value}, its own empty tag section)."""
    configs = b"\x02" + b"\x15num.standby.replicas" + b"\x020" + b"\x00"
    value = (b"\x00\x00" + (7).to_bytes(4, "big") + bytes(range(1, 9))
             + b"\x02" + b"\x00\x04" + (0).to_bytes(4, "big") + b"\x01" + bytes([len(configs)]) + configs)
    key = (17).to_bytes(2, "big") + b"\x00\x05app-1"
    decoded = parse_offsets(key, value, 3)
    assert decoded.payload == ('{"version":"0","data":{"epoch":7,"metadataHash":72623859790382856,'
                               '"validatedTopologyEpoch":0,'
                               '"lastAssignmentConfigs":[{"key":"num.standby.replicas","value":"0"}]}}')
    unknown = parse_offsets((99).to_bytes(2, "big") + b"\x00\x01x", None, 9)
    assert (unknown.key, unknown.payload) == ("Unknown record type 99 at offset 9, skipping.", None)


def test_tagged_fields_kafka_added_after_4_1_print_in_schema_order():
    """Tagged fields of later brokers, written here by the wire rules: TransactionLogValue v1's
    nextProducerEpoch (tag 3) prints after producerEpoch, where Kafka's JsonConverter puts it, and
    KIP-1263's assignmentTimestamp (4.3, tag 0) after a consumer group's assignment epoch."""
    txn = (b"\x00\x01" + (5).to_bytes(8, "big")
           + b"\x00\x00" + (60000).to_bytes(4, "big") + b"\x04" + b"\x01"  # epoch 0, timeout, CompleteCommit, []
           + (1).to_bytes(8, "big") + (2).to_bytes(8, "big")
           + b"\x02" + b"\x02\x02\x00\x02" + b"\x03\x02\x00\x01")  # tags 2 (version 2) and 3 (epoch 1)
    decoded = parse_transaction_log(b"\x00\x00\x00\x03tx1", txn, 0)
    assert decoded.payload == ('{"version":"1","data":{"producerId":5,"producerEpoch":0,"nextProducerEpoch":1,'
                               '"transactionTimeoutMs":60000,"transactionStatus":4,"transactionPartitions":[],'
                               '"transactionLastUpdateTimestampMs":1,"transactionStartTimestampMs":2,'
                               '"clientTransactionVersion":2}}')
    target = b"\x00\x00" + (3).to_bytes(4, "big") + b"\x01\x00\x08" + (1791331200000).to_bytes(8, "big")
    decoded = parse_offsets(b"\x00\x06\x00\x01g", target, 0)
    assert decoded.payload == '{"version":"0","data":{"assignmentEpoch":3,"assignmentTimestamp":1791331200000}}'


# --- kfmt offsets -------------------------------------------------------------------------------------

def test_offsets_equal_the_admin_clients_for_every_group_kind():
    truth = json.loads(_truth("__consumer_offsets-0", "final-offsets.json"))
    expected = {}
    for group, g in truth["groups"].items():
        for tp, o in g["offsets"].items():
            if not tp.startswith("_"):
                expected[(group, tp)] = (o["offset"], o["metadata"], o["leader_epoch"], g["type"].lower())
    result = run_kfmt("offsets", REALKAFKA4, "--format", "json")
    assert result.code == 0, result.err
    found = {(o["group"], f"{o['topic']}-{o['partition']}"): (o["offset"], o["metadata"], o["leaderEpoch"],
                                                             o["groupType"])
             for o in map(json.loads, result.lines)}
    assert found == expected
    assert {kind for *_rest, kind in found.values()} == {"classic", "consumer", "share"}
    assert not {g for g, _tp in found} & set(truth["deleted_groups"])


def test_offsets_text_names_each_groups_type():
    listed = {}
    for line in _truth("__consumer_offsets-0", "groups.list.txt").splitlines()[1:]:
        group, kind = line.split()[:2]
        listed[group] = kind.lower()
    result = run_kfmt("offsets", REALKAFKA4)
    header, *rows = result.lines
    assert header.split("\t")[-1] == "GROUP-TYPE"
    assert {r.split("\t")[0]: r.split("\t")[-1] for r in rows} == listed
    share = [line.split() for line in _truth("__consumer_offsets-0", "share-groups.describe-offsets.txt")
             .splitlines() if line.strip()][1]  # the header, then the group's one partition
    assert [r.split("\t")[:4] for r in rows if r.endswith("\tshare")] == [share]


def test_topic_ids_of_the_metadata_log_match_the_partitions():
    """cluster_metadata.topic_ids names every internal topic with the id the broker wrote into its
    partition.metadata."""
    from kfmt.inspect.dump.cluster_metadata import topic_ids
    from kfmt.partition.layout import load_partition
    from kfmt.storage.store import open_storage

    storage, path = open_storage(str(REALKAFKA4 / "__cluster_metadata-0"), {})
    ids = topic_ids(load_partition(storage, path))
    for part in ("__consumer_offsets-0", "__transaction_state-0", "__share_group_state-0"):
        meta = (REALKAFKA4 / part / "partition.metadata").read_text()
        assert ids[part[:-2]] == re.search(r"topic_id: (\S+)", meta)[1]
    assert "d4-share" in ids and len(ids) == 16
