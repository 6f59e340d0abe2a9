"""kfmt cat --format json equals what a real Java consumer read from every corpus directory."""
import gzip
import json

import pytest
from support.cli import run_kfmt
from support.corpus import REAL_DIRS, REALKAFKA


def truth(name: str, kind: str = "records") -> list[dict]:
    with gzip.open(REALKAFKA / f"{name}.truth" / f"{kind}.jsonl.gz", "rt") as f:
        return [json.loads(line) for line in f]


@pytest.mark.parametrize("name", REAL_DIRS)
def test_cat_json_equals_consumer_records(name):
    result = run_kfmt("cat", REALKAFKA / name, "--format", "json")
    assert result.code == 0, result.err
    assert [json.loads(line) for line in result.lines] == truth(name)


@pytest.mark.parametrize("name", [d for d in REAL_DIRS
                                  if (REALKAFKA / f"{d}.truth" / "records.read_committed.jsonl.gz").exists()])
def test_cat_read_committed_equals_consumer(name):
    result = run_kfmt("cat", REALKAFKA / name, "--format", "json", "--isolation", "read_committed")
    assert result.code == 0, result.err
    assert [json.loads(line) for line in result.lines] == truth(name, "records.read_committed")
