"""The worker pool started before a command plans (kfmt.cli._transform.warm_pool, kfmt.pipelines.pool
.prestart): it starts only for an input the engine sends to the pool, sized from a directory listing
as find_partitions selects partitions, and the job then runs on the very workers started."""
from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from kfmt.cli._transform import _local_logs, warm_pool
from kfmt.partition.layout import find_partitions
from kfmt.pipelines import pool
from kfmt.pipelines.runner import run_tasks
from kfmt.storage.store import open_storage

SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "kafka-logs"


@pytest.fixture(autouse=True)
def no_pool_left():
    pool.shutdown()
    yield
    pool.shutdown()


@pytest.mark.parametrize("topic,partition", [(None, None), ("v2-*", None), ("*", 0), ("nothing", None)])
def test_the_listing_sizes_what_find_partitions_selects(topic, partition):
    storage, path = open_storage(str(SAMPLES))
    try:
        parts = find_partitions(storage, path, topic, partition)
    except Exception:  # a filter that selects nothing: the command says so; the listing finds nothing
        parts = []
    size = sum(seg.size for p in parts for seg in p.segments)
    assert _local_logs(str(SAMPLES), topic, partition) == (size, len(parts))
    one = sorted(SAMPLES.glob("*-0"))[0]
    assert _local_logs(str(one), None, None) == (sum(f.stat().st_size for f in one.glob("*.log")), 1)


def test_nothing_starts_for_a_small_input_a_url_or_a_dry_run():
    args = argparse.Namespace(src=str(SAMPLES), dst="out", topic=None, partition=None, master=None,
                              dry_run=False)
    warm_pool(args, "json")  # the samples are far below the pool threshold
    assert pool._executor is None
    warm_pool(argparse.Namespace(**{**vars(args), "master": "pool", "dry_run": True}), "json")
    assert pool._executor is None
    warm_pool(argparse.Namespace(**{**vars(args), "master": "pool", "src": "s3://bucket/logs"}), "json")
    assert pool._executor is None


def test_the_job_runs_on_the_workers_started():
    args = argparse.Namespace(src=str(SAMPLES), dst="out", topic=None, partition=None,
                              master="local-pool[2]", dry_run=False)
    warm_pool(args, "json")
    started = pool._executor
    assert started is not None and len(started._processes) == 2
    assert run_tasks(abs, [-1, -2], master="local-pool[2]", progress=False) == [1, 2]
    assert pool._executor is started
