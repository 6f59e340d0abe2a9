"""Exporting the corpus with kfmt and the ground truth to compare the exported rows with: the Java
consumer's records, mapped to export rows."""
from __future__ import annotations

import base64
import datetime
import re
import shutil
from functools import cache
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
from support.cli import run_kfmt
from support.corpus import REALKAFKA
from support.corpus_truth import consumer_records

from kfmt.format.control import ControlType, control_key
from kfmt.rows.columns import DATE_FIELD, EXPORT_SCHEMA

TXN = "txn-v2-none-0"


TS_TYPES = {-1: "NoTimestampType", 0: "CreateTime", 1: "LogAppendTime"}


def export(src, dst, *args):
    return run_kfmt("export", src, dst, "--master", "inprocess", "--no-progress", *args)


def read_dataset(dst: Path, *, by_date: bool = False) -> pa.Table:
    """pyarrow's Hive dataset without options (docs/export.md), in the export schema's column order
    (+ the date as a date: pyarrow infers a string), sorted by topic and offset."""
    table = ds.dataset(dst, partitioning="hive").to_table()
    names = EXPORT_SCHEMA.names
    if by_date:
        table = table.set_column(table.schema.get_field_index("date"), DATE_FIELD,
                                 table.column("date").cast(pa.date32()))
        names = names + ["date"]
    return table.select(names).sort_by([("topic", "ascending"), ("offset", "ascending")])


def b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def as_consumer_records(table: pa.Table) -> list[dict]:
    """Export rows in the Java consumer's terms (the truth files' format)."""
    micros = table.column("timestamp").cast(pa.int64()).to_pylist()
    out = []
    for row, us in zip(table.to_pylist(), micros):
        assert us % 1000 == 0 and us // 1000 == row["timestamp_ms"]
        epoch = row["partition_leader_epoch"]
        out.append({"offset": row["offset"], "timestamp": us // 1000,
                    "timestampType": TS_TYPES[row["timestampType"]], "key": b64(row["key"]),
                    "value": b64(row["value"]),
                    "headers": [{"key": h["key"], "value": b64(h["value"])} for h in row["headers"] or []],
                    "leaderEpoch": None if epoch < 0 else epoch})
    return out


def utc_date(ms: int) -> datetime.date:
    """The UTC date of a Kafka timestamp as the consumer reports it (-1 for none: 1969-12-31)."""
    return (datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
            + datetime.timedelta(milliseconds=ms)).date()


def truth(name: str, committed: bool = False) -> list[dict]:
    return list(consumer_records(name, "records.read_committed" if committed else "records"))


@cache
def listing(name: str) -> dict:
    """kafka-dump-log's batch listing (dump-log.batches.txt): (segment base, position) -> fields."""
    out, base = {}, None
    for line in (REALKAFKA / f"{name}.truth" / "dump-log.batches.txt").read_text().splitlines():
        if line.startswith("Dumping "):
            base = int(line.split()[1].split(".")[0])
        elif "position:" in line:
            fields = dict(re.findall(r"(\w+): (\S+)", line))
            out[(base, int(fields["position"]))] = fields
    return out


def v2_entry(base: int, n: int, pid: int, *, transactional: bool = False, control: ControlType | None = None):
    """A v2 batch of n records at offsets base.. (a one-record marker when `control` is given)."""
    from kfmt.format.control import end_txn_marker_value
    from kfmt.format.model import BatchHeader, make_records
    from kfmt.plugin import registry

    keys = [control_key(control)] if control is not None else [b"k%d" % (base + i) for i in range(n)]
    values = [end_txn_marker_value(0)] if control is not None else [b"v"] * n
    header = BatchHeader(magic=2, base_offset=base, last_offset=base + len(keys) - 1,
                         base_timestamp=1700000000000 + base, max_timestamp=1700000000000 + base,
                         producer_id=pid, producer_epoch=0, base_sequence=-1 if control else 0,
                         is_transactional=transactional or control is not None,
                         is_control=control is not None)
    return registry.get().format_for(2).encode(header, make_records(
        list(range(base, base + len(keys))), [1700000000000 + base] * len(keys), keys, values))


def open_transaction_partition(root: Path) -> Path:
    """Two segments. Producer 10 commits 0-1; 20 writes without transactions; 11's transaction (4-5)
    is aborted by a marker in the second segment; 12's transaction (6) never ends, so the last
    stable offset is 6: a committed reader sees 0, 1, 2 and nothing from 6 on."""
    part = root / "open-0"
    part.mkdir(parents=True)
    (part / "00000000000000000000.log").write_bytes(b"".join([
        v2_entry(0, 2, 10, transactional=True), v2_entry(2, 1, 20),
        v2_entry(3, 1, 10, control=ControlType.COMMIT),
        v2_entry(4, 2, 11, transactional=True), v2_entry(6, 1, 12, transactional=True)]))
    (part / "00000000000000000007.log").write_bytes(b"".join([
        v2_entry(7, 1, 20), v2_entry(8, 1, 11, control=ControlType.ABORT), v2_entry(9, 1, 20)]))
    return part


def corrupted_copy(tmp_path) -> tuple[Path, int]:
    """v2-gzip-0 with one byte flipped inside a batch of its third segment: (dir, the batch's position)."""
    src = tmp_path / "v2-gzip-0"
    shutil.copytree(REALKAFKA / "v2-gzip-0", src)
    log = sorted(src.glob("*.log"))[2]
    entries = [(base, pos) for (base, pos) in listing("v2-gzip-0") if base == int(log.name.split(".")[0])]
    position = entries[1][1]
    data = bytearray(log.read_bytes())
    data[position + 70] ^= 0xFF  # inside the records, under the CRC
    log.write_bytes(bytes(data))
    return src, position
