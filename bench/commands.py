"""Whole-command benchmarks: every kfmt command run as a user runs it (`bin/kfmt ...`, a fresh process,
engine start included) on a producer-shaped log directory (bench/producer_logs.py), against floors
measured in the same run. See bench/README.md.

    bench/run.sh commands 2G [--runs 3] [--floor-runs N] [--master inprocess|pool|local[N]|spark://..]
                             [--only CMD]... [--skip CMD]...
    python bench/commands.py --size 2G ...   (the same, with the venv's python)

Prints one table (command, input, kfmt median, floor median, ratio, target, met, peak RSS of the
largest process and of the whole process tree, the 1-minute load average after the row) and writes
everything as JSON to bench/results/commands-<time>.json (not in git).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import producer_logs  # noqa: E402  (its aiokafka imports are lazy: this process stays small)
from processes import Run, run, shell  # noqa: E402

KFMT = os.path.join(ROOT, "bin", "kfmt")
PY = sys.executable
BASELINES = os.path.join(HERE, "baselines")
SAMPLES = os.path.join(ROOT, "samples", "kafka-logs")
MASTER_COMMANDS = {"reindex", "resegment", "upgrade", "recompress", "compact", "retain", "archive", "restore", "export",
                   "salvage"}


NO_TARGET = float("inf")  # a row shown for what it costs, held to nothing


@dataclass
class Bench:
    command: str  # the row's name (--only matches it)
    input: str  # what it reads, for the table
    argv: list  # after bin/kfmt; OUT and ARCHIVE are replaced by the scratch paths
    floors: list  # floor keys; the floor is the sum of their medians
    target: float  # ratio to the floor, or seconds when floors is empty
    writes: bool = False  # its output is removed between runs, and `sync` is inside the timed span
    ok: tuple = (0,)
    prepare: list | None = None  # a kfmt command run once (untimed) before the runs, writing PREPARED


@dataclass
class Floor:
    label: str
    script: list  # argv, or ("shell", script, args...)
    writes: bool = False
    stdout_null: bool = True
    runs: list = field(default_factory=list)


def tree_bytes(paths: list[str]) -> int:
    total = 0
    for path in paths:
        if os.path.isfile(path):
            total += os.path.getsize(path)
        for base, _, files in os.walk(path):
            total += sum(os.path.getsize(os.path.join(base, f)) for f in files)
    return total


def mb(size: int) -> str:
    return f"{size / 1e6:,.0f} MB" if size >= 1e6 else f"{size / 1e3:,.0f} kB"


class Context:
    def __init__(self, args, facts: dict, indexed: str):
        self.args, self.facts = args, facts
        self.src, self.indexed = facts["path"], indexed
        scratch = os.path.join(args.root, "scratch")
        self.out, self.archive = os.path.join(scratch, "out"), os.path.join(scratch, "archive")
        self.prepared = os.path.join(scratch, "prepared")
        os.makedirs(scratch, exist_ok=True)

    def parts(self, prefix: str = "", src: str | None = None) -> list[str]:
        src = src or self.src
        return [os.path.join(src, n) for n in sorted(os.listdir(src))
                if n.startswith(prefix) and os.path.isdir(os.path.join(src, n))]

    def largest_segment(self, prefix: str) -> str:
        logs = [os.path.join(p, n) for p in self.parts(prefix) for n in os.listdir(p) if n.endswith(".log")]
        return max(logs, key=lambda path: (os.path.getsize(path), path))


def floors(ctx: Context) -> dict[str, Floor]:
    copy = 'mkdir -p "$1" && out="$1" && shift && cp -r "$@" "$out"/'
    v1 = ctx.parts("v1-single")
    legacy = ctx.parts("v1-")
    gzip = ctx.parts("v1-gzip-opaque")
    f = {
        "copy": Floor(f"cp -r + sync ({mb(tree_bytes([ctx.src]))})", ["shell", copy, ctx.out, *ctx.parts()],
                      writes=True),
        "copy indexed": Floor(f"cp -r + sync ({mb(tree_bytes([ctx.indexed]))})",
                              ["shell", copy, ctx.out, *(ctx.parts(src=ctx.indexed) if os.path.isdir(ctx.indexed) else [])],
                              writes=True),
        "copy v1-single": Floor(f"cp -r + sync ({mb(tree_bytes(v1))})", ["shell", copy, ctx.out, *v1], writes=True),
        "copy v1": Floor(f"cp -r + sync ({mb(tree_bytes(legacy))})", ["shell", copy, ctx.out, *legacy], writes=True),
        "lz4 codec": Floor("+ codec: decompress, lz4 every batch", [PY, f"{BASELINES}/codec.py", ctx.src, "--to", "lz4"]),
        "same codec": Floor("+ codec: decompress, recompress", [PY, f"{BASELINES}/codec.py", ctx.src, "--to", "same"]),
        # what upgrading gzip wrappers cannot avoid: inflate every wrapper, deflate the same bytes again
        # with the library and level kfmt's gzip plugin writes by default (ISA-L level 1)
        "gzip codec": Floor("inflate + deflate (ISA-L 1) of the wrappers' bytes",
                            [PY, f"{BASELINES}/codec.py", ctx.src, "--to", "same", "--gzip", "isal",
                             "--topic-prefix", "v1-gzip-opaque"]),
        "export script": Floor("aiokafka + pyarrow script", [PY, f"{BASELINES}/export_parquet.py", ctx.src, ctx.out],
                               writes=True),
        "json loop": Floor("aiokafka + json.dumps loop", [PY, f"{BASELINES}/cat_json.py", ctx.src, "--topic-prefix", "v2-"]),
        "import pyarrow": Floor("python -c 'import pyarrow'", [PY, "-c", "import pyarrow"]),
        # issue 27: a report takes at most 1.5x `kfmt info` of the same directory
        "info indexed": Floor(f"kfmt info ({mb(tree_bytes([ctx.indexed]))} with indexes)", [KFMT, "info", ctx.indexed]),
    }
    if not gzip:
        del f["gzip codec"]
    return f


def benches(ctx: Context) -> list[Bench]:
    return opaque_benches(ctx) if ctx.facts.get("mix") == "opaque" else project_benches(ctx)


def project_benches(ctx: Context) -> list[Bench]:
    """The rows on the project's input (every producer shape)."""
    f = ctx.facts
    size = mb(f["bytes"])
    v1 = mb(tree_bytes(ctx.parts("v1-single")))
    v2 = mb(tree_bytes(ctx.parts("v2-")))
    segment = ctx.largest_segment("v2-lz4")
    rewrite = 1.5
    # reading commands first, then the rewrites from the quickest: a run cut short keeps the most rows
    return [
        # the issue holds info and verify to the copy too: what a user would do instead of asking
        Bench("info", size, ["info", ctx.src], ["copy"], 1.0),
        Bench("verify", f"{mb(tree_bytes([ctx.indexed]))} with indexes", ["verify", ctx.indexed],
              ["copy indexed"], 2.0),
        *report_benches(ctx),
        Bench("cat --format json", f"{v2} of v2", ["cat", ctx.src, "--topic", "v2-*", "--format", "json"],
              ["json loop"], 0.5),
        Bench("dump", f"{mb(os.path.getsize(segment))} v2 lz4 segment",
              ["dump", segment, "--deep-iteration", "--print-data-log"], [], 1.0),
        Bench("--help", "", ["--help"], ["import pyarrow"], 3.0),
        Bench("upgrade samples", f"samples/kafka-logs ({mb(tree_bytes([SAMPLES]))})",
              ["upgrade", SAMPLES, "OUT"], ["import pyarrow"], 4.0, writes=True),
        Bench("export", f"{size}, to Parquet", ["export", ctx.src, "OUT", "--format", "parquet"],
              ["export script"], 0.6, writes=True),
        *copying_benches(ctx, size),
        Bench("upgrade", f"{v1} of uncompressed v1", ["upgrade", ctx.src, "OUT", "--topic", "v1-single"],
              ["copy v1-single"], 3.0, writes=True),
        Bench("recompress", f"{size}, to lz4", ["recompress", ctx.src, "OUT", "--compression", "lz4"],
              ["copy", "lz4 codec"], rewrite, writes=True),
        Bench("compact", size, ["compact", ctx.src, "OUT"], ["copy", "same codec"], rewrite, writes=True),
    ]


