"""One kfmt command from this checkout and from another one (BASE: a checkout of main, say), in fresh
processes taking turns, ROUNDS rounds: the median wall and CPU (user + system, from wait4, children
included) seconds of each, their ratios (this / base), and the 1-minute load average after each round.
On a shared machine the turns put what load there is on both alike; the CPU ratio is the steadier.

    bench/run.sh ab /work/base 3 info /tmp/kfmt-bench-speed/producer-2G-seed1-seg64M-p2
    bench/run.sh ab /work/base 3 upgrade /tmp/kfmt-bench-speed/producer-2G-seed1-seg64M-p2 {out}

`{out}` becomes a fresh path under a scratch directory (DST must not exist), removed after each run.
Each checkout runs its own bin/kfmt (its own .venv); stdout is discarded, a failed run stops it all.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent


def run_once(checkout: Path, args: list[str], scratch: Path) -> tuple[float, float]:
    out = scratch / "out"
    argv = [str(checkout / "bin" / "kfmt")] + [a.replace("{out}", str(out)) for a in args]
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    stderr = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    shutil.rmtree(out, ignore_errors=True)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {stderr.decode(errors='replace')[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base", type=Path, help="the other checkout")
    parser.add_argument("rounds", type=int)
    parser.add_argument("command", nargs=argparse.REMAINDER, help="kfmt's arguments ({out}: a fresh DST)")
    a = parser.parse_args()
    runs: dict[str, list] = {"this": [], "base": []}
    with tempfile.TemporaryDirectory(prefix="kfmt-ab-") as scratch:
        for r in range(a.rounds):
            order = [("this", HERE), ("base", a.base)] if r % 2 == 0 else [("base", a.base), ("this", HERE)]
            for name, checkout in order:
                runs[name].append(run_once(checkout, a.command, Path(scratch)))
            load = os.getloadavg()[0]
            print(f"round {r + 1}: " + ", ".join(f"{n} {runs[n][-1][0]:.2f} s wall {runs[n][-1][1]:.2f} s cpu"
                                                 for n in ("this", "base")) + f"; load {load:.2f}", flush=True)
    med = {n: [statistics.median(x[i] for x in runs[n]) for i in (0, 1)] for n in runs}
    print(f"kfmt {' '.join(a.command)}: median this {med['this'][0]:.2f} s wall {med['this'][1]:.2f} s cpu, "
          f"base {med['base'][0]:.2f} s wall {med['base'][1]:.2f} s cpu; "
          f"ratio wall {med['this'][0] / med['base'][0]:.3f}, cpu {med['this'][1] / med['base'][1]:.3f}")


if __name__ == "__main__":
    main()
