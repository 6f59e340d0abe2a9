"""The typed export of Protobuf values (issue 24 point 8, "decoding runs in bulk"): a topic of
Confluent-framed Protobuf messages exported typed, exported raw, and decoded by a plain script, in the
same run, each a fresh process, alternated run by run.

    bench/run.sh typed-protobuf 200M [--runs 3] [--root /tmp/kfmt-bench]

The input (generated on first use under --root, reused after): topic `users`, two partitions, written
by bench/producer_logs.py's machinery (lz4 batches as an idempotent producer writes them); each value is
a `bench.User` message serialized by the official protobuf runtime (an independent serializer: the
.proto compiled by protoc, messages built by message_factory) and framed as Confluent's serializer
frames it (magic byte 0, schema id 1, the message-index array [1] as bytes 02 02). The message: 14
fields, a nested message, a repeated message, a map, an enum, a oneof, a Timestamp, a wrapper.

Timed (wall and CPU, user + sys of the process and its children):
* typed: `kfmt export SRC DST --value-format protobuf --schemas DIR`;
* raw: `kfmt export SRC DST`;
* plain script: kfmt.read (raw), each value parsed by FromString and MessageToDict one by one into
  pyarrow, written to Parquet (what a user scripts without kfmt's decoding).
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


class ProtobufUsers(producer_logs.Producer):
    """Values: Confluent-framed bench.User messages from a pool serialized once per partition."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.keys = [b"user-%07d" % i for i in range(producer_logs.KEY_SPACE)]
        cls = user_class()
        self.pool = [b"\x00" + (1).to_bytes(4, "big") + b"\x02\x02" + _user(rng, cls).SerializeToString()
                     for _ in range(MESSAGES_PER_PARTITION)]

    def value(self, opaque: float = 0.0) -> bytes:
        return self.pool[self.rng.randrange(len(self.pool))]

    def headers(self) -> list:
        return []


def cached(root: str, size: int, seed: int = 1, partitions: int = 2) -> tuple[str, str]:
    """(the log directory, the schema directory), generated on first use."""
    base = os.path.join(root, f"typed-protobuf-{producer_logs.size_name(size)}-seed{seed}-p{partitions}")
    logs, schemas, done = base + "/logs", base + "/schemas", base + "/done"
    if os.path.exists(done):
        return logs, schemas
    shutil.rmtree(base, ignore_errors=True)
    os.makedirs(logs)
    os.makedirs(schemas)
    with open(os.path.join(schemas, "user.proto"), "w") as f:
        f.write(PROTO)
    with open(os.path.join(schemas, "schemas.json"), "w") as f:
        json.dump({"schemas": [{"id": 1, "file": "user.proto", "subject": f"{TOPIC}-value", "version": 1}]}, f)
    print(f"bench: generating {base} with the protobuf runtime and aiokafka", file=sys.stderr, flush=True)
    import multiprocessing

    tasks = [(logs, TOPIC, p, size // partitions, 64 << 20, seed, producer_logs.SPAN_MS, SHAPE, ProtobufUsers)
             for p in range(partitions)]
    with multiprocessing.get_context("fork").Pool(partitions) as pool:
        facts = pool.map(producer_logs.write_partition, tasks)
    with open(done, "w") as f:
        json.dump(facts, f)
    return logs, schemas


def plain_script(src: str, dst: str) -> None:
    """What a user scripts without kfmt's decoding: FromString + MessageToDict one by one into pyarrow."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from google.protobuf.json_format import MessageToDict

    import kfmt

    cls = user_class()
    os.makedirs(dst)
    writer = None
    for batch in kfmt.read(src):
        rows = [MessageToDict(cls.FromString(v[7:]), preserving_proto_field_name=True)
                for v in batch.column("value").to_pylist()]
        table = pa.table({"offset": batch.column("offset"), "value": pa.array(rows)})
        if writer is None:
            writer = pq.ParquetWriter(os.path.join(dst, "part-0.parquet"), table.schema)
        writer.write_table(table.cast(writer.schema) if table.schema != writer.schema else table)
    if writer is not None:
        writer.close()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", type=producer_logs.parse_size, default=producer_logs.parse_size("200M"))
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--root", default="/tmp/kfmt-bench")
    args = p.parse_args(argv)
    logs, schemas = cached(args.root, args.size)
    out = os.path.join(args.root, "typed-protobuf-out")
    commands = {"typed": [KFMT, "export", logs, out, "--value-format", "protobuf", "--schemas", schemas,
                          "--no-progress"],
                "raw": [KFMT, "export", logs, out, "--no-progress"],
                "plain script": [sys.executable, __file__, "plain", logs, out]}
    wall, cpu = {name: [] for name in commands}, {name: [] for name in commands}
    for i in range(args.runs):  # alternated, so a change of load falls on every command alike
        for name, argv_ in commands.items():
            shutil.rmtree(out, ignore_errors=True)
            result = run(argv_, then=["sync"])
            if result.code:
                raise SystemExit(f"bench: {name} failed: {result.error}")
            wall[name].append(result.wall)
            cpu[name].append(result.cpu)
            print(f"run {i + 1}: {name} {result.wall:.1f} s wall, {cpu[name][-1]:.1f} s CPU "
                  f"(load {os.getloadavg()[0]:.1f})", flush=True)
    shutil.rmtree(out, ignore_errors=True)
    w = {n: statistics.median(t) for n, t in wall.items()}
    c = {n: statistics.median(t) for n, t in cpu.items()}
    print(f"\n| input | typed | raw | typed / raw | plain script | plain / typed | load |\n"
          f"| --- | --- | --- | --- | --- | --- | --- |\n"
          f"| {producer_logs.size_name(args.size)} Protobuf | {w['typed']:.1f} s ({c['typed']:.1f} CPU) | "
          f"{w['raw']:.1f} s ({c['raw']:.1f}) | {w['typed'] / w['raw']:.2f} wall, {c['typed'] / c['raw']:.2f} CPU | "
          f"{w['plain script']:.1f} s ({c['plain script']:.1f}) | {w['plain script'] / w['typed']:.1f} wall, "
          f"{c['plain script'] / c['typed']:.1f} CPU | {os.getloadavg()[0]:.1f} |")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["plain"]:
        plain_script(*sys.argv[2:4])
    else:
        sys.exit(main())