def opaque_benches(ctx: Context) -> list[Bench]:
    """The rows on issue 25's input: old-producer data with incompressible gzip wrappers and v2 lz4,
    no index files."""
    size = mb(ctx.facts["bytes"])
    legacy = mb(tree_bytes(ctx.parts("v1-")))
    gzip = mb(tree_bytes(ctx.parts("v1-gzip-opaque")))
    return [
        Bench("info", size, ["info", ctx.src], ["copy"], 1.0),
        Bench("verify", f"{mb(tree_bytes([ctx.indexed]))} with indexes", ["verify", ctx.indexed],
              ["copy indexed"], 2.0),
        *report_benches(ctx),
        Bench("export", f"{size}, to Parquet", ["export", ctx.src, "OUT", "--format", "parquet"],
              ["export script"], 0.6, writes=True),
        *copying_benches(ctx, size),
        Bench("upgrade", f"{legacy} of v1 (uncompressed and gzip)", ["upgrade", ctx.src, "OUT", "--topic", "v1-*"],
              ["copy v1"], 3.0, writes=True),
        # the line: within 1.5x of inflate + deflate of the same bytes measured alone
        Bench("upgrade gzip", f"{gzip} of v1 gzip wrappers, values incompressible",
              ["upgrade", ctx.src, "OUT", "--topic", "v1-gzip-opaque"], ["gzip codec"], 1.5, writes=True),
    ]


