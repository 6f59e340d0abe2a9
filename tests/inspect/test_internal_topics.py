"""Kafka 3.6's internal topics: `kfmt dump --kafka-version 3.6 --offsets-decoder /
--transaction-log-decoder / --cluster-metadata-decoder` and `kfmt offsets`.

Truth: the realkafka corpus' `_internal/` part, written by a real Kafka 3.6.0 broker (its README
says what each scenario did): kafka-dump-log's own output for every internal-topic segment and
KRaft snapshot with the matching decoder, AdminClient's committed offsets (`final-offsets.json`) and
kafka-consumer-groups' view, for the main run and for a compacted run of the same scenario. Kafka
4.x's topics are tests/inspect/test_internal_topics_4x.py's.
"""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.cli import run_kfmt
from support.corpus import REALKAFKA

from kfmt.format import segment
from kfmt.format.message_formats import LENIENT
from kfmt.inspect.dump.decoders import jackson
from kfmt.inspect.dump.decoders.metadata import read_record
from kfmt.inspect.dump.decoders.offsets import read_key
from kfmt.inspect.dump.decoders.transactions import read_value as read_txn_value

INTERNAL = REALKAFKA / "_internal"
DECODER_OF = {"__consumer_offsets": "--offsets-decoder",
              "__transaction_state": "--transaction-log-decoder",
              "__cluster_metadata": "--cluster-metadata-decoder"}
RUNS = ("", "_cleaned-run/")
RECORD_LINE = re.compile(r"^\| offset: (\d+) .*?(?: key: (.*?))?(?: payload: (.*))?$")


def dump_cases() -> list:
    """(partition dir relative to _internal, file name, decoder flag, truth path) for every .log
    and .checkpoint file kafka-dump-log was run on with a decoder, and bootstrap.checkpoint."""
    cases = []
    for run in RUNS:
        for topic, flag in DECODER_OF.items():
            part = f"{run}{topic}-0"
            for truth in sorted((INTERNAL / f"{part}.truth" / "dump").glob("*.deep.txt")):
                name = truth.name[:-len(".deep.txt")]
                cases.append(pytest.param(part, name, flag, str(truth), id=f"{part}/{name}"))
    cases.append(pytest.param(".", "bootstrap.checkpoint", "--cluster-metadata-decoder",
                              str(INTERNAL / "bootstrap.checkpoint.truth.txt"),
                              id="bootstrap.checkpoint"))
    return cases


CASES = dump_cases()


def _dump(monkeypatch, part: str, name: str, *args):
    monkeypatch.chdir(INTERNAL / part)
    return run_kfmt("dump", *args, "--kafka-version", "3.6", "--deep-iteration", "--print-data-log",
                    "--files", name)


def _gap_blocks(text: str) -> list[tuple[str, ...]]:
    """kafka-dump-log's non-consecutive-offset summaries, each file named by its name alone (the
    truth keeps the path Kafka ran with)."""
    blocks = []
    for line in text.splitlines():
        if line.startswith("Non-consecutive offsets in "):
            blocks.append([f"Non-consecutive offsets in {line.rsplit('/', 1)[-1]}"])
        else:
            blocks[-1].append(line)
    return sorted(tuple(b) for b in blocks)


def test_every_decoder_truth_is_covered():
    # 5 + 4 + 3 (main run) + 3 + 2 (compacted run) dumps, and bootstrap.checkpoint
    assert len(CASES) == 18
    assert {c.values[2] for c in CASES} == set(DECODER_OF.values())


@pytest.mark.parametrize("part,name,flag,truth", CASES)
def test_decoded_dump_equals_kafka(part, name, flag, truth, monkeypatch):
    result = _dump(monkeypatch, part, name, flag)
    assert result.code == 0, result.err
    assert result.out == Path(truth).read_text(encoding="utf-8")
    stderr_truth = Path(truth[:-len(".txt")] + ".stderr.txt")
    expected_err = stderr_truth.read_text(encoding="utf-8") if stderr_truth.exists() else ""
    assert _gap_blocks(result.err) == _gap_blocks(expected_err)


def _truth_records(truth: str) -> dict[int, tuple[str | None, str | None]]:
    """offset -> (key text, payload text) of the data records of a truth dump."""
    records = {}
    for line in Path(truth).read_text(encoding="utf-8").splitlines():
        m = RECORD_LINE.match(line)
        if m and "payload: " in line:
            records[int(m[1])] = (m[2], m[3])
    return records


