"""Which engine runs a command's tasks (kfmt.pipelines.engine) and the pool of local worker processes
(kfmt.pipelines.pool): the choice by input size and --master / KFMT_SPARK_MASTER, results identical
to the in-process run and to Spark, errors that keep their meaning, and no JVM for small inputs."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from support import engine_tasks
from support.cli import run_kfmt
from support.corpus import REAL_DIRS, REALKAFKA

from kfmt.errors import DataError, KfmtError, UsageError
from kfmt.pipelines.engine import (
    MASTER_ENV,
    POOL_THRESHOLD_BYTES,
    choose_engine,
    cores,
    human_bytes,
    spark_threshold_bytes,
)
from kfmt.pipelines.runner import run_tasks
from kfmt.transforms.export import REPORT_NAME as EXPORT_REPORT_NAME
from kfmt.transforms.export import SUCCESS_NAME
from kfmt.transforms.export_state import STATE_NAME
from kfmt.transforms.report import REPORT_NAME

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples" / "kafka-logs"
NOW_MS = 1_700_000_000_000
NO_ENV: dict = {}
SPARK_THRESHOLD_BYTES = spark_threshold_bytes()  # for the cores this process may use
SPARK_AT = human_bytes(SPARK_THRESHOLD_BYTES)


# --- the choice -----------------------------------------------------------------------------------

@pytest.mark.parametrize("size, engine", [
    (0, "inprocess"), (POOL_THRESHOLD_BYTES - 1, "inprocess"), (POOL_THRESHOLD_BYTES, "pool"),
    (SPARK_THRESHOLD_BYTES - 1, "pool"), (SPARK_THRESHOLD_BYTES, "spark"), (8 * SPARK_THRESHOLD_BYTES, "spark")])
def test_auto_chooses_by_input_size(size, engine):
    chosen = choose_engine(None, size, env=NO_ENV)
    assert (chosen.engine, chosen.master) == (engine, "auto")
    if engine == "spark":
        assert chosen.spark_master == "local[*]"
        assert f"at or above the {SPARK_AT} threshold for Spark" in chosen.why
    if engine == "pool":
        assert chosen.workers == cores()
        assert f"below the {SPARK_AT} threshold for Spark" in chosen.why
    assert choose_engine("auto", size, env=NO_ENV) == chosen


def test_the_why_names_the_input_size():
    assert (choose_engine(None, 120 << 20, env=NO_ENV, spark_threshold=1 << 30).why
            == "input 120 MB below the 1 GB threshold for Spark")
    assert choose_engine(None, 5 << 20, env=NO_ENV).why == "input 5 MB below the 64 MB threshold for a worker pool"


def test_the_spark_threshold_grows_with_the_cores():
    """Spark's start is fixed while the pool's job gets shorter with every core (2 GB per core)."""
    assert [spark_threshold_bytes(n) >> 30 for n in (1, 2, 8)] == [2, 4, 16]
    assert SPARK_THRESHOLD_BYTES == spark_threshold_bytes(cores())


def test_auto_takes_threads_for_work_that_releases_the_gil_between_the_thresholds():
    asked = []

    def releases_gil():
        asked.append(True)
        return True

    for size, engine in [(POOL_THRESHOLD_BYTES - 1, "inprocess"), (POOL_THRESHOLD_BYTES, "threads"),
                         (SPARK_THRESHOLD_BYTES - 1, "threads"), (SPARK_THRESHOLD_BYTES, "spark")]:
        chosen = choose_engine(None, size, threads_suffice=releases_gil, env=NO_ENV)
        assert (chosen.engine, chosen.master) == (engine, "auto")
    assert len(asked) == 2  # asked only where the answer decides
    chosen = choose_engine(None, 120 << 20, threads_suffice=releases_gil, env=NO_ENV, spark_threshold=1 << 30)
    assert chosen.workers == cores()
    assert chosen.why == ("input 120 MB below the 1 GB threshold for Spark, its work in kernels that "
                          "release the GIL: threads, with no worker processes to start")
    assert chosen.describe().startswith(f"on {cores()} thread")
    assert choose_engine(None, 120 << 20, threads_suffice=lambda: False, env=NO_ENV).engine == "pool"
    assert choose_engine("pool", 120 << 20, threads_suffice=releases_gil, env=NO_ENV).engine == "pool"


@pytest.mark.parametrize("master, engine, workers", [
    ("inprocess", "inprocess", 1), ("threads", "threads", cores()), ("local-threads[3]", "threads", 3),
    ("local-threads[*]", "threads", cores()), ("pool", "pool", cores()), ("local-pool[3]", "pool", 3),
    ("local-pool[*]", "pool", cores()), ("local", "spark", 1), ("local[2]", "spark", 2),
    ("local[*]", "spark", cores()), ("local[4,2]", "spark", 4), ("spark://10.0.0.1:7077", "spark", None),
    ("yarn", "spark", None), ("k8s://https://10.0.0.1:6443", "spark", None)])
def test_explicit_masters_keep_their_meaning_whatever_the_size(master, engine, workers):
    for size in (0, 10 * SPARK_THRESHOLD_BYTES):
        chosen = choose_engine(master, size, env={MASTER_ENV: "pool"})
        assert (chosen.engine, chosen.master, chosen.workers) == (engine, master, workers)
        assert chosen.why == f"--master {master}"
        if engine == "spark":
            assert chosen.spark_master == master  # handed to Spark as given


def test_the_site_default_comes_after_the_command_line():
    big = 10 * SPARK_THRESHOLD_BYTES
    assert choose_engine(None, big, env={MASTER_ENV: "pool"}).why == f"{MASTER_ENV} pool"
    assert choose_engine(None, 0, env={MASTER_ENV: "yarn"}).master == "yarn"
    assert choose_engine("inprocess", big, env={MASTER_ENV: "pool"}).engine == "inprocess"
    assert choose_engine(None, big, env={MASTER_ENV: "auto"}).engine == "spark"
    assert choose_engine(None, big, env={MASTER_ENV: " "}).engine == "spark"  # empty: not set


def test_memory_storage_stays_in_process_unless_asked_otherwise():
    assert choose_engine(None, 10 * SPARK_THRESHOLD_BYTES, process_local=True, env=NO_ENV).engine == "inprocess"
    assert choose_engine("pool", 0, process_local=True, env=NO_ENV).engine == "pool"


def test_a_pool_without_workers_is_a_usage_error():
    with pytest.raises(UsageError, match="local-pool\\[0\\]"):
        choose_engine("local-pool[0]", 0, env=NO_ENV)
    with pytest.raises(UsageError, match="local-threads\\[0\\]"):
        choose_engine("local-threads[0]", 0, env=NO_ENV)


def test_the_site_default_and_the_command_line_on_a_real_command(tmp_path, monkeypatch):
    monkeypatch.setenv(MASTER_ENV, "local-pool[2]")
    report = upgrade(SAMPLES, tmp_path / "env")
    assert report["engine"] == {"engine": "pool", "master": "local-pool[2]", "workers": 2,
                                "why": f"{MASTER_ENV} local-pool[2]"}
    report = upgrade(SAMPLES, tmp_path / "cli", "--master", "inprocess")
    assert report["engine"]["engine"] == "inprocess"
    monkeypatch.delenv(MASTER_ENV)
    result = run_kfmt("upgrade", SAMPLES, tmp_path / "auto", "--no-progress", "--now", NOW_MS)
    assert result.code == 0, result.err
    assert result.out.rstrip().endswith("in process: input 476 KB below the 64 MB threshold for a worker pool)")


# --- small inputs never start a JVM ---------------------------------------------------------------

@pytest.mark.parametrize("site_default", [None, "pool"])
def test_small_inputs_never_import_pyspark(tmp_path, site_default):
    """`-X importtime` is passed on to spawned workers, so their imports are listed too."""
    env = {k: v for k, v in os.environ.items() if k != MASTER_ENV}
    if site_default:
        env[MASTER_ENV] = site_default
    dst = tmp_path / "out"
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "kfmt", "upgrade", str(SAMPLES), str(dst),
                           "--no-progress", "--now", str(NOW_MS)], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    imported = re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s+(\S+)", done.stderr, re.M)
    assert "kfmt.transforms.upgrade" in imported  # the listing is there
    assert not [m for m in imported if m.split(".")[0] in ("pyspark", "py4j")]
    engine = json.loads((dst / REPORT_NAME).read_text())["engine"]
    assert engine["engine"] == ("pool" if site_default else "inprocess")
    if site_default:  # the workers ran the tasks: their imports are in the listing too
        assert imported.count("kfmt.transforms.upgrade") > 1


# --- the pool gives what in-process and Spark give ------------------------------------------------

LEGACY = [d for d in REAL_DIRS if d.startswith(("v0-", "v1-"))]


def corpus_log_dir(tmp_path: Path, names) -> Path:
    root = tmp_path / "logs"
    root.mkdir()
    for name in names:
        shutil.copytree(REALKAFKA / name, root / name)
    shutil.copy(REALKAFKA / "_logdir-root" / "meta.properties", root)
    return root


def upgrade(src, dst, *args) -> dict:
    result = run_kfmt("upgrade", src, dst, "--no-progress", "--now", NOW_MS, *args)
    assert result.code == 0, result.err
    return json.loads(Path(dst, REPORT_NAME).read_text())


COMMANDS = {
    "upgrade": (LEGACY, ["--now", NOW_MS]),
    "reindex": (REAL_DIRS, ["--now", NOW_MS]),
    "export": (REAL_DIRS, ["--format", "parquet"]),
}


def run_on(command: str, src: Path, dst: Path, master: str) -> dict:
    _names, args = COMMANDS[command]
    result = run_kfmt(command, src, dst, "--no-progress", "--master", master, *args)
    assert result.code == 0, result.err
    report = json.loads((dst / (EXPORT_REPORT_NAME if command == "export" else REPORT_NAME)).read_text())
    expected = {"inprocess": "inprocess", "pool": "pool", "local-pool[2]": "pool",
                "threads": "threads"}.get(master, "spark")
    assert (report["engine"]["engine"], report["engine"]["master"]) == (expected, master)
    return report


def what_was_written(report: dict, dst: Path) -> dict:
    """Everything but the engine and the clock: content digests, counts, every file's bytes."""
    files = {str(p.relative_to(dst)): p.read_bytes() for p in sorted(dst.rglob("*"))
             if p.is_file() and p.name not in (REPORT_NAME, EXPORT_REPORT_NAME, SUCCESS_NAME, STATE_NAME)}
    assert set(files) == set(report["files"])
    return {"inputs": report["inputs"], "outputs": [{**p, "path": None} for p in report["outputs"]],
            "totals": report["totals"], "files": report["files"], "bytes": files}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_the_pool_writes_what_the_in_process_run_writes(tmp_path, command):
    src = corpus_log_dir(tmp_path, COMMANDS[command][0])
    here = run_on(command, src, tmp_path / "inprocess", "inprocess")
    pooled = run_on(command, src, tmp_path / "pool", "pool")
    assert pooled["engine"]["workers"] == cores()
    assert what_was_written(pooled, tmp_path / "pool") == what_was_written(here, tmp_path / "inprocess")


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_threads_write_what_the_in_process_run_writes(tmp_path, command):
    src = corpus_log_dir(tmp_path, COMMANDS[command][0])
    here = run_on(command, src, tmp_path / "inprocess", "inprocess")
    threaded = run_on(command, src, tmp_path / "threads", "threads")
    assert what_was_written(threaded, tmp_path / "threads") == what_was_written(here, tmp_path / "inprocess")


