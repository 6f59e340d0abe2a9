"""kfmt's benchmark harness: kfmt against the libraries users would otherwise script with, on the same
data in the same run, and kfmt's whole-directory operations. See bench/README.md.

    bench/run.sh [--quick] [--records N] [--reps R] [--dir-reps R] [--root DIR] [--only codecs|directory]

Prints the tables and writes them as JSON to bench/results/ (not in git).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import columns  # noqa: E402
import data  # noqa: E402
from measure import Sample, child, load_average, median, timed  # noqa: E402

from kfmt.format import kernels as speedups  # noqa: E402

MB = 1e6


def machine() -> dict:
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        pass
    memory = 0
    try:
        import psutil
        memory = psutil.virtual_memory().total
    except ImportError:
        pass
    return {"cpu": cpu or platform.processor(), "cores": os.cpu_count(), "memory_gib": round(memory / 2**30, 1),
            "python": platform.python_version(), "platform": platform.platform(),
            "kfmt_speedups": speedups.description}


# --- codecs ---

def run_codecs(args) -> list[dict]:
    src = data.RecordSource(seed=1)
    rows = []
    for magic, codec in data.FORMATS:
        if not data.codec_available(codec):
            print(f"bench: skipping {data.fmt_name(magic, codec)}: kafka-python lacks the codec", file=sys.stderr)
            continue
        inp = data.codec_inputs(magic, codec, args.records, src)
        columns.check_same_records(inp)
        for op, contenders in (("decode", columns.decoders(inp)), ("encode", columns.encoders(inp))):
            samples = {name: [] for name in contenders}
            for _ in range(args.reps):
                for name, fn in contenders.items():  # in turn, so that load falls on all alike
                    result = []
                    samples[name].append(timed(lambda: result.append(fn())))
                    if op == "decode" and result[0] != inp.records:
                        raise AssertionError(f"{name} decoded {result[0]} records of {inp.name}, not {inp.records}")
            row = {"op": op, "format": inp.name, "records": inp.records, "log_bytes": len(inp.log)}
            for name, s in samples.items():
                m = median(s)
                row[name] = {"wall": m.wall, "cpu": m.cpu, "records_per_s": m.rate(inp.records),
                             "mb_per_s": m.rate(len(inp.log)) / MB,
                             "records_per_wall_s": m.rate(inp.records, "wall")}
            rows.append(row)
            print_codec_row(row)
    return rows


def print_codec_row(row: dict) -> None:
    k = row["kfmt"]
    parts = [f"{row['op']:6} {row['format']:8}  kfmt {k['records_per_s'] / 1e6:6.2f} M rec/s {k['mb_per_s']:7.0f} MB/s"]
    for peer in columns.PEERS:
        if peer in row:
            p = row[peer]
            parts.append(f"{peer} {p['records_per_s'] / 1e6:5.2f} M ({k['records_per_s'] / p['records_per_s']:5.2f}x)")
    if "codec" in row:
        parts.append(f"codec alone {row['codec']['cpu'] * 1e3:6.1f} ms (kfmt/codec time "
                     f"{k['cpu'] / row['codec']['cpu']:4.2f})")
    print("  ".join(parts), flush=True)


# --- the log directory ---

def ops_command(*args: str) -> list[str]:
    return [sys.executable, os.path.join(HERE, "ops.py"), *args]


def run_directory(args) -> tuple[dict, list[dict]]:
    root = args.root
    os.makedirs(root, exist_ok=True)
    logdir = data.log_directory(root, args.dir_bytes, args.segment_bytes)
    topics = {}
    for topic, magic, codec in data.DIR_TOPICS:
        facts = json.loads(child(ops_command("scan", logdir, topic)).output.strip().splitlines()[-1])
        topics[topic] = {"magic": magic, "codec": codec, **facts}
    v2, v1 = "events-v2", "events-v1"
    out = os.path.join(root, "out")
    kfmt = lambda *a: ops_command("cli", "--", *a, "--no-progress")  # noqa: E731
    operations = [
        ("frame scan (arrays)", v2, ops_command("scan", logdir, v2)),
        ("frame scan (arrays)", v1, ops_command("scan", logdir, v1)),
        ("frame scan (BatchHeaders)", v2, ops_command("scan-headers", logdir, v2)),
        ("reindex", v2, kfmt("reindex", logdir, out, "--topic", v2)),
        ("resegment", v2, kfmt("resegment", logdir, out, "--topic", v2, "--segment-bytes",
                               str(2 * args.segment_bytes), "--master", "inprocess")),
        ("upgrade v1 -> v2", v1, kfmt("upgrade", logdir, out, "--topic", v1, "--master", "inprocess")),
        ("upgrade v1 -> v2 (kernels)", v1, ops_command("upgrade-kernels", logdir, v1, out)),
        ("upgrade v1 -> v2 (kernels, not written)", v1, ops_command("upgrade-kernels", logdir, v1)),
        ("recompress none -> lz4", v2, kfmt("recompress", logdir, out, "--topic", v2, "--compression", "lz4",
                                            "--master", "inprocess")),
        ("recompress none -> zstd", v2, kfmt("recompress", logdir, out, "--topic", v2, "--compression", "zstd",
                                             "--master", "inprocess")),
        ("export to Parquet", v2, kfmt("export", logdir, out, "--topic", v2, "--format", "parquet",
                                       "--master", "inprocess")),
    ]
    rows = []
    for name, topic, argv in operations:
        if args.skip and any(word in name for word in args.skip):
            continue
        samples, anon = [], []
        error = None
        for _ in range(args.dir_reps):
            shutil.rmtree(out, ignore_errors=True)
            try:
                sample = child(argv)
            except RuntimeError as exc:
                error = str(exc).splitlines()[0]
                break
            inner = json.loads(sample.output.strip().splitlines()[-1])
            samples.append(Sample(inner["wall"], inner["cpu"], inner["peak_rss"]))
            anon.append(inner["peak_anon"])
        shutil.rmtree(out, ignore_errors=True)
        t = topics[topic]
        row = {"operation": name, "topic": topic, "bytes": t["bytes"], "records": t["records"]}
        if error:
            row["error"] = error
        else:
            m = median(samples)
            row.update(wall=m.wall, cpu=m.cpu, peak_rss=m.max_rss, peak_anon=max(anon),
                       mb_per_s=m.rate(t["bytes"]) / MB,
                       mb_per_wall_s=m.rate(t["bytes"], "wall") / MB, records_per_s=m.rate(t["records"]),
                       records_per_wall_s=m.rate(t["records"], "wall"))
        rows.append(row)
        print_directory_row(row)
    return topics, rows


def print_directory_row(row: dict) -> None:
    if "error" in row:
        print(f"{row['operation']:40} {row['topic']:10} FAILED: {row['error']}", flush=True)
        return
    print(f"{row['operation']:40} {row['topic']:10} {row['bytes'] / MB:6.0f} MB  "
          f"{row['mb_per_s']:7.0f} MB/s ({row['mb_per_wall_s']:6.0f} wall)  "
          f"{row['records_per_s'] / 1e6:6.2f} M rec/s  peak RSS {row['peak_rss'] / 2**20:5.0f} MiB "
          f"(anonymous {row['peak_anon'] / 2**20:4.0f})",
          flush=True)


# --- targets ---

def targets(codec_rows: list[dict], dir_rows: list[dict]) -> list[dict]:
    """The issue's targets, as ratios measured in this run."""
    out = []

    def codec(op, fmt):
        return next((r for r in codec_rows if r["op"] == op and r["format"] == fmt), None)

    def directory(name, topic):
        return next((r for r in dir_rows if r["operation"] == name and r["topic"] == topic and "error" not in r), None)

    r = codec("decode", "v2 none")
    if r and "aiokafka-c" in r:
        peer = max(r[name]["records_per_s"] for name in ("aiokafka-c", "aiokafka-c iterate") if name in r)
        ratio = r["kfmt"]["records_per_s"] / peer
        out.append({"target": "decode v2 none >= 1.5x aiokafka C (its faster mode)", "measured": f"{ratio:.2f}x",
                    "met": ratio >= 1.5})
    r = codec("encode", "v2 none")
    if r and "aiokafka-c" in r:
        ratio = r["kfmt"]["records_per_s"] / r["aiokafka-c"]["records_per_s"]
        out.append({"target": "encode v2 none >= 1.1x aiokafka C", "measured": f"{ratio:.2f}x", "met": ratio >= 1.1})
    for name in ("frame scan (arrays)", "reindex", "resegment"):
        r = directory(name, "events-v2")
        if r:
            out.append({"target": f"{name} v2 >= 1 GB/s (page cache)", "measured": f"{r['mb_per_s'] / 1e3:.2f} GB/s",
                        "met": r["mb_per_s"] >= 1000})
    for name in ("upgrade v1 -> v2", "upgrade v1 -> v2 (kernels)", "upgrade v1 -> v2 (kernels, not written)"):
        r = directory(name, "events-v1")
        if r:
            out.append({"target": f"{name} >= 2M records/s per core",
                        "measured": f"{r['records_per_s'] / 1e6:.2f} M/s", "met": r["records_per_s"] >= 2e6})
    for fmt in ("v2 lz4", "v2 zstd", "v1 gzip"):
        r = codec("decode", fmt)
        if r and "codec" in r:
            ratio = r["kfmt"]["cpu"] / r["codec"]["cpu"]
            out.append({"target": f"decode {fmt} within 1.3x of the codec's decompression time",
                        "measured": f"{ratio:.2f}x", "met": ratio <= 1.3})
    anon = max((r.get("peak_anon", 0) for r in dir_rows), default=0)
    if dir_rows:
        out.append({"target": "memory bounded by a segment, independent of topic size",
                    "measured": f"peak anonymous {anon / 2**20:.0f} MiB",
                    "met": None})
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--records", type=int, default=200_000, help="records per codec benchmark (200000)")
    p.add_argument("--reps", type=int, default=5, help="repetitions of each codec measurement (median; 5)")
    p.add_argument("--dir-reps", type=int, default=3, help="repetitions of each directory operation (3)")
    p.add_argument("--root", default="/tmp/kfmt-bench", help="where the log directory is built and reused")
    p.add_argument("--dir-bytes", type=int, default=500 * 2**20, help="size of the log directory (500 MiB)")
    p.add_argument("--segment-bytes", type=int, default=128 * 2**20, help="its segment size (128 MiB)")
    p.add_argument("--only", choices=["codecs", "directory"], help="run one part only")
    p.add_argument("--skip", action="append", help="skip directory operations whose name contains this")
    p.add_argument("--quick", action="store_true", help="a smaller, faster run (50k records, 100 MiB, 1-3 reps)")
    p.add_argument("--json", help="where to write the results (default bench/results/<time>.json)")
    args = p.parse_args(argv)
    if args.quick:
        args.records, args.reps, args.dir_reps = 50_000, 3, 1
        args.dir_bytes, args.segment_bytes = 100 * 2**20, 32 * 2**20
    started = datetime.datetime.now().isoformat(timespec="seconds")
    info = machine()
    print(f"kfmt bench {started}: {info['cpu']}, {info['cores']} cores, {info['memory_gib']} GiB, "
          f"Python {info['python']}; kfmt runs {info['kfmt_speedups']}")
    load_start = load_average()
    print(f"load average at start: {load_start[0]:.2f} {load_start[1]:.2f} {load_start[2]:.2f}", flush=True)
    results = {"started": started, "machine": info, "args": vars(args), "load_start": load_start}
    t0 = time.perf_counter()
    codec_rows, dir_rows = [], []
    if args.only != "directory":
        print(f"\n== decode into columns / encode from columns: {args.records} records, "
              f"{data.BATCH_RECORDS} per batch, median of {args.reps}; rates per CPU second ==")
        codec_rows = run_codecs(args)
    if args.only != "codecs":
        print(f"\n== whole log directory ({args.dir_bytes >> 20} MiB under {args.root}, page cache), "
              f"median of {args.dir_reps}; rates per CPU second of the operation ==")
        results["topics"], dir_rows = run_directory(args)
    results.update(codecs=codec_rows, directory=dir_rows, targets=targets(codec_rows, dir_rows),
                   load_end=load_average(), seconds=time.perf_counter() - t0)
    print("\n== targets (ratios measured in this run) ==")
    for t in results["targets"]:
        verdict = {True: "met", False: "NOT MET", None: "see docs"}[t["met"]]
        print(f"  {t['target']:62} {t['measured']:>22}  {verdict}")
    le = results["load_end"]
    print(f"load average at end: {le[0]:.2f} {le[1]:.2f} {le[2]:.2f}")
    path = args.json or os.path.join(HERE, "results", f"{started.replace(':', '')}.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(results, f, indent=1)
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
