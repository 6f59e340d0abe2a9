"""Inputs for `kfmt report`'s tests: the samples, the Kafka 4.1 corpus as the broker's log directory
(without the truth files beside it), a damaged copy of the samples, and what `kfmt info` and `kfmt
verify` say of each (the numbers the report must show)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from support.cli import run_kfmt
from support.corpus import REAL_DIRS, TESTS
from support.corpus4 import REALKAFKA4
from support.log_dirs import make_log_dir

SAMPLES = TESTS.parent / "samples" / "kafka-logs"


def corpus36_log_dir(root: Path) -> Path:
    """The Kafka 3.6 broker's partitions (every message format and codec) in its log directory."""
    return make_log_dir(root / "kafka36-logs", REAL_DIRS)


def corpus4_log_dir(root: Path) -> Path:
    """The 4.1 broker's log directory as it left it: partitions and log-directory files, no truth."""
    dst = root / "kafka4-logs"
    shutil.copytree(REALKAFKA4, dst, ignore=lambda _d, names: [n for n in names if ".truth" in n])
    return dst


def damaged_samples(root: Path) -> Path:
    """A copy of the samples with a flipped byte inside a zstd batch (a CRC error, records that do not
    decode), a v1 segment cut in the middle of an entry (framing breaks before its end), and a gzip
    wrapper whose offset field (outside its CRC, docs/format.md §3.1) is no longer its last inner
    message's: only `--deep`, which inflates it, finds that."""
    dst = root / "damaged-logs"
    shutil.copytree(SAMPLES, dst)
    zstd = sorted((dst / "v2-zstd-0").glob("*.log"))[2]
    data = bytearray(zstd.read_bytes())
    data[300] ^= 0xFF
    zstd.write_bytes(bytes(data))
    gzip_segment = sorted((dst / "v1-gzip-0").glob("*.log"))[1]
    gzip_segment.write_bytes(gzip_segment.read_bytes()[:3000])
    # in the last segment, past what the estimate's sample (the partitions' heads) reads
    last = sorted((dst / "v1-gzip-0").glob("*.log"))[-1]
    data = bytearray(last.read_bytes())
    wrapper = 2932  # the second wrapper: offsets 382..387
    assert int.from_bytes(data[wrapper:wrapper + 8], "big") == 387
    data[wrapper:wrapper + 8] = (386).to_bytes(8, "big")
    last.write_bytes(bytes(data))
    return dst


def info_json(path: Path) -> dict[str, dict]:
    """`kfmt info --format json` of each partition, by partition name. When info refuses the whole
    directory (bad data: exit 65), each partition is asked alone and those it refuses are left out."""
    result = run_kfmt("info", path, "--format", "json")
    if result.code != 0:
        assert result.code == 65, result.err
        return {name: info for part in sorted(p for p in path.iterdir() if p.is_dir())
                for name, info in _infos(run_kfmt("info", part, "--format", "json")).items()}
    return _infos(result)


def _infos(result) -> dict[str, dict]:
    if result.code != 0:
        return {}
    return {f"{i['topic']}-{i['partition']}": i for i in map(json.loads, result.lines)}


def verify_json(path: Path, *args) -> dict:
    result = run_kfmt("verify", path, "--format", "json", *args)
    assert result.code in (0, 65), result.err
    return json.loads(result.out)


def report_json(path: Path, *args) -> dict:
    result = run_kfmt("report", path, "--format", "json", "--no-progress", *args)
    assert result.code == 0, result.err
    return json.loads(result.out)
