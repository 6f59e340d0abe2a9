"""Snapshots of a directory tree (to prove inputs untouched / outputs atomic) and a writer run in a
child process."""
from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap

# Writes partition directory DST with PartitionWriter, pausing (to be killed) after `pause_after` batches.
WRITE_SCRIPT = textwrap.dedent("""
    import json, sys, time
    from kfmt.partition.layout import find_partitions
    from kfmt.partition.reader import PartitionReader
    from kfmt.storage.staging import StagedOutput
    from kfmt.storage.store import open_storage
    from kfmt.write.writer import PartitionWriter
    from kfmt.write.segment_writer import source_entries
    from kfmt.write.planner import RollPolicy

    from kfmt.errors import KfmtError

    src, dst, options, pause_after = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4])
    src_storage, src_path = open_storage(src, options if "://" in src else {})
    [part] = find_partitions(src_storage, src_path)
    storage, path = open_storage(dst, options)
    try:
        with StagedOutput(storage, path) as out:
            with PartitionWriter(out, "", RollPolicy(segment_bytes=8192), source=part) as writer:
                for i, (seg, header, entry) in enumerate(source_entries(PartitionReader(part))):
                    if i == pause_after:
                        print("PAUSED", flush=True)
                        time.sleep(120)
                    writer.append(header, entry, mtime_ms=seg.log.mtime_ms)
    except KfmtError as err:  # as the kfmt command reports errors (CLI.md exit codes)
        print(f"kfmt: error: {err}", file=sys.stderr)
        sys.exit(err.exit_code)
    print("DONE", flush=True)
""")


def run_writer(src: str, dst: str, options: dict | None = None, pause_after: int = -1,
               kill: bool = False) -> subprocess.CompletedProcess | int:
    """Run WRITE_SCRIPT; with `kill`, SIGKILL it once it has paused and return its (dead) pid."""
    args = [sys.executable, "-c", WRITE_SCRIPT, src, dst, json.dumps(options or {}), str(pause_after)]
    if not kill:
        return subprocess.run(args, capture_output=True, text=True, timeout=300)
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.strip() == "PAUSED", proc.stderr.read()
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None and not line:
            proc.kill()
        proc.wait(timeout=60)  # reaped: its pid is dead, not a zombie
        proc.stdout.close()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    return proc.pid


def tree_state(root) -> dict:
    """name -> (size, sha256, mtime_ns) of every file below a local directory."""
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(dirpath, name)
            with open(path, "rb") as f:
                digest = hashlib.sha256(f.read()).hexdigest()
            st = os.stat(path)
            out[os.path.relpath(path, root)] = (st.st_size, digest, st.st_mtime_ns)
    return out