@pytest.mark.spark
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_the_pool_writes_what_spark_writes(tmp_path, command):
    src = corpus_log_dir(tmp_path, COMMANDS[command][0])
    spark = run_on(command, src, tmp_path / "spark", "local[2]")
    pooled = run_on(command, src, tmp_path / "pool", "local-pool[2]")
    assert what_was_written(pooled, tmp_path / "pool") == what_was_written(spark, tmp_path / "spark")


# --- errors keep their meaning --------------------------------------------------------------------

@pytest.mark.parametrize("master", ["local-pool[2]", "local-threads[2]"])
def test_a_data_error_in_a_worker_is_the_same_data_error(master):
    with pytest.raises(DataError) as raised:
        run_tasks(engine_tasks.fail_on_two, [1, 2, 3], master=master, progress=False)
    err = raised.value
    assert (err.message, err.file, err.position, err.offset) == (
        "the CRC does not match", "/logs/t-0/00000000000000000000.log", 123, 45)
    assert run_tasks(engine_tasks.fail_on_two, [3, 1, 4], master=master, progress=False) == [30, 10, 40]


def test_bad_data_read_by_a_pool_worker_exits_65_with_one_line(tmp_path):
    src = corpus_log_dir(tmp_path, ["v2-none-0"])
    log = sorted((src / "v2-none-0").glob("*.log"))[0]
    data = bytearray(log.read_bytes())
    data[200] ^= 0xFF  # inside the first batch's records: its CRC-32C no longer matches
    log.write_bytes(bytes(data))
    outcomes = {}
    for master in ("inprocess", "pool"):
        result = run_kfmt("reindex", src, tmp_path / master, "--no-progress", "--master", master)
        outcomes[master] = (result.code, result.err)
    assert outcomes["pool"] == outcomes["inprocess"]
    code, err = outcomes["pool"]
    assert code == 65
    assert len(err.strip().splitlines()) == 1 and str(log) in err, err
    assert not (tmp_path / "pool").exists()


