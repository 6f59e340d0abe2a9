"""What Kafka's log loading repairs is not a problem; what it leaves broken is.

* Missing companion files (LogSegment.sanityCheck, LogLoader): a segment without its `.index` is
  recovered whole on load, which rebuilds its `.index` and `.timeindex` from the log, so `verify`
  notes it; a `.timeindex` missing beside an existing `.index` is never rebuilt (Kafka creates an
  empty one), so it is a problem.

Inputs are copies of real-broker partitions (the realkafka corpus), with files removed.
"""
from __future__ import annotations

import json
import shutil

import pytest

from conftest import REALKAFKA, real_dir_params, run_kfmt


def verify(path) -> tuple[int, list[dict]]:
    result = run_kfmt("verify", path, "--format", "json")
    return result.code, json.loads(result.out)["problems"]


def checks(problems: list[dict], severity: str) -> set[str]:
    return {p["check"] for p in problems if p["severity"] == severity}


@pytest.mark.parametrize("name", real_dir_params(["v2-none-0", "v1-gzip-0", "v0-none-0", "txn-v2-none-0"]))
def test_a_partition_without_any_index_is_rebuilt_on_load_so_it_verifies(name, tmp_path):
    part = tmp_path / name
    shutil.copytree(REALKAFKA / name, part)
    logs = sorted(part.glob("*.log"))
    for f in [*part.glob("*.index"), *part.glob("*.timeindex")]:
        f.unlink()
    code, problems = verify(part)
    assert code == 0, [p for p in problems if p["severity"] == "error"]
    missing = [p for p in problems if p["check"] == "offset-index-missing"]
    assert missing and all(p["severity"] == "note" for p in missing)
    assert sorted(p["file"] for p in missing) == [str(f) for f in logs]
    assert "time-index-missing" not in checks(problems, "error")


@pytest.mark.parametrize("name", real_dir_params(["v2-none-0", "v1-gzip-0"]))
def test_a_time_index_missing_beside_its_offset_index_is_a_problem(name, tmp_path):
    part = tmp_path / name
    shutil.copytree(REALKAFKA / name, part)
    victim = sorted(part.glob("*.timeindex"))[1]
    victim.unlink()
    code, problems = verify(part)
    assert code == 65
    errors = [p for p in problems if p["severity"] == "error"]
    assert [(p["check"], p["file"]) for p in errors] == \
        [("time-index-missing", str(victim.with_suffix(".log")))]