@pytest.mark.parametrize("part,name,flag,truth", CASES)
def test_json_form_carries_the_same_content(part, name, flag, truth, monkeypatch):
    result = _dump(monkeypatch, part, name, flag, "--format", "json")
    assert result.code == 0, result.err
    expected = _truth_records(truth)
    seen = {}
    for line in result.lines:
        obj = json.loads(line)
        for record in obj.get("records", []):
            if "decoded" in record:
                decoded = record["decoded"]
                seen[record["offset"]] = (decoded["key"], decoded["payload"])
                _check_structure(flag, decoded)
            else:
                assert obj["isControl"]
    assert seen == expected and seen


def _check_structure(flag: str, decoded: dict) -> None:
    """The structured record says what the text says."""
    key, payload, record = decoded["key"], decoded["payload"], decoded["record"]
    if flag == "--cluster-metadata-decoder":
        assert json.loads(payload) == record
        return
    if payload == "<DELETE>":
        assert record["value"] is None
        return
    data = record["value"]["data"]
    if flag == "--transaction-log-decoder":
        assert key == f"transaction_metadata::transactionalId={record['key']['data']['transactionalId']}"
        assert payload.startswith(f"producerId:{data['producerId']},producerEpoch:{data['producerEpoch']},"
                                  f"state={record['value']['state']},")
    elif key.startswith("offset_commit::"):
        assert payload.split(",", 1)[0] == f"offset={data['offset']}"
    else:
        text = json.loads(payload)
        assert (text["protocolType"], text["protocol"], text["generationId"]) == (
            data["protocolType"], data["protocol"], data["generation"])
        for member in data["members"]:  # every member's decoded assignment is in the text
            partitions = [f"{tp['topic']}-{p}" for tp in member["assignment"]["data"]["assignedPartitions"]
                          for p in tp["partitions"]]
            assert f"{member['memberId']}=[{', '.join(partitions)}]" in text["assignment"]


def _internal_records():
    for run in RUNS:
        for topic in DECODER_OF:
            for path in sorted((INTERNAL / f"{run}{topic}-0").glob("*.log")) + sorted(
                    (INTERNAL / f"{run}{topic}-0").glob("*.checkpoint")):
                data = path.read_bytes()
                for batch in segment.batches(data, str(path), LENIENT):
                    if batch.header.is_control:
                        continue
                    cols = batch.records.to_pydict()
                    yield topic, list(zip(cols["key"], cols["value"]))


def test_schemas_account_for_every_byte(realkafka):
    """Each record decodes to its last byte (Kafka's readers would ignore trailing bytes; a schema
    that missed a field would leave some)."""
    from kfmt.inspect.dump.decoders.offsets import split_version
    from kfmt.format.internal_topics.protocol import read_message
    from kfmt.format.internal_topics.groups import GROUP_METADATA_VALUE, OFFSET_COMMIT_VALUE
    from kfmt.format.internal_topics.transactions import TRANSACTION_LOG_VALUE

    counts = {}
    for topic, records in _internal_records():
        for key, value in records:
            counts[topic] = counts.get(topic, 0) + 1
            if topic == "__cluster_metadata":
                read_record(value, exact=True)
                continue
            if value is None:
                continue
            version, body = split_version(value, "value")
            if topic == "__transaction_state":
                read_message(TRANSACTION_LOG_VALUE, body, version, exact=True)
            elif read_key(key)[0] == "offset_commit":
                read_message(OFFSET_COMMIT_VALUE, body, version, exact=True)
            else:
                read_message(GROUP_METADATA_VALUE, body, version, exact=True)
    assert min(counts.values()) > 40 and len(counts) == 3


