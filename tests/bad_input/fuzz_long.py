"""The long fuzz run: the cases of tests/support/fuzzing.py with any seed, as many as time allows, on either or
both decode paths; or one case replayed. Not collected by pytest (docs/reliability.md has the results).

    .venv/bin/python tests/bad_input/fuzz_long.py --minutes 60                   # both tiers, both paths
    .venv/bin/python tests/bad_input/fuzz_long.py --seed 7 --start 52 --cases 1 --tier commands --verbose
    .venv/bin/python tests/bad_input/fuzz_long.py --minutes 10 --json results.json

Cases are deterministic (seed, index), so every finding printed comes with the command that replays
it; --keep DIR writes a case's damaged directory there to look at.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/, for support

from support.fuzzing import TIERS, build_case, run_fuzz  # noqa: E402
from support.tools import speedups_built  # noqa: E402

# the share of a run's time each tier gets: the readers tier runs about 30 cases for each commands case
SHARE = {"readers": 0.35, "commands": 0.65}
CHUNK = {"readers": 2000, "commands": 150}  # cases per run_fuzz call: progress is printed between


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=int(time.strftime("%Y%m%d")),
                   help="seed of the cases (default: today's date)")
    p.add_argument("--start", type=int, default=0, help="first case index")
    p.add_argument("--cases", type=int, help="cases per tier and path (default: as many as --minutes allow)")
    p.add_argument("--minutes", type=float, default=30, help="time for the whole run (default 30)")
    p.add_argument("--tier", choices=TIERS, action="append", help="tier(s) to run (default: both)")
    p.add_argument("--path", choices=("pure", "native"), action="append",
                   help="decode path(s) (default: both, native only when kfmt._speedups is built)")
    p.add_argument("--case-timeout", type=float, default=120, help="seconds before a case is a hang")
    p.add_argument("--json", metavar="FILE", help="write the results (counts, findings) as JSON")
    p.add_argument("--keep", metavar="DIR", help="write each case's damaged directory under DIR (with --cases)")
    p.add_argument("--verbose", action="store_true", help="describe every case")
    args = p.parse_args(argv)
    tiers = args.tier or list(TIERS)
    paths = args.path or (["pure", "native"] if speedups_built() else ["pure"])
    if args.keep:
        for i in range(args.start, args.start + (args.cases or 1)):
            case = build_case(args.seed, i, Path(args.keep) / f"case-{args.seed}-{i}")
            print(case.label)
    runs, findings = [], []
    began = time.monotonic()
    for tier in tiers:
        for path in paths:
            budget = args.minutes * 60 * SHARE[tier] / len(paths) * (len(TIERS) / len(tiers))
            index, stop, spent = args.start, args.start + (args.cases or 10**9), 0.0
            counts, mutations, cases = Counter(), Counter(), 0
            while index < stop and (args.cases or spent < budget):
                chunk = min(CHUNK[tier], stop - index)
                result = run_fuzz(args.seed, chunk, tier, path, case_timeout=args.case_timeout,
                                  budget=None if args.cases else budget - spent, start=index)
                spent += result.seconds
                cases += result.cases
                counts += result.kinds
                mutations += result.mutations
                index += result.cases
                for f in result.findings:
                    findings.append(dict(f, tier=tier, path=path))
                    print(f"finding: {f['case']} [{f['target']}] {f['problem'][:300]}", flush=True)
                print(f"{tier}/{path}: {cases} cases, {spent:.0f} s, {len(findings)} findings so far", flush=True)
                if args.verbose:
                    _describe(args.seed, index - result.cases, result.cases)
                if result.cases == 0:
                    break
            runs.append({"tier": tier, "path": path, "seed": args.seed, "first": args.start, "cases": cases,
                         "seconds": round(spent), "files": dict(sorted(counts.items())),
                         "mutations": dict(sorted(mutations.items()))})
    for f in findings:
        seed, index = f["case"].split()[1].split(":")
        print(f"FINDING {f['case']} [{f['target']}] {f['problem']}\n  replay: .venv/bin/python "
              f"tests/bad_input/fuzz_long.py --seed {seed} --start {index} --cases 1 --tier {f['tier']} "
              f"--path {f['path']} --verbose")
    total = sum(r["cases"] for r in runs)
    print(f"{total} cases in {time.monotonic() - began:.0f} s, {len(findings)} findings")
    for r in runs:
        print(f"  {r['tier']}/{r['path']}: {r['cases']} cases (seed {r['seed']}, from {r['first']}) "
              f"in {r['seconds']} s; {r['files']}")
    if args.json:
        Path(args.json).write_text(json.dumps({"runs": runs, "findings": findings}, indent=1))
    return 1 if findings else 0


def _describe(seed: int, start: int, count: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(start, start + min(count, 50)):
            print("   ", build_case(seed, i, Path(tmp) / str(i)).label)


if __name__ == "__main__":
    sys.exit(main())
