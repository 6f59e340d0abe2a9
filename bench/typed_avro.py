"""The typed export's benchmark (issue 24, "Fast"): a topic of Avro values written through the schema
registry's framing, exported typed, exported raw, and decoded by a plain script, in the same run.

    bench/run.sh typed 2G [--runs 3] [--plain-runs 1] [--root /tmp/kfmt-bench]
    python bench/typed_avro.py --size 2G ...          (the same, with the venv's python)

The input (generated on first use under --root, reused after): topic `orders` with two partitions,
written by bench/producer_logs.py's machinery (aiokafka's builders, lz4 batches of 1..400 records as an
idempotent producer writes them), its values Avro datums encoded by fastavro (an independent encoder)
and framed as Confluent's serializer frames them (magic byte 0, the 4-byte schema id, the datum), with
three versions of the schema (ids 1, 2, 3: fields added, an int promoted to long): 18 to 22 fields,
nested records, an array of records, a map, an enum, a fixed, optional fields and the logical types
decimal, date, time-micros, timestamp-millis and local-timestamp-micros. The schemas are in a schema
directory beside it (docs/typed-export.md "Where schemas come from").

Timed, each a fresh process, the three alternated run by run:
* typed: `kfmt export SRC DST --value-format avro --schemas DIR`;
* raw: `kfmt export SRC DST` (the same export with values as bytes);
* plain script: `python bench/typed_avro.py plain SRC DIR DST`: the values read with kfmt.read (raw),
  each decoded by fastavro's schemaless_reader against its writer schema and the latest one as reader,
  into pyarrow tables of the same type, written to Parquet.
Targets: typed <= 2x raw, plain script >= 5x typed. Every row gives the load average after it.
"""
from __future__ import annotations

import argparse
import datetime
import io
import json
import os
import random
import shutil
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import producer_logs  # noqa: E402
from processes import run  # noqa: E402

KFMT = os.path.join(ROOT, "bin", "kfmt")
TOPIC = "orders"
SHAPE = producer_logs.Shape(2, "lz4", 1, 400, 3.0, 1.0, idempotent=True)
DATUMS_PER_VERSION = 4000  # distinct values per schema version and partition, drawn at random after


def _field(name, kind, default="no"):
    f = {"name": name, "type": kind}
    if default != "no":
        f["default"] = default
    return f