def test_scala_orders_are_exercised(realkafka):
    """The Scala hash orders show in the corpus: shop-dev-offsets-tx's transaction value lists
    shop-dev-tx-out before __consumer_offsets, Kafka prints them the other way round (the HashSet's
    order, checked against Scala below); a group with two members prints them in HashMap order
    (checked against Scala in test_dump; here it happens to equal the log's)."""
    text = "".join(p.read_text(encoding="utf-8") for p in
                   (INTERNAL / "__consumer_offsets-0.truth" / "dump").glob("*.deep.txt"))
    assert re.search(r'"assignment":"\{shop-dev-rebalance-B-[^=]+=\[[^]]+\],shop-dev-rebalance-A-', text)
    txn = "".join(p.read_text(encoding="utf-8") for p in
                  (INTERNAL / "__transaction_state-0.truth" / "dump").glob("*.deep.txt"))
    assert "partitions=[__consumer_offsets-0,shop-dev-tx-out-0]" in txn
    assert "partitions=[shop-dev-tx-out-0,__consumer_offsets-0]" not in txn
    for path in (INTERNAL / "__transaction_state-0").glob("*.log"):
        data = path.read_bytes()
        for batch in segment.batches(data, str(path), LENIENT):
            for value in batch.records.column("value").to_pylist():
                if value is None:
                    continue
                topics = [t["topic"] for t in read_txn_value(value)[1]["transactionPartitions"] or []]
                if "__consumer_offsets" in topics and "shop-dev-tx-out" in topics:
                    assert topics == ["shop-dev-tx-out", "__consumer_offsets"]


def test_bootstrap_checkpoint_shows_all_its_records(realkafka, monkeypatch):
    result = _dump(monkeypatch, ".", "bootstrap.checkpoint", "--cluster-metadata-decoder")
    assert [line.split(" headerKeys: [] ")[1].split(" ")[0] for line in result.lines
            if line.startswith("| offset:")] == ["SnapshotHeader", "payload:", "payload:", "SnapshotFooter"]


def test_metadata_record_kafka_cannot_read_prints_kafkas_error_line():
    from kfmt.inspect.dump.decoders.metadata import parse

    decoded = parse(None, bytes([1, 99, 0]), 7)  # api key 99: no such record type
    assert decoded.key is None
    assert decoded.payload.startswith("Error at 7, skipping. ")


# --- Jackson's JSON text -----------------------------------------------------------------------

@pytest.mark.parametrize("value,java", [
    (2097152.0, "2097152.0"), (1e7, "1.0E7"), (1.5e-4, "1.5E-4"), (0.001, "0.001"), (100.0, "100.0"),
    (12345678.9, "1.23456789E7"), (0.1, "0.1"), (-2.5, "-2.5"), (1e21, "1.0E21"), (9999999.0, "9999999.0"),
])
def test_doubles_are_written_as_java_writes_them(value, java):
    assert jackson.java_double(value) == java  # Double.toString's documented layout


def test_strings_are_escaped_as_jackson_escapes_them():
    assert jackson.write({"a": "x\u0001\"\\é\n☃", "b": [None, True, 2]}) == \
        '{"a":"x\\u0001\\"\\\\é\\n☃","b":[null,true,2]}'


# --- kfmt offsets ------------------------------------------------------------------------------

def _final_offsets(run: str) -> dict:
    truth = json.loads((INTERNAL / f"{run}__consumer_offsets-0.truth" / "final-offsets.json").read_text("utf-8"))
    return {group: {tp: (o["offset"], o["metadata"], o["leader_epoch"]) for tp, o in g["offsets"].items()}
            for group, g in truth["groups"].items()}, truth["deleted_groups"]


def _kfmt_offsets(path) -> dict:
    result = run_kfmt("offsets", path, "--format", "json")
    assert result.code == 0, result.err
    found = {}
    for line in result.lines:
        o = json.loads(line)
        found.setdefault(o["group"], {})[f"{o['topic']}-{o['partition']}"] = (
            o["offset"], o["metadata"], o["leaderEpoch"])
    return found


@pytest.mark.parametrize("run", RUNS, ids=["main-run", "cleaned-run"])
def test_offsets_equal_the_admin_clients(run, realkafka):
    expected, deleted = _final_offsets(run)
    found = _kfmt_offsets(INTERNAL / run)
    assert found == expected
    assert deleted == ["shop-dev-g4"] and "shop-dev-g4" not in found
    assert sum(len(v) for v in found.values()) == 36


def test_offsets_of_one_partition_directory(realkafka):
    assert _kfmt_offsets(INTERNAL / "__consumer_offsets-0") == _final_offsets("")[0]


def test_offsets_agree_with_kafka_consumer_groups(realkafka):
    text = (INTERNAL / "__consumer_offsets-0.truth" / "consumer-groups.describe-offsets.txt").read_text("utf-8")
    expected = {}
    for line in text.splitlines():
        cols = line.split()
        if cols and cols[0] != "GROUP":
            expected[(cols[0], cols[1], int(cols[2]))] = int(cols[3])
    result = run_kfmt("offsets", INTERNAL)
    assert result.code == 0, result.err
    header, *rows = result.lines
    assert header.split("\t")[:4] == ["GROUP", "TOPIC", "PARTITION", "OFFSET"]
    found = {(c[0], c[1], int(c[2])): int(c[3]) for c in (r.split("\t") for r in rows)}
    assert found == expected and len(rows) == 36