def report_benches(ctx: Context) -> list[Bench]:
    """`kfmt report` (the page, as a user makes it) against `kfmt info` of the same input, run in
    turn with it (issue 27: at most 1.5x, at verify's default depth); without the estimate, verify's
    checks or both, to show what each costs, and at `--deep` (every record checked: no target, as
    kafka-dump-log --deep-iteration has none)."""
    size = f"{mb(tree_bytes([ctx.indexed]))} with indexes"
    variants = ([], ["--no-estimate"], ["--no-verify"], ["--no-verify", "--no-estimate"], ["--deep"])
    return [Bench(" ".join(["report", *flags]), size, ["report", ctx.indexed, *flags, "-o", "OUT"], ["info indexed"],
                  NO_TARGET if "--deep" in flags else 1.5, writes=True) for flags in variants]


def copying_benches(ctx: Context, size: str) -> list[Bench]:
    """The commands that copy batches byte for byte, held to 1.5x the copy (issue 25)."""
    span = producer_logs.SPAN_MS
    rewrite = 1.5
    return [
        Bench("reindex", size, ["reindex", ctx.src, "OUT"], ["copy"], rewrite, writes=True),
        Bench("resegment", f"{size}, to {producer_logs.size_name(2 * ctx.args.segment_bytes)} segments",
              ["resegment", ctx.src, "OUT", "--segment-bytes", str(2 * ctx.args.segment_bytes)], ["copy"],
              rewrite, writes=True),
        Bench("restore", f"{size}, from a local directory", ["restore", "PREPARED", "OUT"], ["copy"], rewrite,
              writes=True, prepare=["archive", ctx.src, "PREPARED"]),
        Bench("retain", f"{size}, retention.ms 40 % of its span",
              ["retain", ctx.src, "OUT", "--retention-ms", str(int(0.4 * span)),
               "--now", str(producer_logs.BASE_TIMESTAMP + span)], ["copy"], rewrite, writes=True),
        Bench("archive", f"{size}, to a local directory", ["archive", ctx.src, "ARCHIVE"], ["copy"], rewrite,
              writes=True),
    ]


def clear(ctx: Context) -> None:
    for path in (ctx.out, ctx.archive):
        if os.path.isfile(path):  # a report's page
            os.remove(path)
        shutil.rmtree(path, ignore_errors=True)
    subprocess.run(["sync"], check=True)  # earlier writes are flushed outside the timed span


def kfmt_argv(ctx: Context, argv: list[str]) -> list[str]:
    argv = [{"OUT": ctx.out, "ARCHIVE": ctx.archive, "PREPARED": ctx.prepared}.get(a, a) for a in argv]
    if ctx.args.master and argv[0] in MASTER_COMMANDS:
        argv += ["--master", ctx.args.master]
    return [KFMT, *argv]


def measure_floor(ctx: Context, floor: Floor) -> None:
    clear(ctx)
    script = floor.script
    then = ["sync"] if floor.writes else None
    result = shell(*script[1:], then=then) if script[0] == "shell" else run(script, then=then)
    if result.code:
        raise SystemExit(f"bench: the floor {floor.label!r} failed: {result.error}")
    floor.runs.append(result)


