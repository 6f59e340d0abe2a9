"""Directory operations, each run by the harness in a child process of its own (its peak memory is
the operation's): `python bench/ops.py OP ARGS...`. Prints one JSON object: the wall and CPU seconds
of the operation itself (measured around it, after the imports), and what it processed.

* cli: a kfmt command, `python bench/ops.py cli -- reindex SRC DST ...`, through kfmt.cli.main as
  `kfmt` runs it;
* scan LOGDIR TOPIC: the frames of every segment as arrays (FrameScanner.chunks(), no record decoding);
* scan-headers: the same as BatchHeader objects (FrameScanner iteration), the per-object API;
* upgrade-kernels LOGDIR TOPIC [DST]: v0/v1 to v2 with the array kernels
  (kfmt.format.legacy_runs.upgrade_pieces) straight into .log files, with their .index/.timeindex
  (SegmentIndexer.add_frames): what the upgrade pipeline can reach when it calls them
  (docs/performance.md). Without DST the output is made and indexed but not written.
"""
from __future__ import annotations

import json
import os
import sys
import threading
import time

import numpy as np

from kfmt.format import legacy_runs, segment
from kfmt.partition.layout import find_partitions
from kfmt.partition.segment_recovery import SegmentIndexer
from kfmt.storage.store import open_storage


def partitions(logdir: str, topic: str):
    storage, path = open_storage(logdir)
    return storage, find_partitions(storage, path, topic, None)


def scan(logdir: str, topic: str, dst=None) -> dict:
    storage, parts = partitions(logdir, topic)
    size = records = entries = 0
    for part in parts:
        for seg in part.segments:
            data = storage.map(seg.log.path)
            scanner = segment.FrameScanner(data, part.display(seg.log))
            for rows in scanner.chunks():
                entries += len(rows)
                records += int(rows["records_count"].sum(dtype=np.int64))
            if scanner.tail.is_error:
                raise scanner.tail.error(scanner.file)
            size += len(data)
    return {"bytes": size, "records": records, "entries": entries}


def scan_headers(logdir: str, topic: str, dst=None) -> dict:
    storage, parts = partitions(logdir, topic)
    size = records = entries = 0
    for part in parts:
        for seg in part.segments:
            data = storage.map(seg.log.path)
            for header in segment.scan(data, part.display(seg.log)):
                entries += 1
                records += header.records_count or 0
            size += len(data)
    return {"bytes": size, "records": records, "entries": entries}


def upgrade_kernels(logdir: str, topic: str, dst: str | None = None) -> dict:
    """Without `dst`, the output is made and indexed but not written (the conversion's own cost)."""
    storage, parts = partitions(logdir, topic)
    size = records = 0
    for part in parts:
        if dst:
            os.makedirs(os.path.join(dst, part.name))
        for seg in part.segments:
            data = storage.map(seg.log.path)
            file = part.display(seg.log)
            indexer = SegmentIndexer(seg.base_offset, 4096)
            written = 0
            out = open(os.path.join(dst, part.name, seg.log.name), "wb") if dst else None
            for rows in segment.FrameScanner(data, file).chunks():
                if legacy_runs.message_runs(rows) != [(0, len(rows))]:
                    raise SystemExit("upgrade-kernels handles runs of uncompressed messages only")
                for piece in legacy_runs.upgrade_pieces(data, rows, file, out_position=written):
                    if out:
                        out.write(piece.entries)
                    indexer.add_frames(piece.rows)
                    written += len(piece.entries)
                    records += piece.digest.records
            files = indexer.finish().files()
            if out:
                out.close()
                for name, content in files.items():
                    with open(os.path.join(dst, part.name, name), "wb") as f:
                        f.write(content)
            size += len(data)
    return {"bytes": size, "records": records}


def status(field: str) -> int:
    """A memory figure of this process from /proc/self/status, in bytes (0 where there is none)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class AnonymousPeak(threading.Thread):
    """Samples RssAnon every few milliseconds: the memory the process allocates, without the pages of
    memory-mapped segment files that RSS also counts (page cache, shared and reclaimable). The
    kernel keeps no peak of it, hence the sampling."""

    def __init__(self):
        super().__init__(daemon=True)
        self.peak = status("RssAnon")
        self.done = threading.Event()

    def run(self):
        while not self.done.wait(0.005):
            self.peak = max(self.peak, status("RssAnon"))

    def stop(self) -> int:
        self.done.set()
        self.join()
        return max(self.peak, status("RssAnon"))


def cli(*argv: str) -> dict:
    from kfmt.cli import main
    code = main(list(argv))
    if code:
        raise SystemExit(f"kfmt {' '.join(argv)}: exit {code}")
    return {}


OPS = {"scan": scan, "scan-headers": scan_headers, "upgrade-kernels": upgrade_kernels, "cli": cli}

if __name__ == "__main__":
    op, *args = sys.argv[1:]
    if args[:1] == ["--"]:
        args = args[1:]
    import kfmt.cli  # noqa: F401  (imports and plugin loading are not the operation)
    from kfmt.plugin import registry
    registry.get()
    sampler = AnonymousPeak()
    sampler.start()
    wall, cpu = time.perf_counter(), time.process_time()
    result = OPS[op](*args)
    result.update(wall=time.perf_counter() - wall, cpu=time.process_time() - cpu,
                  peak_anon=sampler.stop(),
                  # VmHWM: the peak of this address space since exec (getrusage's ru_maxrss also
                  # counts the parent's memory at fork time); it includes mapped segment pages
                  peak_rss=status("VmHWM"))
    sys.stdout.flush()
    print("\n" + json.dumps(result))