def test_aborted_and_deleted_commits_are_in_the_log(realkafka, monkeypatch):
    """What kfmt offsets must leave out is there to leave out."""
    monkeypatch.chdir(INTERNAL / "__consumer_offsets-0")
    result = run_kfmt("dump", "--kafka-version", "3.6", "--offsets-decoder",
                      *sorted(p.name for p in Path(".").glob("*.log")))
    assert "metadata=txn-ABORTED-must-not-count" in result.out
    assert "endTxnMarker: ABORT" in result.out
    assert "key: group_metadata::group=shop-dev-g4 payload: <DELETE>" in result.out
    assert "key: offset_commit::group=shop-dev-g2,partition=shop-dev-audit-0 payload: <DELETE>" in result.out


def _copy_cut_before(tmp_path, offset: int) -> Path:
    """A copy of __consumer_offsets-0 whose last segment ends just before the batch at offset."""
    source = INTERNAL / "__consumer_offsets-0"
    target = tmp_path / "__consumer_offsets-0"
    shutil.copytree(source, target)
    last = sorted(target.glob("*.log"))[-1]
    data = last.read_bytes()
    cut = next(h.position for h in segment.scan(data, str(last)) if h.base_offset == offset)
    last.write_bytes(data[:cut])
    return target


def _marker_offset(kind: str) -> int:
    text = (INTERNAL / "__consumer_offsets-0.truth" / "dump" / "00000000000000000137.log.deep.txt").read_text("utf-8")
    return int(re.search(rf"^\| offset: (\d+) .*endTxnMarker: {kind} ", text, re.M)[1])


def test_open_transaction_commits_do_not_count(realkafka, tmp_path):
    # before the COMMIT marker of shop-dev-offsets-tx's first transaction: its commits are open,
    # so shop-dev-txgroup keeps the plain commit it made before
    part = _copy_cut_before(tmp_path, _marker_offset("COMMIT"))
    result = run_kfmt("offsets", part, "--format", "json")
    assert result.code == 0
    txgroup = [json.loads(line) for line in result.lines if '"shop-dev-txgroup"' in line]
    assert txgroup and {o["metadata"] for o in txgroup} == {"plain"}
    assert "wait for a transaction that has not ended" in result.err


def test_transaction_left_open_does_not_count(realkafka, tmp_path):
    # before the ABORT marker of the second transaction (the deletions come later, so only the
    # transactional group is compared): its commits are open and do not count either
    part = _copy_cut_before(tmp_path, _marker_offset("ABORT"))
    found = _kfmt_offsets(part)
    assert found["shop-dev-txgroup"] == _final_offsets("")[0]["shop-dev-txgroup"]
    assert {m for group in found.values() for _o, m, _e in group.values()} >= {"txn-committed"}


def test_offsets_without_consumer_offsets_is_a_usage_error(tmp_path):
    result = run_kfmt("offsets", tmp_path)
    assert result.code == 2
    assert result.err.count("\n") == 1 and "__consumer_offsets" in result.err


# --- Scala's HashSet order of a transaction's partitions ------------------------------------------

SCALA_SET_ORDER = """
import java.io.*; import java.nio.charset.StandardCharsets; import java.util.*;
import scala.jdk.javaapi.CollectionConverters;
public class ScalaSetOrder {
  // TopicPartition's hashCode and toString
  static final class TP { final String t; final int p; TP(String t, int p) { this.t = t; this.p = p; }
    public int hashCode() { return 31 * (31 + p) + t.hashCode(); }
    public boolean equals(Object o) { return o instanceof TP && ((TP) o).t.equals(t) && ((TP) o).p == p; }
    public String toString() { return t + "-" + p; } }
  public static void main(String[] a) throws Exception {
    // one set per line: groups "topic p,p,p" separated by ";"; each group is added with ++= of an
    // immutable Set made by .toSet, as TransactionLog.readTxnRecordValue adds a topic's partitions
    BufferedReader r = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    PrintStream out = new PrintStream(System.out, true, "UTF-8");
    String line;
    while ((line = r.readLine()) != null) {
      scala.collection.mutable.HashSet<TP> set = new scala.collection.mutable.HashSet<>();
      for (String group : line.split(";")) {
        String[] tp = group.split(" ");
        List<TP> list = new ArrayList<>();
        for (String p : tp[1].split(",")) list.add(new TP(tp[0], Integer.parseInt(p)));
        set.addAll(CollectionConverters.asScala(list).<TP>toSet());
      }
      StringBuilder b = new StringBuilder();
      scala.collection.Iterator<TP> it = set.iterator();
      while (it.hasNext()) { if (b.length() > 0) b.append(","); b.append(it.next()); }
      out.println(b);
    } } }
"""