def schema_versions() -> list[dict]:
    """Three versions of `com.example.Order`, each readable by the next (Avro's resolution rules)."""
    decimal = {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}
    address = {"type": "record", "name": "Address", "fields": [
        _field("street", "string"), _field("city", "string"), _field("zip", "string"),
        _field("country", {"type": "enum", "name": "Country", "symbols": ["DE", "FR", "US", "JP", "BR"]})]}
    item = {"type": "record", "name": "Item", "fields": [
        _field("sku", "string"), _field("quantity", "int"), _field("price", decimal)]}
    v1 = [_field("order_id", "string"), _field("customer_id", "long"),
          _field("created_at", {"type": "long", "logicalType": "timestamp-millis"}),
          _field("day", {"type": "int", "logicalType": "date"}),
          _field("at", {"type": "long", "logicalType": "time-micros"}),
          _field("local_at", {"type": "long", "logicalType": "local-timestamp-micros"}),
          _field("status", {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID", "SHIPPED", "DONE"]}),
          _field("total", decimal), _field("currency", "string"), _field("paid", "boolean"),
          _field("weight", "double"), _field("score", "float"), _field("quantity", "int"),
          _field("hash", {"type": "fixed", "name": "Hash", "size": 16}),
          _field("billing", address), _field("items", {"type": "array", "items": item}),
          _field("attributes", {"type": "map", "values": "string"}),
          _field("note", ["null", "string"], None)]
    v2 = [f if f["name"] != "quantity" else _field("quantity", "long") for f in v1] + [
        _field("coupon", ["null", "string"], None), _field("shipping", ["null", "Address"], None)]
    v3 = v2 + [_field("channel", ["null", "string"], None), _field("gift", "boolean", False)]
    return [{"type": "record", "name": "Order", "namespace": "com.example", "fields": fields}
            for fields in (v1, v2, v3)]


class AvroOrders(producer_logs.Producer):
    """Values: Confluent-framed Avro datums of the three versions (ids 1..3), drawn from a pool
    encoded once per partition; keys and headers as producer_logs' records have them."""

    def __init__(self, rng: random.Random):
        import fastavro

        self.rng = rng
        self.keys = [b"user-%07d" % i for i in range(producer_logs.KEY_SPACE)]
        self.pool = []
        for version, schema in enumerate(schema_versions(), 1):
            parsed = fastavro.parse_schema(schema)
            for _ in range(DATUMS_PER_VERSION):
                out = io.BytesIO()
                out.write(b"\x00" + version.to_bytes(4, "big"))
                fastavro.schemaless_writer(out, parsed, _order(rng, version))
                self.pool.append(out.getvalue())

    def value(self, opaque: float = 0.0) -> bytes:  # every value is an Avro datum: `opaque` unused
        return self.pool[self.rng.randrange(len(self.pool))]

    def headers(self) -> list:
        return []


def _order(rng: random.Random, version: int) -> dict:
    def text(n):
        return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz ") for _ in range(rng.randrange(1, n)))

    def address():
        return {"street": text(30), "city": text(12), "zip": f"{rng.randrange(99999):05d}",
                "country": rng.choice(["DE", "FR", "US", "JP", "BR"])}
    created = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc) + datetime.timedelta(
        milliseconds=rng.randrange(10**10))
    order = {"order_id": f"o-{rng.getrandbits(64):016x}", "customer_id": rng.randrange(10**9),
             "created_at": created, "day": created.date(), "at": created.time(),
             "local_at": created.replace(tzinfo=None), "status": rng.choice(["NEW", "PAID", "SHIPPED", "DONE"]),
             "total": _money(rng), "currency": rng.choice(["EUR", "USD", "JPY"]), "paid": rng.random() < 0.8,
             "weight": rng.random() * 40, "score": rng.random(), "quantity": rng.randrange(1, 50),
             "hash": rng.getrandbits(128).to_bytes(16, "big"), "billing": address(),
             "items": [{"sku": f"sku-{rng.randrange(10**6)}", "quantity": rng.randrange(1, 9),
                        "price": _money(rng)} for _ in range(rng.randrange(0, 5))],
             "attributes": {text(8): text(10) for _ in range(rng.randrange(0, 4))},
             "note": text(40) if rng.random() < 0.3 else None}
    if version >= 2:
        order.update(coupon=f"C{rng.randrange(1000)}" if rng.random() < 0.2 else None,
                     shipping=address() if rng.random() < 0.5 else None)
    if version >= 3:
        order.update(channel=rng.choice(["web", "app", None]), gift=rng.random() < 0.1)
    return order


def _money(rng: random.Random):
    import decimal

    return decimal.Decimal(rng.randrange(1, 10**8)).scaleb(-2)


def write_schema_dir(path: str) -> None:
    os.makedirs(path)
    entries = []
    for version, schema in enumerate(schema_versions(), 1):
        with open(os.path.join(path, f"order-v{version}.avsc"), "w") as f:
            json.dump(schema, f)
        entries.append({"id": version, "file": f"order-v{version}.avsc", "subject": f"{TOPIC}-value",
                        "version": version})
    with open(os.path.join(path, "schemas.json"), "w") as f:
        json.dump({"schemas": entries}, f, indent=1)


def cached(root: str, size: int, seed: int = 1, partitions: int = 2) -> tuple[str, str]:
    """(the log directory, the schema directory), generated on first use."""
    base = os.path.join(root, f"typed-avro-{producer_logs.size_name(size)}-seed{seed}-p{partitions}")
    logs, schemas, done = base + "/logs", base + "/schemas", base + "/done"
    if os.path.exists(done):
        return logs, schemas
    shutil.rmtree(base, ignore_errors=True)
    os.makedirs(logs)
    write_schema_dir(schemas)
    print(f"bench: generating {base} ({producer_logs.size_name(size)}) with fastavro and aiokafka",
          file=sys.stderr, flush=True)
    import multiprocessing

    tasks = [(logs, TOPIC, p, size // partitions, 64 << 20, seed, producer_logs.SPAN_MS, SHAPE, AvroOrders)
             for p in range(partitions)]
    with multiprocessing.get_context("fork").Pool(partitions) as pool:
        facts = pool.map(producer_logs.write_partition, tasks)
    with open(done, "w") as f:
        json.dump(facts, f)
    return logs, schemas


def plain_script(src: str, schema_dir: str, dst: str) -> None:
    """What a user scripts without kfmt's decoding: fastavro one datum at a time into pyarrow."""
    import fastavro
    import pyarrow as pa
    import pyarrow.parquet as pq

    import kfmt
    from kfmt.default_plugins.values.avro_types import parse

    versions = [fastavro.parse_schema(s) for s in schema_versions()]
    latest = versions[-1]
    arrow = parse(json.dumps(schema_versions()[-1])).arrow
    schema = pa.schema([pa.field("offset", pa.int64()), pa.field("value", arrow)])
    os.makedirs(dst)
    with pq.ParquetWriter(os.path.join(dst, "part-0.parquet"), schema) as out:
        for batch in kfmt.read(src):
            offsets, rows = batch.column("offset"), []
            for value in batch.column("value").to_pylist():
                writer = versions[int.from_bytes(value[1:5], "big") - 1]
                rows.append(fastavro.schemaless_reader(io.BytesIO(value[5:]), writer, latest))
            out.write_batch(pa.record_batch([offsets, pa.array(rows, arrow)], schema=schema))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", type=producer_logs.parse_size, default=producer_logs.parse_size("2G"))
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--root", default="/tmp/kfmt-bench")
    p.add_argument("--skip-plain", action="store_true", help="time only the two exports")
    p.add_argument("--plain-runs", type=int, default=None,
                   help="run the plain script in the first N rounds only (default: every round; it "
                        "takes about 8 minutes at 2 GB on a quiet machine)")
    args = p.parse_args(argv)
    plain_runs = args.runs if args.plain_runs is None else args.plain_runs
    logs, schemas = cached(args.root, args.size)
    out = os.path.join(args.root, "typed-out")
    commands = {"typed": [KFMT, "export", logs, out, "--value-format", "avro", "--schemas", schemas,
                          "--no-progress"],
                "raw": [KFMT, "export", logs, out, "--no-progress"]}
    if not args.skip_plain and plain_runs > 0:
        commands["plain script"] = [sys.executable, __file__, "plain", logs, schemas, out]
    times = {name: [] for name in commands}  # (wall, CPU: user + sys of the process and its pool)
    for i in range(args.runs):  # alternated, so a change of load falls on every command alike
        for name, argv_ in commands.items():
            if name == "plain script" and i >= plain_runs:
                continue
            shutil.rmtree(out, ignore_errors=True)
            result = run(argv_, then=["sync"])
            if result.code:
                raise SystemExit(f"bench: {name} failed: {result.error}")
            times[name].append((result.wall, result.cpu))
            print(f"run {i + 1}: {name} {result.wall:.1f} s, CPU {result.cpu:.1f} s "
                  f"(load {os.getloadavg()[0]:.1f})", flush=True)
    shutil.rmtree(out, ignore_errors=True)
    print(_table(producer_logs.size_name(args.size), times))
    return 0


def _table(size: str, times: dict) -> str:
    """The medians as a Markdown table: wall time, then CPU time (user + sys), and their ratios."""
    rows = []
    for kind, at in (("wall", 0), ("CPU", 1)):
        med = {name: statistics.median(t[at] for t in runs) for name, runs in times.items()}
        plain = (f"{med['plain script']:.1f} s | {med['plain script'] / med['typed']:.1f} |"
                 if "plain script" in med else "- | - |")
        rows.append(f"| {size} Avro, {kind} | {med['typed']:.1f} s | {med['raw']:.1f} s | "
                    f"{med['typed'] / med['raw']:.2f} | {plain} {os.getloadavg()[0]:.1f} |")
    return ("\n| input | typed | raw | typed / raw (<= 2) | plain script | plain / typed (>= 5) | load |\n"
            "| --- | --- | --- | --- | --- | --- | --- |\n" + "\n".join(rows))


if __name__ == "__main__":
    if sys.argv[1:2] == ["plain"]:
        plain_script(*sys.argv[2:5])
    else:
        sys.exit(main())
