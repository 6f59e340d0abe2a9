"""Mutations of real broker-written files through every reader, in CI (tests/support/fuzzing.py).

Seeded and deterministic: case i of seed S is the same damaged directory on every machine. Each test
runs the first COUNT cases of its tier in worker processes (a memory ceiling, a small decompression
limit, a watchdog per case) and fails on any finding, listing each with the command that replays it.
Both decode paths are fuzzed: the compiled kernels (when kfmt._speedups is built) and the pure-Python
references (KFMT_PURE_PYTHON=1). A time budget keeps CI bounded on a loaded machine: the cases run are
then a prefix of the same sequence, and at least a quarter of them must have run.

tests/bad_input/fuzz_long.py runs the same cases with other seeds and many more of them.
"""
from __future__ import annotations

import pytest
from support.fuzzing import run_fuzz

SEED = 20261122
TIERS = {  # tier -> (cases, seconds budget per decode path)
    "readers": (1500, 30),
    "commands": (120, 35),
}

pytestmark = [pytest.mark.timeout(300)]


@pytest.fixture(scope="module", params=["pure", pytest.param("native", marks=pytest.mark.needs("speedups-built"))])
def decode_path(request) -> str:
    return request.param


def replay(finding: dict, tier: str, path: str) -> str:
    seed, index = finding["case"].split()[1].split(":")
    return (f"python tests/bad_input/fuzz_long.py --seed {seed} --start {index} --cases 1 --tier {tier} "
            f"--path {path} --verbose")


@pytest.mark.parametrize("tier", list(TIERS))
def test_no_mutation_of_a_real_segment_makes_a_reader_fail_otherwise_than_with_a_data_error(tier, decode_path):
    count, budget = TIERS[tier]
    result = run_fuzz(SEED, count, tier, decode_path, case_timeout=60, budget=budget)
    print(result.summary())
    assert result.cases >= count // 4, f"only {result.cases} of {count} cases ran in {budget} s"
    problems = [f"{f['case']} [{f['target']}]: {f['problem']}\n    replay: {replay(f, tier, decode_path)}"
                for f in result.findings]
    assert not problems, "\n".join(problems)
