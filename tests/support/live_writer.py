"""A log directory that is being written: a child process that behaves like a broker on disk.

`LiveWriter` starts a separate process (multiprocessing, spawned) that keeps writing a Kafka log
directory the way a running broker changes its files, so that tests can run kfmt's read-only commands
and `export --append` against it while it changes. The batches are encoded by kafka-python
(`DefaultRecordBatchBuilder`), an encoder independent of kfmt's; the broker's part (the base offset
and partition leader epoch, which are not under the CRC) is set on the built bytes.

The file operations follow Kafka's classes:

* appends (`LogSegment.append`): the batch goes to the end of the active segment's `.log`, written
  in two parts with a pause between, so that readers meet a torn tail; then, once more than
  `index_interval_bytes` were appended since the last index entry, an `.index` entry (the batch's
  last offset, its position) and a `.timeindex` entry (the largest timestamp so far, if it grew)
  are written into the segment's index files, which are preallocated to `index_bytes` and
  zero-filled past their entries (`AbstractIndex`, `OffsetIndex`, `TimeIndex`);
* rolls (`LocalLog.roll`, `LogSegment.onBecomeInactiveSegment`): when an append would take the active
  segment past `segment_bytes`, the segment gets its final time-index entry and its index files are
  trimmed to their entries (`AbstractIndex.trimToValidSize`); the new segment's `.log` is created
  empty and its index files preallocated; a producer snapshot (empty: no idempotent producer) is
  written at the new base (`ProducerStateManager.takeSnapshot`);
* retention (`UnifiedLog.deleteSegments`, `LocalLog.deleteSegmentFiles`): beyond `retain_segments`
  segments the oldest are deleted: the log start offset moves first (`leader-epoch-checkpoint` and
  the log directory's `log-start-offset-checkpoint` are rewritten as `CheckpointFile` does, a temp
  file renamed into place), then each file is renamed with the `.deleted` suffix and unlinked a
  little later (`file.delete.delay.ms`), with the producer snapshot at the segment's base;
* the log directory's lock (`LogManager.lockLogDirs`): `.lock` is locked while the writer runs and
  `.kafka_cleanshutdown` written when it stops cleanly (`kill()` leaves none, as a crash does);
* cleaning, on the `compacted` partitions (`LogCleaner`, `LocalLog.replaceSegments`): the rolled
  segments are rewritten keeping each key's latest record into `<base>.log.cleaned` (and its
  `.index.cleaned`, `.timeindex.cleaned`), each batch with its kept records, its base offset and
  its last offset (`MemoryRecords.filterTo`; a batch left without records goes), renamed to the
  `.swap` suffix, the replaced segments other than the first renamed to `.deleted`, and the `.swap`
  files renamed onto the first segment's names (replacing it), log first, then the indexes; the
  phases `transit_pause` apart, so that readers meet the states in between.

Not simulated: idempotent or transactional producers, leader changes (a new leader epoch, a
follower's truncation), `file.preallocate` (a preallocated `.log`), tiered storage.

The child records what it wrote in `<log dir>-truth.jsonl` beside the log directory, one JSON line per
batch, after the batch is on disk: `{"topic", "partition", "records": [[offset, timestamp,
key sha256, value sha256], ...]}`; on a clean stop it adds a last line `{"final": {...}}` with each
partition's log start offset, next offset and (compacted partitions) the offsets the log still
holds. `LiveWriter.truth()` reads it back.

    with LiveWriter(tmp_path / "logs", partitions=[("live", 0), ("live", 1)],
                    compacted=[("live-cmp", 0)]) as writer:
        writer.wait_for(rolls=3)
        ...                       # read the directory while it changes
        writer.pause(); ...; writer.resume()
    truth = writer.truth()        # after the with block: the child has stopped
"""
from __future__ import annotations

import base64
import fcntl
import hashlib
import json
import multiprocessing
import os
import random
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path

# the shared counters (multiprocessing.Array slots)
RECORDS, BATCHES, ROLLS, DELETED, CLEANED, STEPS = range(6)
OFFSET_ENTRY, TIME_ENTRY = 8, 12
EMPTY_SNAPSHOT = bytes.fromhex("000148674bc700000000")  # version 1, CRC-32C, no producer
# values are words, so that gzip pays (kafka-python sends a batch uncompressed when it would not)
WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
         "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango")


