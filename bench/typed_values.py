"""The typed export of Protobuf and JSON Schema values (issue 24 point 8, "decoding runs in bulk"): a
topic of Confluent-framed values exported typed, exported raw, and decoded by a plain script, in the
same run, each a fresh process, alternated run by run; and the decoding alone (`decode`: the values
read into memory first, then only the decode timed, in a fresh process per way).

    bench/run.sh typed-values 200M --kind protobuf|json [--runs 3] [--root /tmp/kfmt-bench]

The input (generated on first use under --root, reused after): topic `users`, two partitions, written
by bench/producer_logs.py's machinery (lz4 batches as an idempotent producer writes them); each value is
a `bench.User` message serialized by the official protobuf runtime (an independent serializer: the
.proto compiled by protoc, messages built by message_factory) and framed as Confluent's serializer
frames it (magic byte 0, schema id 1, the message-index array [1] as bytes 02 02). The message: 14
fields, a nested message, a repeated message, a map, an enum, a oneof, a Timestamp, a wrapper.

`--kind json`: the same users as JSON objects written by the standard json library, framed for
Confluent's JSON Schema serializer (magic byte 0, schema id 1, the text), with a JSON Schema.

Timed (wall and CPU, user + sys of the process and its children):
* typed: `kfmt export SRC DST --value-format protobuf|json-schema --schemas DIR`;
* raw: `kfmt export SRC DST`;
* plain script: kfmt.read (raw), each value parsed one by one (protobuf: FromString and MessageToDict;
  json: json.loads) into pyarrow, written to Parquet (what a user scripts without kfmt's decoding).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import producer_logs  # noqa: E402
from processes import run  # noqa: E402

KFMT = os.path.join(ROOT, "bin", "kfmt")
TOPIC = "users"
SHAPE = producer_logs.Shape(2, "lz4", 1, 400, 3.0, 1.0, idempotent=True)
MESSAGES_PER_PARTITION = 6000  # distinct values, drawn at random after
PROTO = """syntax = "proto3";
package bench;
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";
message Audit { string actor = 1; }
message User {
  enum Role { ROLE_UNSPECIFIED = 0; ADMIN = 1; MEMBER = 2; GUEST = 3; }
  message Address { string street = 1; string city = 2; int32 zip = 3; }
  message Item { string sku = 1; int32 quantity = 2; double price = 3; }
  string user_id = 1; string name = 2; int32 age = 3; int64 score = 4; double balance = 5;
  bool active = 6; Role role = 7; Address home = 8; repeated Item items = 9;
  map<string, string> tags = 10; google.protobuf.Timestamp created = 11;
  google.protobuf.StringValue nickname = 12; oneof contact { string email = 13; string phone = 14; }
  bytes token = 15; uint32 visits = 16;
}
"""


def user_class():
    """bench.User from the .proto, compiled by protoc into the official runtime's pool."""
    import importlib.resources

    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    from grpc_tools import protoc

    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "user.proto"), "w") as f:
            f.write(PROTO)
        out = os.path.join(tmp, "set.pb")
        include = str(importlib.resources.files("grpc_tools") / "_proto")
        assert protoc.main(["protoc", f"-I{tmp}", f"-I{include}", "--include_imports",
                            f"--descriptor_set_out={out}", "user.proto"]) == 0
        with open(out, "rb") as f:
            files = descriptor_pb2.FileDescriptorSet.FromString(f.read())
    pool = descriptor_pool.DescriptorPool()
    for proto in files.file:
        pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("bench.User"))


def _user(rng: random.Random, cls):
    def text(n):
        return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz ") for _ in range(rng.randint(1, n)))

    user = cls(user_id=f"u-{rng.randrange(10**7):07d}", name=text(20), age=rng.randint(0, 99),
               score=rng.randrange(-2**40, 2**40), balance=rng.uniform(-1e4, 1e4), active=rng.random() < .5,
               role=rng.randint(0, 3), visits=rng.randrange(2**32), token=rng.randbytes(rng.randint(0, 16)))
    user.home.street, user.home.city, user.home.zip = text(30), text(12), rng.randint(10000, 99999)
    for _ in range(rng.randint(0, 4)):
        user.items.add(sku=text(8), quantity=rng.randint(1, 9), price=rng.uniform(0, 500))
    for _ in range(rng.randint(0, 3)):
        user.tags[text(6)] = text(10)
    user.created.FromMilliseconds(1_700_000_000_000 + rng.randrange(10**10))
    if rng.random() < .5:
        user.nickname.value = text(8)
    if rng.random() < .5:
        user.email = text(10) + "@example.com"
    else:
        user.phone = str(rng.randrange(10**10))
    return user