def measure_bench(ctx: Context, bench: Bench, table: dict[str, Floor]) -> dict:
    runs: list[Run] = []
    if ctx.args.floors_per_row:
        for key in bench.floors:
            table[key].runs = []
    shutil.rmtree(ctx.prepared, ignore_errors=True)
    if bench.prepare:
        prepared = run(kfmt_argv(ctx, bench.prepare))
        if prepared.code:
            return {"error": f"{bench.prepare[0]} (preparing) failed: {prepared.error}"}
    for _ in range(ctx.args.runs):
        clear(ctx)
        result = run(kfmt_argv(ctx, bench.argv), then=["sync"] if bench.writes else None, ok=bench.ok)
        if result.code not in bench.ok:
            return {"error": f"exit {result.code}: {result.error}"}
        runs.append(result)
        for key in bench.floors:  # floors interleaved with the command, so load falls on both
            if len(table[key].runs) < ctx.args.floor_runs:
                measure_floor(ctx, table[key])
    clear(ctx)
    shutil.rmtree(ctx.prepared, ignore_errors=True)
    row = {"wall": [r.wall for r in runs], "median": statistics.median(r.wall for r in runs),
           "cpu": [r.cpu for r in runs], "median_cpu": statistics.median(r.cpu for r in runs),
           "peak_rss": max(r.peak_rss for r in runs), "peak_tree_rss": max(r.peak_tree_rss for r in runs)}
    if bench.floors:
        row["floor"] = sum(statistics.median(r.wall for r in table[k].runs) for k in bench.floors)
        row["ratio"] = row["median"] / row["floor"]
        row["floor_cpu"] = sum(statistics.median(r.cpu for r in table[k].runs) for k in bench.floors)
        row["met"] = row["ratio"] <= bench.target
    else:
        row["met"] = row["median"] <= bench.target
    return row


def compile_bytecode() -> None:
    """kfmt's modules compiled once, untimed, as a user's installed copy has them: pip compiles a
    package's bytecode when it installs it, and the floors' libraries (pyarrow, aiokafka) were so
    installed, but an editable checkout compiles on first import, and not at all where
    PYTHONDONTWRITEBYTECODE is set (it is on the project's machines), which added about 0.1 s of
    compiling to every short command's run."""
    subprocess.run([PY, "-m", "compileall", "-q", *(os.path.join(ROOT, d) for d in ("kfmt", "plugins", "pipelines"))],
                   check=True, stdout=subprocess.DEVNULL)


def ensure_indexed(ctx: Context) -> None:
    """The input with index files (what verify reads: a broker's directory has them), made once by kfmt
    reindex, untimed, and reused."""
    if not os.path.isdir(ctx.indexed):
        print(f"bench: indexing {ctx.src} with kfmt reindex (untimed)", file=sys.stderr, flush=True)
        partial = ctx.indexed + ".partial"
        shutil.rmtree(partial, ignore_errors=True)
        subprocess.run([KFMT, "reindex", ctx.src, partial, "--no-progress"], check=True, stdout=subprocess.DEVNULL)
        os.rename(partial, ctx.indexed)