def test_a_killed_worker_is_one_clear_line():
    with pytest.raises(KfmtError) as raised:
        run_tasks(engine_tasks.die_on_one, [0, 1, 2], master="local-pool[2]", description="upgrade",
                  progress=False)
    message = str(raised.value)
    assert message == "upgrade: a worker process of the pool was killed by SIGKILL (out of memory?); " \
                      "nothing was published"
    # the next job gets a new pool
    assert run_tasks(engine_tasks.fail_on_two, [1, 3], master="local-pool[2]", progress=False) == [10, 30]


def test_an_error_that_is_not_a_kfmt_error_is_one_line():
    with pytest.raises(KfmtError) as raised:
        run_tasks(engine_tasks.not_a_kfmt_error, [7], master="local-pool[2]", description="export",
                  progress=False)
    assert str(raised.value) == "export: a task on the worker pool failed: ValueError: task 7 went wrong"


def test_ctrl_c_stops_the_workers(tmp_path):
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parents[1])!r})
        import psutil
        from support import engine_tasks
        from kfmt.pipelines.runner import run_tasks
        if __name__ == "__main__":
            try:
                run_tasks(engine_tasks.sleep, [60, 60], master="local-pool[2]", progress=False)
            except KeyboardInterrupt:
                workers = [c for c in psutil.Process().children(recursive=True)
                           if "spawn_main" in " ".join(c.cmdline()) and c.status() != psutil.STATUS_ZOMBIE]
                print("interrupted", len(workers), flush=True)
    """)
    path = tmp_path / "interrupted.py"
    path.write_text(script)
    proc = subprocess.Popen([sys.executable, str(path)], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    time.sleep(8)  # the workers have started their tasks
    os.killpg(proc.pid, signal.SIGINT)  # as a terminal sends it: to the whole process group
    out, _ = proc.communicate(timeout=30)
    assert out.split()[:1] == ["interrupted"], out
    assert out.split()[1] == "0"  # no worker left behind


def test_ctrl_c_ends_the_command_with_one_line(tmp_path, monkeypatch):
    import kfmt.api.commands

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(kfmt.api.commands, "reindex", interrupted)
    result = run_kfmt("reindex", SAMPLES, tmp_path / "out")
    assert (result.code, result.out, result.err) == (130, "", "kfmt: interrupted\n")


def test_a_script_without_a_main_guard_can_use_the_pool(tmp_path):
    """Spawned workers do not run the calling script again."""
    script = tmp_path / "unguarded.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parents[1])!r})
        from support import engine_tasks
        from kfmt.pipelines.runner import run_tasks
        print(run_tasks(engine_tasks.fail_on_two, [1, 3, 4], master="local-pool[2]", progress=False))
    """))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout) == (0, "[10, 30, 40]\n"), done.stderr[-2000:]