def digest(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


@dataclass
class Record:
    offset: int
    timestamp: int
    key: str | None  # sha256 of the key bytes
    value: str | None


@dataclass
class PartitionTruth:
    records: dict[int, Record] = field(default_factory=dict)  # every record ever written
    log_start: int | None = None  # at the stop
    next_offset: int | None = None
    present: set[int] | None = None  # compacted: offsets the log holds at the stop


class LiveWriter:
    """The writer process; see the module docstring."""

    def __init__(self, log_dir, partitions=(("live", 0), ("live", 1)), compacted=(), *,
                 segment_bytes: int = 16 << 10, index_interval_bytes: int = 1024,
                 index_bytes: int = 4096, retain_segments: int = 6, step_seconds: float = 0.004,
                 clean_every_rolls: int = 3, keys: int = 12, delete_delay: float = 0.2,
                 torn_pause: float = 0.002, transit_pause: float = 0.05, seed: int = 0):
        self.log_dir = Path(log_dir)
        self.truth_path = self.log_dir.parent / f"{self.log_dir.name}-truth.jsonl"
        self.config = dict(log_dir=str(self.log_dir), truth=str(self.truth_path),
                           partitions=[tuple(p) for p in partitions],
                           compacted=[tuple(p) for p in compacted], segment_bytes=segment_bytes,
                           index_interval_bytes=index_interval_bytes, index_bytes=index_bytes,
                           retain_segments=retain_segments, step_seconds=step_seconds,
                           clean_every_rolls=clean_every_rolls, keys=keys,
                           delete_delay=delete_delay, torn_pause=torn_pause,
                           transit_pause=transit_pause, seed=seed)
        ctx = multiprocessing.get_context("spawn")
        self._counters = ctx.Array("q", 6)
        self._stop = ctx.Event()
        self._pause = ctx.Event()
        self._paused = ctx.Event()
        self._process = ctx.Process(target=_run, args=(self.config, self._counters, self._stop,
                                                       self._pause, self._paused), daemon=True)

    # --- lifetime ---
    def start(self) -> "LiveWriter":
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._process.start()
        self.wait_for(batches=1)
        return self

    def stop(self, timeout: float = 20) -> None:
        self._stop.set()
        self._pause.clear()
        self._process.join(timeout)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()
            raise RuntimeError("the live writer did not stop")
        if self._process.exitcode != 0:
            raise RuntimeError(f"the live writer failed (exit code {self._process.exitcode})")

    def kill(self) -> None:
        """End the writer as a crash would (SIGKILL): the kernel releases its lock on `.lock`, no
        clean-shutdown marker is written, a batch may be half on disk."""
        self._process.kill()
        self._process.join()

    def __enter__(self) -> "LiveWriter":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # --- control ---
    def pause(self, timeout: float = 20) -> None:
        """Stop between two steps (every file as a broker leaves it between requests)."""
        self._paused.clear()
        self._pause.set()
        if not self._paused.wait(timeout):
            raise RuntimeError("the live writer did not pause")

    def resume(self) -> None:
        self._pause.clear()

    @property
    def stats(self) -> dict[str, int]:
        names = ("records", "batches", "rolls", "deleted", "cleaned", "steps")
        return dict(zip(names, self._counters[:]))

    def wait_for(self, timeout: float = 30, **at_least: int) -> dict[str, int]:
        """Wait until each named counter (records, batches, rolls, deleted, cleaned) is at least
        the given number."""
        deadline = time.monotonic() + timeout
        while True:
            stats = self.stats
            if all(stats[name] >= n for name, n in at_least.items()):
                return stats
            if not self._process.is_alive():
                raise RuntimeError(f"the live writer died (exit code {self._process.exitcode})")
            if time.monotonic() > deadline:
                raise TimeoutError(f"the live writer reached {stats}, not {at_least}")
            time.sleep(0.02)

    # --- what was written ---
    def truth(self) -> dict[tuple[str, int], PartitionTruth]:
        out: dict[tuple[str, int], PartitionTruth] = {}
        with open(self.truth_path) as f:
            for line in f:
                entry = json.loads(line)
                if "final" in entry:
                    for name, state in entry["final"].items():
                        topic, partition = name.rsplit("-", 1)
                        t = out.setdefault((topic, int(partition)), PartitionTruth())
                        t.log_start, t.next_offset = state["log_start"], state["next_offset"]
                        if state.get("present") is not None:
                            t.present = set(state["present"])
                    continue
                t = out.setdefault((entry["topic"], entry["partition"]), PartitionTruth())
                for offset, ts, key, value in entry["records"]:
                    t.records[offset] = Record(offset, ts, key, value)
        return out


# --- the child process ------------------------------------------------------------------------------

def _run(config, counters, stop, pause, paused) -> None:
    log = _Broker(config, counters)
    rng = random.Random(config["seed"])
    while not stop.is_set():
        if pause.is_set():
            paused.set()
            while pause.is_set() and not stop.is_set():
                time.sleep(0.005)
            continue
        log.step(rng)
        counters[STEPS] += 1
        time.sleep(config["step_seconds"])
    log.close()


class _Segment:
    def __init__(self, directory: Path, base: int, index_bytes: int, create: bool = True):
        self.base = base
        self.log = directory / f"{base:020d}.log"
        self.index = directory / f"{base:020d}.index"
        self.timeindex = directory / f"{base:020d}.timeindex"
        self.size = 0
        self.index_entries = 0
        self.time_entries = 0
        self.last_index_ts = -1
        self.bytes_since_index = 0
        self.max_ts, self.offset_of_max_ts = -1, base
        # what it holds: per batch, its base and last offsets and its records (offset, timestamp,
        # key, value)
        self.batches: list[tuple[int, int, list[tuple[int, int, bytes | None, bytes | None]]]] = []
        if create:
            self.log.touch()
            # AbstractIndex: a new index file is preallocated to maxIndexSize (a multiple of the entry)
            for path, entry in ((self.index, OFFSET_ENTRY), (self.timeindex, TIME_ENTRY)):
                with open(path, "wb") as f:
                    f.truncate(index_bytes // entry * entry)

    def offsets(self) -> list[int]:
        return [r[0] for _, _, records in self.batches for r in records]

    def files(self) -> list[Path]:
        return [self.log, self.index, self.timeindex]


class _Partition:
    def __init__(self, directory: Path, topic: str, partition: int, compacted: bool):
        self.dir, self.topic, self.partition, self.compacted = directory, topic, partition, compacted
        self.segments: list[_Segment] = []
        self.next_offset = 0
        self.rolls_since_clean = 0
        self.cleaned_through = 0  # the offset below which the log was cleaned

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def active(self) -> _Segment:
        return self.segments[-1]

    @property
    def log_start(self) -> int:
        return self.segments[0].base


class _Broker:
    def __init__(self, config, counters):
        self.c = config
        self.counters = counters
        self.log_dir = Path(config["log_dir"])
        self.truth = open(config["truth"], "w")
        self.pending_deletes: list[tuple[float, Path]] = []
        # LogManager.lockLogDirs: the `.lock` file locked (FileChannel.tryLock, an fcntl lock) for as
        # long as the broker runs; the clean-shutdown marker goes once the logs are loaded
        self.lock = open(self.log_dir / ".lock", "a+")
        fcntl.lockf(self.lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        (self.log_dir / ".kafka_cleanshutdown").unlink(missing_ok=True)
        self.partitions = []
        for tp in config["partitions"] + config["compacted"]:
            directory = self.log_dir / f"{tp[0]}-{tp[1]}"
            directory.mkdir(parents=True, exist_ok=True)
            p = _Partition(directory, tp[0], tp[1], tuple(tp) in map(tuple, config["compacted"]))
            p.segments.append(_Segment(directory, 0, config["index_bytes"]))
            _write_checkpoint(directory / "leader-epoch-checkpoint", ["0 0"])
            # PartitionMetadataFile: the topic id (a Uuid as URL-safe base64 without padding)
            topic_id = base64.urlsafe_b64encode(hashlib.sha256(tp[0].encode()).digest()[:16])
            (directory / "partition.metadata").write_text(
                f"version: 0\ntopic_id: {topic_id.decode().rstrip('=')}\n")
            self.partitions.append(p)
        self._write_log_start_checkpoint()

    # --- one step: an append somewhere, and whatever falls due ---
    def step(self, rng: random.Random) -> None:
        p = rng.choice(self.partitions)
        self._append(p, rng)
        now = time.monotonic()
        due = [d for d in self.pending_deletes if d[0] <= now]
        self.pending_deletes = [d for d in self.pending_deletes if d[0] > now]
        for _, path in due:
            path.unlink(missing_ok=True)

    def close(self) -> None:
        for _, path in self.pending_deletes:
            path.unlink(missing_ok=True)
        final = {}
        for p in self.partitions:
            final[p.name] = {"log_start": p.log_start, "next_offset": p.next_offset,
                             "present": sorted(o for s in p.segments for o in s.offsets())
                             if p.compacted else None}
        self.truth.write(json.dumps({"final": final}) + "\n")
        self.truth.close()
        # a clean shutdown: the marker written (empty, as Kafka 3.6 writes it), then the lock released
        (self.log_dir / ".kafka_cleanshutdown").touch()
        self.lock.close()

    # --- LogSegment.append ---
    def _append(self, p: _Partition, rng: random.Random) -> None:
        count = rng.randint(1, 12)
        ts = int(time.time() * 1000)
        records = []
        for i in range(count):
            offset = p.next_offset + i
            if p.compacted:
                key = f"key-{rng.randrange(self.c['keys'])}".encode()
            else:
                key = None if rng.random() < 0.1 else f"k{offset}".encode()
            value = (" ".join(rng.choices(WORDS, k=rng.randint(0, 30))).encode()
                     if rng.random() < 0.95 else None)
            records.append((offset, ts + i // 4, key, value))
        codec = rng.choice((0, 0, 1))  # none or gzip
        entry = _encode(records, p.next_offset, codec)
        if p.active.size and p.active.size + len(entry) > self.c["segment_bytes"]:
            self._roll(p)
        seg = p.active
        position = seg.size
        with open(seg.log, "ab") as f:  # two writes: a reader may see the first alone
            half = len(entry) // 2
            f.write(entry[:half])
            f.flush()
            time.sleep(self.c["torn_pause"])
            f.write(entry[half:])
        seg.size += len(entry)
        last = records[-1][0]
        # the time index names a v2 batch by its last offset (Kafka 3.6's shallowOffsetOfMaxTimestamp)
        batch_max_ts = max(t for _, t, _, _ in records)
        if batch_max_ts > seg.max_ts:
            seg.max_ts, seg.offset_of_max_ts = batch_max_ts, last
        if seg.bytes_since_index > self.c["index_interval_bytes"]:
            self._index_append(seg, last, position)
            self._time_index_append(seg)
            seg.bytes_since_index = 0
        seg.bytes_since_index += len(entry)
        seg.batches.append((records[0][0], last, records))
        p.next_offset = last + 1
        self.truth.write(json.dumps({"topic": p.topic, "partition": p.partition, "records": [
            [o, t, digest(k), digest(v)] for o, t, k, v in records]}) + "\n")
        self.truth.flush()
        self.counters[RECORDS] += count
        self.counters[BATCHES] += 1

    def _index_append(self, seg: _Segment, offset: int, position: int) -> None:
        if (seg.index_entries + 1) * OFFSET_ENTRY > self.c["index_bytes"]:
            return  # full (a broker rolls first; the segments here are too small to get there)
        with open(seg.index, "r+b") as f:
            f.seek(seg.index_entries * OFFSET_ENTRY)
            f.write(struct.pack(">ii", offset - seg.base, position))
        seg.index_entries += 1

    def _time_index_append(self, seg: _Segment) -> None:
        """TimeIndex.maybeAppend: only a timestamp larger than the last entry's."""
        if seg.max_ts <= seg.last_index_ts or (seg.time_entries + 1) * TIME_ENTRY > self.c["index_bytes"]:
            return
        with open(seg.timeindex, "r+b") as f:
            f.seek(seg.time_entries * TIME_ENTRY)
            f.write(struct.pack(">qi", seg.max_ts, seg.offset_of_max_ts - seg.base))
        seg.time_entries += 1
        seg.last_index_ts = seg.max_ts

    # --- LocalLog.roll ---
    def _roll(self, p: _Partition) -> None:
        old = p.active
        self._time_index_append(old)  # onBecomeInactiveSegment: the final time-index entry
        os.truncate(old.index, old.index_entries * OFFSET_ENTRY)  # trimToValidSize
        os.truncate(old.timeindex, old.time_entries * TIME_ENTRY)
        p.segments.append(_Segment(p.dir, p.next_offset, self.c["index_bytes"]))
        self._snapshot(p)
        self.counters[ROLLS] += 1
        if p.compacted:
            p.rolls_since_clean += 1
            if p.rolls_since_clean >= self.c["clean_every_rolls"]:
                self._clean(p)
                p.rolls_since_clean = 0
        elif len(p.segments) > self.c["retain_segments"]:
            self._delete_oldest(p, len(p.segments) - self.c["retain_segments"])

    # --- UnifiedLog.deleteSegments ---
    def _delete_oldest(self, p: _Partition, n: int) -> None:
        gone, p.segments = p.segments[:n], p.segments[n:]
        # the log start offset moves first; the checkpoints follow it
        _write_checkpoint(p.dir / "leader-epoch-checkpoint", [f"0 {p.log_start}"])
        self._write_log_start_checkpoint()
        for seg in gone:
            # the segment's files, and the producer snapshot at its base
            # (ProducerStateManager.removeAndMarkSnapshotForDeletion)
            self._rename_deleted(seg.files() + [p.dir / f"{seg.base:020d}.snapshot"])
        self.counters[DELETED] += n

    def _snapshot(self, p: _Partition) -> None:
        """ProducerStateManager.takeSnapshot at a roll, named after the new segment's base: the
        producers here are not idempotent, so the state is empty (docs/format.md §8). Kafka creates
        the file and then writes it: a reader may find it empty for a moment."""
        with open(p.dir / f"{p.active.base:020d}.snapshot", "wb") as f:
            f.flush()
            time.sleep(self.c["torn_pause"])
            f.write(EMPTY_SNAPSHOT)

    def _rename_deleted(self, paths: list[Path]) -> None:
        """LocalLog.deleteSegmentFiles: `.deleted` at once, the unlink after file.delete.delay.ms."""
        for path in paths:
            if path.exists():
                target = path.with_name(path.name + ".deleted")
                path.rename(target)
                self.pending_deletes.append((time.monotonic() + self.c["delete_delay"], target))

    def _write_log_start_checkpoint(self) -> None:
        _write_checkpoint(self.log_dir / "log-start-offset-checkpoint",
                          [f"{p.topic} {p.partition} {p.log_start}" for p in self.partitions])

    # --- LogCleaner.cleanSegments and LocalLog.replaceSegments ---
    def _clean(self, p: _Partition) -> None:
        dirty = p.segments[:-1]  # everything before the active segment is cleanable
        latest = {}
        for seg in dirty:
            for _, _, records in seg.batches:
                for offset, _, key, _ in records:
                    latest[key] = offset
        kept = [(base, last, [r for r in records if latest[r[2]] == r[0]])
                for seg in dirty for base, last, records in seg.batches]
        kept = [batch for batch in kept if batch[2]]
        new = _Segment(p.dir, dirty[0].base, self.c["index_bytes"], create=False)
        cleaned = [path.with_name(path.name + ".cleaned") for path in new.files()]
        log_bytes, index, timeindex = bytearray(), bytearray(), bytearray()
        since_index, max_ts = 0, -1
        for base, last, batch in kept:
            entry = _encode(batch, base, 0, last)
            if since_index > self.c["index_interval_bytes"]:
                index += struct.pack(">ii", last - new.base, len(log_bytes))
                since_index = 0
            log_bytes += entry
            since_index += len(entry)
            ts = max(t for _, t, _, _ in batch)
            if ts > max_ts:
                timeindex += struct.pack(">qi", ts, last - new.base)
                max_ts = ts
        for path, data in zip(cleaned, (log_bytes, index, timeindex)):
            path.write_bytes(bytes(data))
        new.size, new.batches = len(log_bytes), kept
        swaps = [path.with_name(path.name[:-len(".cleaned")] + ".swap") for path in cleaned]
        # each phase a little apart, so that readers meet the states in between
        time.sleep(self.c["transit_pause"])
        for src, dst in zip(cleaned, swaps):
            src.rename(dst)
        time.sleep(self.c["transit_pause"])
        for seg in dirty[1:]:
            self._rename_deleted(seg.files())
        time.sleep(self.c["transit_pause"])
        for swap, final in zip(swaps, new.files()):
            swap.rename(final)  # replaces the first cleaned segment's file
        p.segments = [new, p.segments[-1]]
        self.counters[CLEANED] += 1


def _encode(records, base_offset: int, codec: int, last_offset: int | None = None) -> bytes:
    """A v2 batch by kafka-python's builder; the base offset and leader epoch set as a broker does
    (neither is under the CRC). `last_offset`: the batch's own when the cleaner removed its last
    records (MemoryRecordsBuilder.overrideLastOffset)."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 20)
    for offset, ts, key, value in records:
        if builder.append(offset - base_offset, timestamp=ts, key=key, value=value, headers=[]) is None:
            raise RuntimeError("kafka-python refused a record")
    if last_offset is not None:
        builder._last_offset = last_offset - base_offset  # kafka-python's lastOffsetDelta field
    built = bytes(builder.build())
    return struct.pack(">q", base_offset) + built[8:12] + struct.pack(">i", 0) + built[16:]


def _write_checkpoint(path: Path, lines: list[str]) -> None:
    """CheckpointFile: version 0, the entry count, the entries; a temp file renamed into place."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("\n".join(["0", str(len(lines)), *lines]) + "\n")
    tmp.replace(path)