@pytest.mark.needs("java", "scala")
def test_transaction_partition_order_equals_scala(tmp_path):
    import random
    import subprocess

    from support.tools import java, scala_library

    from kfmt.inspect.dump.decoders.scalaorder import topic_partition_set_order
    JAVA = java()
    rng = random.Random(14)
    sets = []
    for _ in range(80):
        topics = rng.sample([f"t{i}" for i in range(40)] + ["shop-dev-txa", "__consumer_offsets", "é☃"],
                            rng.randint(1, 8))
        sets.append([[(t, p) for p in rng.sample(range(60), rng.randint(1, 12))] for t in topics])
    (tmp_path / "ScalaSetOrder.java").write_text(SCALA_SET_ORDER)
    stdin = "".join(";".join(f"{g[0][0]} {','.join(str(p) for _t, p in g)}" for g in groups) + "\n"
                    for groups in sets)
    out = subprocess.run([JAVA, "-cp", scala_library(), str(tmp_path / "ScalaSetOrder.java")],
                         input=stdin, capture_output=True, text=True, check=True, timeout=120).stdout
    mine = [",".join(f"{t}-{p}" for t, p in topic_partition_set_order(groups)) for groups in sets]
    assert mine == out.splitlines()


def test_json_form_decodes_the_kraft_leader_change(realkafka, monkeypatch):
    # the text shows only `controlType: LEADER_CHANGE(2)`; the JSON form decodes it: node 1, the
    # only voter (controller.quorum.voters=1@..., quorum.status.txt's LeaderId 1)
    status = (INTERNAL / "__cluster_metadata-0.truth" / "quorum.status.txt").read_text("utf-8")
    leader = int(re.search(r"^LeaderId:\s+(\d+)", status, re.M)[1])
    monkeypatch.chdir(INTERNAL / "__cluster_metadata-0")
    result = run_kfmt("dump", "--kafka-version", "3.6", "--deep-iteration", "--format", "json",
                      "00000000000000000000.log")
    controls = [r["control"] for line in result.lines for r in json.loads(line).get("records", [])
                if "control" in r]
    assert controls[0] == {"type": "LEADER_CHANGE", "typeId": 2, "record": {
        "version": 0, "leaderId": leader, "voters": [{"voterId": leader}],
        "grantingVoters": [{"voterId": leader}]}}


# --- hostile records ---------------------------------------------------------------------------

def _corpus_samples() -> list[tuple[str, bytes | None, bytes | None]]:
    if not INTERNAL.is_dir():
        return []
    return [(topic, k, v) for topic, records in _internal_records() for k, v in records[:3]]


SAMPLES = _corpus_samples()


@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_damaged_records_fail_cleanly(data):
    """A flipped, cut or extended key/value makes a decoder report a DataError (offsets,
    transactions) or Kafka's error line (metadata), never another exception."""
    from kfmt.errors import DataError
    from kfmt.inspect.dump.decoders import DECODERS

    topic, key, value = data.draw(st.sampled_from(SAMPLES))
    target = data.draw(st.sampled_from(["key", "value"]) if key is not None else st.just("value"))
    raw = bytearray((key if target == "key" else value) or b"")
    action = data.draw(st.sampled_from(["flip", "cut", "extend"]))
    if action == "flip" and raw:
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] ^= data.draw(st.integers(1, 255))
    elif action == "cut":
        del raw[data.draw(st.integers(0, len(raw))):]
    else:
        raw += data.draw(st.binary(min_size=1, max_size=8))
    key, value = (bytes(raw), value) if target == "key" else (key, bytes(raw))
    parse = DECODERS["3.6"][{"__consumer_offsets": "offsets", "__transaction_state": "transaction-log",
                             "__cluster_metadata": "cluster-metadata"}[topic]]
    try:
        decoded = parse(key, value, 5)
    except DataError:
        assert topic != "__cluster_metadata"
        return
    assert decoded.payload is None or isinstance(decoded.payload, str)