# --- every core works -----------------------------------------------------------------------------

def test_the_pool_uses_every_worker():
    pids = run_tasks(engine_tasks.pid_after, [0.5] * 4, master="local-pool[2]", progress=False)
    assert len(set(pids)) == 2 and os.getpid() not in pids


def test_threads_run_tasks_at_once():
    """Tasks that wait with the GIL released (as kfmt's kernels, pwrite and SHA-256 do) overlap."""
    started = time.monotonic()
    assert run_tasks(engine_tasks.sleep, [0.5] * 4, master="local-threads[4]", progress=False) == [0.5] * 4
    assert time.monotonic() - started < 1.5


def test_one_big_partition_is_several_tasks():
    """A partition of 64 MiB segments (as the realistic inputs have) is one task per segment, so one
    partition keeps every core busy; small segments are grouped up to TASK_BYTES."""
    from dataclasses import dataclass

    from kfmt.transforms.run import TASK_BYTES, task_groups

    @dataclass
    class Seg:
        size: int

    assert len(task_groups([Seg(64 << 20)] * 16)) == 16
    assert len(task_groups([Seg(1 << 20)] * 256)) == 256 // (TASK_BYTES >> 20)


def test_workers_end_with_a_driver_killed_outright(tmp_path):
    """SIGTERM or SIGKILL run no cleanup in the driver: its idle pool workers must still not outlive it."""
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(Path(__file__).parents[1])!r})
        import psutil
        from support import engine_tasks
        from kfmt.pipelines.runner import run_tasks
        if __name__ == "__main__":
            run_tasks(engine_tasks.fail_on_two, [1, 3], master="local-pool[2]", progress=False)
            print(*[c.pid for c in psutil.Process().children(recursive=True)], flush=True)
            time.sleep(60)
    """)
    path = tmp_path / "driver.py"
    path.write_text(script)
    import psutil

    for sig in (signal.SIGTERM, signal.SIGKILL):
        proc = subprocess.Popen([sys.executable, str(path)], stdout=subprocess.PIPE, text=True)
        workers = [psutil.Process(int(pid)) for pid in proc.stdout.readline().split()]
        assert workers
        proc.send_signal(sig)
        proc.wait(timeout=30)
        gone, alive = psutil.wait_procs(workers, timeout=20)
        assert not alive, (sig, alive)
