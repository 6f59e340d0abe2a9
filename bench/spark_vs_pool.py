"""Spark against the pool on whole commands, with Spark's fixed start measured in the same run
(docs/performance.md, "Spark against the pool"): what a job pays on Spark beyond its start.

    .venv/bin/python bench/spark_vs_pool.py LOGDIR [--spark local[2]] [--pool pool] [--runs 1]
        [--only resegment --only upgrade ...] [--out DIR]

For every command (resegment to segments twice the input's, upgrade of the v1-single topic, export
to Parquet, reindex) and run, in this order within the same minute: the start (a job of two trivial
tasks, `run_tasks(abs, [-1, -2])`, the whole process), the command on the pool, the command on
Spark. Each is a fresh `bin/kfmt` process, output removed and `sync` run before it (untimed), `sync`
inside the timed span. Wall seconds and CPU seconds of every process the command starts: Spark's
JVM and its Python workers included (a cpuacct cgroup where this machine lets one be made, else
psutil polling of the process tree, which misses processes that end between two polls). The last
column is Spark's wall time minus the pool's minus the start: what Spark costs beyond its start.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time

import psutil

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
KFMT = os.path.join(ROOT, "bin", "kfmt")
CGROUPS = "/sys/fs/cgroup/cpuacct"
TRIVIAL = "from kfmt.pipelines.runner import run_tasks; run_tasks(abs, [-1, -2], master={!r}, progress=False)"


def command_argv(command: str, src: str, out: str) -> list[str]:
    parts = sorted(n for n in os.listdir(src) if os.path.isdir(os.path.join(src, n)))
    segment_bytes = 2 * max(os.path.getsize(os.path.join(src, p, f)) for p in parts
                            for f in os.listdir(os.path.join(src, p)) if f.endswith(".log"))
    return {
        "resegment": ["resegment", src, out, "--segment-bytes", str(max(segment_bytes, 1 << 20))],
        "upgrade": ["upgrade", src, out, "--topic", "v1-single"],
        "export": ["export", src, out, "--format", "parquet"],
        "reindex": ["reindex", src, out],
    }[command]


class Measured:
    """Run argv; wall and CPU seconds of it and all its descendants."""

    def __init__(self, argv: list[str], then_sync: bool):
        self.cgroup = None
        try:
            path = os.path.join(CGROUPS, f"kfmt-bench-{os.getpid()}-{time.monotonic_ns()}")
            os.mkdir(path)
            self.cgroup = path
        except OSError:
            pass
        started = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                preexec_fn=self._enter if self.cgroup else None)
        polled = self._poll(proc) if self.cgroup is None else None
        _, err = proc.communicate()
        if proc.returncode == 0 and then_sync:
            subprocess.run(["sync"], check=True)
        self.wall = time.perf_counter() - started
        self.code = proc.returncode
        self.error = err.decode(errors="replace").strip().splitlines()[-1:] if proc.returncode else []
        self.cpu = self._cgroup_cpu() if self.cgroup else polled

    def _enter(self) -> None:
        with open(os.path.join(self.cgroup, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))

    def _cgroup_cpu(self) -> float:
        for _ in range(100):  # processes of the tree still ending (the JVM after its driver)
            with open(os.path.join(self.cgroup, "cgroup.procs")) as f:
                if not f.read().split():
                    break
            time.sleep(0.1)
        with open(os.path.join(self.cgroup, "cpuacct.usage")) as f:
            cpu = int(f.read()) / 1e9
        try:
            os.rmdir(self.cgroup)
        except OSError:
            pass
        return cpu

    @staticmethod
    def _poll(proc) -> float:
        seen: dict[int, float] = {}
        root = psutil.Process(proc.pid)
        while proc.poll() is None:
            try:
                procs = [root, *root.children(recursive=True)]
            except psutil.Error:
                break
            for p in procs:
                try:
                    t = p.cpu_times()
                    seen[p.pid] = t.user + t.system
                except psutil.Error:
                    pass
            time.sleep(0.2)
        return sum(seen.values())


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("src", help="a producer-shaped log directory (bench/producer_logs.py)")
    p.add_argument("--spark", default="local[2]")
    p.add_argument("--pool", default="pool")
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--only", action="append", help="resegment, upgrade, export, reindex (repeatable)")
    p.add_argument("--out", default=None, help="scratch directory for the outputs (default: a temporary one)")
    args = p.parse_args(argv)
    commands = args.only or ["resegment", "upgrade", "export", "reindex"]
    scratch = args.out or os.path.join("/tmp", f"kfmt-spark-vs-pool-{os.getpid()}")
    os.makedirs(scratch, exist_ok=True)
    out = os.path.join(scratch, "out")
    python = sys.executable
    print(f"| command | run | start wall / CPU | pool wall / CPU | Spark wall / CPU | Spark - pool - start, wall / CPU | load |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |", flush=True)
    for command in commands:
        for run in range(args.runs):
            load = os.getloadavg()[0]
            start = Measured([python, "-c", TRIVIAL.format(args.spark)], False)
            rows = []
            for master in (args.pool, args.spark):
                shutil.rmtree(out, ignore_errors=True)
                subprocess.run(["sync"], check=True)
                rows.append(Measured([KFMT, *command_argv(command, args.src, out), "--master", master,
                                      "--no-progress"], True))
            shutil.rmtree(out, ignore_errors=True)
            failed = [m for m in (start, *rows) if m.code]
            if failed:
                print(f"| {command} | {run + 1} | failed: {failed[0].error} |||||", flush=True)
                continue
            pool, spark = rows
            print(f"| {command} | {run + 1} | {start.wall:.1f} / {start.cpu:.1f} | {pool.wall:.1f} / {pool.cpu:.1f} | "
                  f"{spark.wall:.1f} / {spark.cpu:.1f} | {spark.wall - pool.wall - start.wall:+.1f} / "
                  f"{spark.cpu - pool.cpu - start.cpu:+.1f} | {load:.1f}-{os.getloadavg()[0]:.1f} |", flush=True)
    if not args.out:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
