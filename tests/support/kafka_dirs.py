"""Directories built by the rules of what Kafka leaves on disk (and of what it does not), for the
tests of which paths kfmt takes for Kafka's and how it reads them (tests/partition/test_kafka_layouts.py,
tests/transforms/test_kraft_metadata_log.py).

Truth: tests/data/realkafka4 holds what a real Kafka 4.1 KRaft node (combined broker and controller)
left in its metadata log directory: `meta.properties`, `bootstrap.checkpoint` and
`__cluster_metadata-0/` byte for byte, with the kafka-dump-log 4.1 output of its files in
`__cluster_metadata-0.truth/` (tests/data/README.md). The rest follows Kafka's sources, cited where used.
"""
from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from support.corpus import REALKAFKA, TESTS

REALKAFKA4 = TESTS / "data" / "realkafka4"
METADATA_LOG = "__cluster_metadata-0"
# What a KRaft node needs besides its partitions: the metadata log and the files at the root
KRAFT_ROOT_FILES = ("meta.properties", "bootstrap.checkpoint")
# segment.index.bytes' default (10 MiB), which a running broker preallocates its active segment's
# index files to (AbstractIndex: rounded down to a whole number of entries)
INDEX_BYTES = 10 * 1024 * 1024
TOPIC_ID = "AxZqudQbRCOynzdEmxgmzw"


def writable(root: Path) -> Path:
    for path in [root, *root.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return root


def kraft_log_dir(root: Path, partitions=(), clean: bool = True) -> Path:
    """A KRaft node's metadata log directory: the real 4.1 node's metadata log and root files, corpus
    partitions beside them with the 3.6 broker's log-directory checkpoints when `partitions` are
    given, and the clean-shutdown marker when `clean`."""
    root.mkdir(parents=True)
    shutil.copytree(REALKAFKA4 / METADATA_LOG, root / METADATA_LOG)  # copy2: modification times kept
    for name in KRAFT_ROOT_FILES:
        shutil.copy2(REALKAFKA4 / name, root / name)
    for name in partitions:
        shutil.copytree(REALKAFKA / name, root / name)
    if partitions:
        for f in (REALKAFKA / "_logdir-root").iterdir():
            if f.name != "meta.properties":
                shutil.copy2(f, root / f.name)
    if clean:
        (root / ".kafka_cleanshutdown").write_text('{"version":0,"brokerEpoch":12}')
    return writable(root)


def empty_partition(path: Path, base_offset: int = 0, running: bool = False, epoch: int = 0) -> Path:
    """A partition that holds no record, as a broker leaves it: one segment at `base_offset` (0 for
    a new partition; the log end offset after retention or DeleteRecords removed every record) with
    a 0-byte .log; its .index and .timeindex trimmed to 0 bytes at a clean shutdown, or, `running`,
    preallocated to segment.index.bytes of zeros as a running broker keeps them (sparse here); the
    leader epoch the partition's leader assigned at the base offset (Partition.makeLeader), and the
    topic id."""
    path.mkdir(parents=True)
    stem = f"{base_offset:020d}"
    (path / f"{stem}.log").write_bytes(b"")
    for suffix, entry in ((".index", 8), (".timeindex", 12)):
        with open(path / f"{stem}{suffix}", "wb") as f:
            f.truncate(INDEX_BYTES // entry * entry if running else 0)
    (path / "leader-epoch-checkpoint").write_text(f"0\n1\n{epoch} {base_offset}\n")
    (path / "partition.metadata").write_text(f"version: 0\ntopic_id: {TOPIC_ID}")
    return path


def not_kafka_tree(root: Path) -> Path:
    """A directory with nothing of Kafka's in it, shaped like /etc: directories named like partitions
    (`dbus-1`, `polkit-1`) holding other programs' files (a `.log` among them, not named like a
    segment), other directories, a plain file and a link leading out."""
    (root / "dbus-1" / "system.d").mkdir(parents=True)
    (root / "dbus-1" / "session.conf").write_text("<busconfig/>\n")
    (root / "polkit-1").mkdir()
    (root / "polkit-1" / "daemon.log").write_text("started\n")
    (root / "ssl" / "certs").mkdir(parents=True)
    (root / "hostname").write_text("node\n")
    os.symlink("/usr/lib/os-release", root / "os-release")
    return root


def file_states(root: Path) -> dict[str, tuple[str, int]]:
    """relative path -> (sha256, modification time in ms) of every file below `root`: what a
    byte-for-byte carry keeps (kfmt keeps modification times to the millisecond)."""
    out = {}
    for path in sorted(root.rglob("*")):
        if path.is_file():
            out[path.relative_to(root).as_posix()] = (hashlib.sha256(path.read_bytes()).hexdigest(),
                                                      path.stat().st_mtime_ns // 1_000_000)
    return out