JSON_SCHEMA = {"type": "object", "properties": {
    "user_id": {"type": "string"}, "name": {"type": "string"}, "age": {"type": "integer"},
    "score": {"type": "integer"}, "balance": {"type": "number"}, "active": {"type": "boolean"},
    "role": {"type": "string", "enum": ["ROLE_UNSPECIFIED", "ADMIN", "MEMBER", "GUEST"]},
    "home": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"},
                                              "zip": {"type": "integer"}}},
    "items": {"type": "array", "items": {"type": "object", "properties": {
        "sku": {"type": "string"}, "quantity": {"type": "integer"}, "price": {"type": "number"}}}},
    "created": {"type": "string", "format": "date-time"}, "nickname": {"type": ["string", "null"]},
    "email": {"type": "string"}, "phone": {"type": "string"}, "visits": {"type": "integer"}}}


def _json_user(rng: random.Random, cls) -> bytes:
    """A user as JSON text by the standard library (the protobuf message's fields, as a JSON Schema
    producer would write them)."""
    from google.protobuf.json_format import MessageToDict

    value = MessageToDict(_user(rng, cls), preserving_proto_field_name=True)
    value.pop("tags", None)
    value.pop("token", None)
    for name in ("score", "visits"):
        if name in value:
            value[name] = int(value[name])
    return json.dumps(value).encode()


class ProtobufUsers(producer_logs.Producer):
    """Values: Confluent-framed bench.User messages from a pool serialized once per partition."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.keys = [b"user-%07d" % i for i in range(producer_logs.KEY_SPACE)]
        cls = user_class()
        self.pool = [b"\x00" + (1).to_bytes(4, "big") + self.encode(rng, cls) for _ in range(MESSAGES_PER_PARTITION)]

    @staticmethod
    def encode(rng, cls) -> bytes:
        return b"\x02\x02" + _user(rng, cls).SerializeToString()

    def value(self, opaque: float = 0.0) -> bytes:
        return self.pool[self.rng.randrange(len(self.pool))]

    def headers(self) -> list:
        return []


class JsonUsers(ProtobufUsers):
    encode = staticmethod(_json_user)


KINDS = {"protobuf": (ProtobufUsers, "user.proto", "protobuf"), "json": (JsonUsers, "user.json", "json-schema")}


def cached(root: str, size: int, kind: str, seed: int = 1, partitions: int = 2) -> tuple[str, str]:
    """(the log directory, the schema directory), generated on first use."""
    producer, schema_file, _ = KINDS[kind]
    base = os.path.join(root, f"typed-{kind}-{producer_logs.size_name(size)}-seed{seed}-p{partitions}")
    logs, schemas, done = base + "/logs", base + "/schemas", base + "/done"
    if os.path.exists(done):
        return logs, schemas
    shutil.rmtree(base, ignore_errors=True)
    os.makedirs(logs)
    os.makedirs(schemas)
    with open(os.path.join(schemas, schema_file), "w") as f:
        f.write(PROTO if kind == "protobuf" else json.dumps(JSON_SCHEMA))
    with open(os.path.join(schemas, "schemas.json"), "w") as f:
        json.dump({"schemas": [{"id": 1, "file": schema_file, "subject": f"{TOPIC}-value", "version": 1}]}, f)
    print(f"bench: generating {base} with the protobuf runtime and aiokafka", file=sys.stderr, flush=True)
    import multiprocessing

    tasks = [(logs, TOPIC, p, size // partitions, 64 << 20, seed, producer_logs.SPAN_MS, SHAPE, producer)
             for p in range(partitions)]
    with multiprocessing.get_context("fork").Pool(partitions) as pool:
        facts = pool.map(producer_logs.write_partition, tasks)
    with open(done, "w") as f:
        json.dump(facts, f)
    return logs, schemas


def one_by_one(kind: str):
    """The plain script's decoding of a list of framed values: one Python call per value."""
    if kind == "json":
        return lambda values: [json.loads(v[5:]) for v in values]
    from google.protobuf.json_format import MessageToDict

    cls = user_class()
    return lambda values: [MessageToDict(cls.FromString(v[7:]), preserving_proto_field_name=True) for v in values]