def print_row(bench: Bench, row: dict, table: dict[str, Floor]) -> None:
    floor_label = " ".join(table[k].label for k in bench.floors) if bench.floors else "target in seconds"
    target = f"<= {bench.target:g}x" if bench.floors else f"<= {bench.target:g} s"
    if bench.target == NO_TARGET:
        target = "(none)"
    if "error" in row:
        print(f"| {bench.command} | {bench.input} | FAILED: {row['error']} | {floor_label} | | | {target} | no | | | "
              f"{os.getloadavg()[0]:.1f} |", flush=True)
        return
    floor = f"{row['floor']:.2f} s" if "floor" in row else "-"
    ratio = f"{row['ratio']:.2f}x" if "ratio" in row else "-"
    cpu = f"{row['median_cpu']:.2f}" + (f" / {row['floor_cpu']:.2f}" if "floor_cpu" in row else "")
    print(f"| {bench.command} | {bench.input} | {row['median']:.2f} s | {floor_label}: {floor} | {ratio} | "
          f"{target} | {'-' if bench.target == NO_TARGET else 'yes' if row['met'] else 'NO'} | {cpu} | {row['peak_rss'] / 2**20:,.0f} MiB "
          f"({row['peak_tree_rss'] / 2**20:,.0f}) | {os.getloadavg()[0]:.1f} |", flush=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", type=producer_logs.parse_size, default=producer_logs.parse_size("2G"),
                   help="input size (2G; 10M..8G)")
    p.add_argument("--input", choices=("both", *producer_logs.MIXES), default="both",
                   help="which generated input (bench/producer_logs.py's mixes): project (every producer "
                        "shape), opaque (issue 25's: incompressible gzip wrappers, v2 lz4) or both (default)")
    p.add_argument("--runs", type=int, default=3, help="runs of each command and floor (median; 3)")
    p.add_argument("--master", help="passed to every command that takes --master (default: kfmt's own)")
    p.add_argument("--floor-runs", type=int, help="runs of each floor (default: --runs); the script floors "
                   "of export and cat take minutes at 2G")
    p.add_argument("--floors-per-row", action="store_true",
                   help="measure each row's floors anew, alternating with its runs (on a shared machine whose "
                        "load changes from row to row; default: each floor measured with the first row using it)")
    p.add_argument("--only", action="append", help="run only this command (repeatable), e.g. --only export")
    p.add_argument("--skip", action="append", default=[], help="leave this command out (repeatable)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--segment-bytes", type=producer_logs.parse_size, default=64 << 20)
    p.add_argument("--partitions", type=int, default=2, help="partitions per topic (2)")
    p.add_argument("--root", default="/tmp/kfmt-bench", help="where inputs are generated (and reused)")
    p.add_argument("--json", help="where to write the results (default bench/results/commands-<time>.json)")
    args = p.parse_args(argv)
    args.floor_runs = args.floor_runs or args.runs
    started = datetime.datetime.now().isoformat(timespec="seconds")
    path = args.json or os.path.join(HERE, "results", f"commands-{started.replace(':', '')}.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    results = {"started": started, "args": vars(args), "inputs": [], "rows": []}
    t0 = time.perf_counter()
    mixes = list(producer_logs.MIXES) if args.input == "both" else [args.input]
    contexts = [(mix, input_context(args, mix)) for mix in mixes]
    chosen = [(mix, ctx, selected_benches(ctx, args)) for mix, ctx in contexts]
    if not any(selected for _, _, selected in chosen):
        raise SystemExit(f"bench: --only {args.only} matches no command")
    for mix, ctx, selected in chosen:
        if selected:
            measure_input(ctx, mix, selected, results, path, t0)
    print(f"\nload at end {results['load_end'][0]:.2f}; {results['seconds']:.0f} s in all; results: {path}")
    return 0


def input_context(args, mix: str) -> Context:
    """The generated input of one mix (made on first use, in a child process so that this one stays
    small: see processes.py)."""
    subprocess.run([PY, "-c", "import sys; sys.path.insert(0, sys.argv[1]); import producer_logs as p; "
                    "p.cached(sys.argv[2], *map(int, sys.argv[3:7]), mix=sys.argv[7])", HERE, args.root,
                    str(args.size), str(args.seed), str(args.segment_bytes), str(args.partitions), mix],
                   check=True)
    name = producer_logs.dir_name(args.size, args.seed, args.segment_bytes, args.partitions, mix=mix)
    with open(os.path.join(args.root, name + ".json")) as f:
        facts = json.load(f)
    facts.setdefault("mix", mix)
    return Context(args, facts, os.path.join(args.root, name + "-indexed"))


def selected_benches(ctx: Context, args) -> list[Bench]:
    every = benches(ctx)
    exact = {b.command for b in every} & set(args.only or ())
    # `--only upgrade` is upgrade alone; `--only cat` is `cat --format json` (no row is called cat)
    return [b for b in every if (not args.only or b.command in args.only
            or (b.command.split()[0] in args.only and b.command.split()[0] not in exact))
            and b.command not in args.skip]


def measure_input(ctx: Context, mix: str, selected: list[Bench], results: dict, path: str, t0: float) -> None:
    """Every selected row on one input: a table of its own, each row added to `results` (written to
    `path` after every row, so that an interrupted run keeps what it measured)."""
    facts, args = ctx.facts, ctx.args
    if any(b.command == "verify" or b.command.startswith("report") for b in selected):
        ensure_indexed(ctx)
        names = {b.command for b in selected}  # verify's and report's input labels need the indexed copy
        selected = [b for b in benches(ctx) if b.command in names]
    shell('find "$@" -type f -exec cat {} + > /dev/null', ctx.src)  # the input in the page cache
    compile_bytecode()
    table = floors(ctx)
    load = os.getloadavg()
    print(f"\nkfmt whole commands {results['started']}, input {mix}: {mb(facts['bytes'])} ({facts['records']:,} "
          f"records, generated in {facts['generate_seconds']:.0f} s), {os.cpu_count()} cores, load {load[0]:.2f}, "
          f"median of {args.runs} (floors {args.floor_runs}), master {args.master or 'kfmt default'}\n")
    print("| command | input | kfmt | floor | ratio | target | met | CPU s, kfmt / floor | peak RSS, largest process "
          "(tree) | load |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |", flush=True)
    results["inputs"].append({"mix": mix, "facts": facts, "load_start": load})
    for bench in selected:
        row = measure_bench(ctx, bench, table)
        print_row(bench, row, table)
        results["rows"].append({"input_mix": mix, "command": bench.command, "input": bench.input,
                                "argv": kfmt_argv(ctx, bench.argv), "target": bench.target,
                                "floors": {k: {"label": table[k].label, "wall": [r.wall for r in table[k].runs]}
                                           for k in bench.floors}, **row})
        results.update(load_end=os.getloadavg(), seconds=time.perf_counter() - t0)
        with open(path, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