def plain_script(kind: str, src: str, dst: str) -> None:
    """What a user scripts without kfmt's decoding: one value at a time into pyarrow."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    import kfmt

    decode = one_by_one(kind)
    os.makedirs(dst)
    writer = None
    for batch in kfmt.read(src):
        rows = decode(batch.column("value").to_pylist())
        table = pa.table({"offset": batch.column("offset"), "value": pa.array(rows)})
        if writer is None:
            writer = pq.ParquetWriter(os.path.join(dst, "part-0.parquet"), table.schema)
        writer.write_table(table.cast(writer.schema) if table.schema != writer.schema else table)
    if writer is not None:
        writer.close()


def decode_alone(kind: str, way: str, src: str, schema_dir: str) -> None:
    """Prints the CPU and wall seconds of decoding every value of `src` one way (`kfmt`: the value
    format's decoder on each chunk, as export runs it; `plain`: one_by_one on each chunk's values),
    the values read into memory before the clock starts."""
    import numpy as np

    import kfmt
    from kfmt.default_plugins.values import framing
    from kfmt.default_plugins.values.registry_formats import JSON, PROTOBUF, _writer_or_reason
    from kfmt.rows.schemas.directory import schemas_from_directory
    from kfmt.storage.store import open_storage

    chunks = [batch.column("value") for batch in kfmt.read(src)]
    if way == "plain":
        decode = one_by_one(kind)
        run_one = lambda chunk: decode(chunk.to_pylist())  # noqa: E731
    else:
        writer = _writer_or_reason(schemas_from_directory(*open_storage(schema_dir, None)), 1,
                                   (PROTOBUF if kind == "protobuf" else JSON,),
                                   "bench.User" if kind == "protobuf" else None)  # as export samples it
        run_one = lambda chunk: writer.decode_rows(framing.Column(chunk), np.arange(len(chunk)), 5)  # noqa: E731
    wall, cpu = time.perf_counter(), time.process_time()
    for chunk in chunks:
        run_one(chunk)
    print(json.dumps({"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu}))


def _timed(commands: dict, runs: int, out: str) -> tuple[dict, dict]:
    """Median wall and CPU seconds of each command, alternated run by run in fresh processes (a line
    of JSON on stdout, from decode_alone, replaces the process's own times)."""
    wall, cpu = {name: [] for name in commands}, {name: [] for name in commands}
    for i in range(runs):  # alternated, so a change of load falls on every command alike
        for name, argv_ in commands.items():
            shutil.rmtree(out, ignore_errors=True)
            with tempfile.TemporaryFile("w+") as printed:
                result = run(argv_, stdout=printed, then=["sync"])
                if result.code:
                    raise SystemExit(f"bench: {name} failed: {result.error}")
                printed.seek(0)
                own = json.loads(printed.read().splitlines()[-1]) if name.startswith("decode") else \
                    {"wall": result.wall, "cpu": result.cpu}
            wall[name].append(own["wall"])
            cpu[name].append(own["cpu"])
            print(f"run {i + 1}: {name} {own['wall']:.2f} s wall, {own['cpu']:.2f} s CPU "
                  f"(load {os.getloadavg()[0]:.1f})", flush=True)
    shutil.rmtree(out, ignore_errors=True)
    return ({n: statistics.median(t) for n, t in wall.items()}, {n: statistics.median(t) for n, t in cpu.items()})


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", type=producer_logs.parse_size, default=producer_logs.parse_size("200M"))
    p.add_argument("--kind", choices=sorted(KINDS), default="protobuf")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--root", default="/tmp/kfmt-bench")
    args = p.parse_args(argv)
    logs, schemas = cached(args.root, args.size, args.kind)
    out = os.path.join(args.root, f"typed-{args.kind}-out")
    me = [sys.executable, __file__]
    commands = {"typed": [KFMT, "export", logs, out, "--value-format", KINDS[args.kind][2], "--schemas", schemas,
                          "--no-progress"],
                "raw": [KFMT, "export", logs, out, "--no-progress"],
                "plain script": me + ["plain", args.kind, logs, out],
                "decode kfmt": me + ["decode", args.kind, "kfmt", logs, schemas],
                "decode plain": me + ["decode", args.kind, "plain", logs, schemas]}
    w, c = _timed(commands, args.runs, out)
    size = f"{producer_logs.size_name(args.size)} {args.kind}"
    print(f"\n| input | typed | raw | typed / raw | plain script | plain / typed | load |\n"
          f"| --- | --- | --- | --- | --- | --- | --- |\n"
          f"| {size} | {w['typed']:.1f} s ({c['typed']:.1f} CPU) | {w['raw']:.1f} s ({c['raw']:.1f}) | "
          f"{w['typed'] / w['raw']:.2f} wall, {c['typed'] / c['raw']:.2f} CPU | "
          f"{w['plain script']:.1f} s ({c['plain script']:.1f}) | {w['plain script'] / w['typed']:.1f} wall, "
          f"{c['plain script'] / c['typed']:.1f} CPU | {os.getloadavg()[0]:.1f} |")
    print(f"\n| decoding alone | kfmt | one by one | one by one / kfmt |\n| --- | --- | --- | --- |\n"
          f"| {size} | {w['decode kfmt']:.2f} s ({c['decode kfmt']:.2f} CPU) | {w['decode plain']:.2f} s "
          f"({c['decode plain']:.2f} CPU) | {w['decode plain'] / w['decode kfmt']:.1f} wall, "
          f"{c['decode plain'] / c['decode kfmt']:.1f} CPU |")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["plain"]:
        plain_script(*sys.argv[2:5])
    elif sys.argv[1:2] == ["decode"]:
        decode_alone(*sys.argv[2:6])
    else:
        sys.exit(main())
