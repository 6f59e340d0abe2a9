"""One conformance suite, run against every storage backend: local disk, memory://, and s3:// on a
real S3-compatible server (SeaweedFS, tests/support/s3server.py).

Each backend must behave the same for everything kfmt relies on: reading (whole, ranges, mapped,
counted), listing (sorted, sizes, directories; missing paths raise FileNotFoundError), recursive
walks that ignore empty directories, streamed writes that publish nothing when aborted, removal,
modification times where the store keeps them, reopening from a picklable spec, and publishing a
partition directory through StagedOutput that reads back with the records a Java consumer saw.
"""
from __future__ import annotations

import pickle
import uuid

import pytest
from support.consumer_truth import consumer_truth, records_of
from support.corpus import REALKAFKA

from kfmt.errors import UsageError
from kfmt.partition.layout import find_partitions
from kfmt.partition.reader import PartitionReader
from kfmt.storage.staging import StagedOutput
from kfmt.storage.store import open_storage
from kfmt.write.planner import RollPolicy
from kfmt.write.segment_writer import source_entries
from kfmt.write.writer import PartitionWriter

MIB = 1024 * 1024


class StorageConformance:
    """Subclasses provide `store`: (storage, an empty directory path that is theirs alone)."""

    @pytest.fixture
    def store(self):
        raise NotImplementedError

    # --- reading and listing ---
    def test_write_then_read_whole_ranges_and_mapped(self, store):
        storage, root = store
        path = storage.join(root, "a.bin")
        data = bytes(range(256)) * 40
        storage.write(path, data)
        before = storage.bytes_read
        assert bytes(storage.read(path)) == data
        assert bytes(storage.read(path, 100, 300)) == data[100:300]
        assert bytes(storage.read(path, 10_000)) == data[10_000:]
        assert bytes(storage.map(path)) == data
        assert storage.bytes_read - before == len(data) + 200 + (len(data) - 10_000) + len(data)

    def test_write_accepts_any_buffer_and_empty_files(self, store):
        storage, root = store
        for name, data in [("b", b"xy"), ("ba", bytearray(b"xyz")), ("mv", memoryview(b"wxyz")),
                           ("empty", b"")]:
            storage.write(storage.join(root, name), data)
            assert bytes(storage.read(storage.join(root, name))) == bytes(data)
            assert storage.info(storage.join(root, name)).size == len(data)
        assert bytes(storage.map(storage.join(root, "empty"))) == b""

    def test_listdir_sorted_with_sizes_and_directories(self, store):
        storage, root = store
        for name, size in [("b.log", 3), ("a.index", 5), ("c", 0)]:
            storage.write(storage.join(root, name), b"z" * size)
        storage.write(storage.join(root, "sub", "inner"), b"1")
        listing = storage.listdir(root)
        assert [(i.name, i.size if not i.is_dir else None, i.is_dir) for i in listing] == [
            ("a.index", 5, False), ("b.log", 3, False), ("c", 0, False), ("sub", None, True)]
        assert all(storage.basename(i.path) == i.name and storage.parent(i.path) == root
                   for i in listing)

    def test_info_exists_isdir(self, store):
        storage, root = store
        storage.write(storage.join(root, "d", "f"), b"12345")
        f, d, missing = (storage.join(root, "d", "f"), storage.join(root, "d"),
                         storage.join(root, "nope"))
        info = storage.info(f)
        assert (info.name, info.size, info.is_dir) == ("f", 5, False)
        assert storage.info(d).is_dir
        assert storage.exists(f) and storage.exists(d) and not storage.exists(missing)
        assert storage.isdir(d) and not storage.isdir(f) and not storage.isdir(missing)

    def test_missing_paths_raise_file_not_found(self, store):
        storage, root = store
        missing = storage.join(root, "missing")
        for call in (lambda: storage.read(missing), lambda: storage.info(missing),
                     lambda: storage.listdir(missing)):
            with pytest.raises(FileNotFoundError):
                call()

    def test_walk_lists_files_recursively_and_ignores_empty_directories(self, store):
        storage, root = store
        storage.write(storage.join(root, "x", "y", "deep"), b"1")
        storage.write(storage.join(root, "x", "top"), b"22")
        storage.write(storage.join(root, "z"), b"333")
        storage.write(storage.join(root, "gone", "f"), b"4")
        storage.remove(storage.join(root, "gone", "f"))  # an emptied directory
        storage.makedirs(storage.join(root, "empty"))
        walked = storage.walk(root)
        assert [(storage.join(*[root] + [p for p in w.path[len(root):].split(storage.sep) if p]), w.size)
                for w in walked] == [(storage.join(root, "x", "top"), 2),
                                     (storage.join(root, "x", "y", "deep"), 1),
                                     (storage.join(root, "z"), 3)]
        assert [w.path for w in walked] == sorted(w.path for w in walked)

    # --- writing ---
    def test_streamed_write_in_many_chunks(self, store):
        storage, root = store
        path = storage.join(root, "big")
        chunk = bytes(range(251)) * 4177  # ~1 MiB, not a power of two
        with storage.open_write(path) as stream:
            for i in range(20):  # ~20 MiB: several multipart parts on S3
                stream.write(chunk[i:] + chunk[:i])
        data = bytes(storage.read(path))
        assert len(data) == 20 * len(chunk)
        assert all(data[k * len(chunk):(k + 1) * len(chunk)] == chunk[k:] + chunk[:k] for k in range(20))

    @pytest.mark.parametrize("chunks", [1, 12])  # 12 MiB: a multipart upload has begun on S3
    def test_aborted_stream_publishes_nothing(self, store, chunks):
        storage, root = store
        path = storage.join(root, "partial")
        stream = storage.open_write(path)
        for _ in range(chunks):
            stream.write(b"p" * MIB)
        stream.abort()
        assert not storage.exists(path)
        assert storage.walk(root) == []

    def test_exception_inside_stream_block_publishes_nothing(self, store):
        storage, root = store
        path = storage.join(root, "failed")
        with pytest.raises(RuntimeError):
            with storage.open_write(path) as stream:
                stream.write(b"some bytes")
                raise RuntimeError("the writer failed")
        assert not storage.exists(path)

    def test_overwrite_replaces_content(self, store):
        storage, root = store
        path = storage.join(root, "f")
        storage.write(path, b"first version, longer")
        storage.write(path, b"second")
        assert bytes(storage.read(path)) == b"second"

    def test_remove_and_remove_tree(self, store):
        storage, root = store
        storage.write(storage.join(root, "keep"), b"k")
        storage.write(storage.join(root, "t", "a"), b"a")
        storage.write(storage.join(root, "t", "u", "b"), b"b")
        storage.remove(storage.join(root, "keep"))
        storage.remove_tree(storage.join(root, "t"))
        storage.remove_tree(storage.join(root, "never-existed"))  # no error
        assert storage.walk(root) == []

    def test_rename_a_file(self, store):
        storage, root = store
        storage.write(storage.join(root, "old"), b"content")
        storage.rename(storage.join(root, "old"), storage.join(root, "new"))
        assert not storage.exists(storage.join(root, "old"))
        assert bytes(storage.read(storage.join(root, "new"))) == b"content"

    def test_mtime_kept_exactly_where_the_store_says_it_keeps_one(self, store):
        storage, root = store
        path = storage.join(root, "timed")
        storage.write(path, b"t", mtime_ms=1_600_000_123_456)
        kept = storage.set_mtime(path, 1_500_000_000_007)
        assert kept == storage.keeps_mtime
        if storage.keeps_mtime:
            assert storage.info(path).mtime_ms == 1_500_000_000_007
            assert [i.mtime_ms for i in storage.listdir(root)] == [1_500_000_000_007]

    # --- reopening ---
    def test_spec_pickles_and_reopens_the_same_files(self, store):
        storage, root = store
        storage.write(storage.join(root, "shared"), b"visible")
        again, _ = pickle.loads(pickle.dumps(storage.spec)).open()
        assert bytes(again.read(storage.join(root, "shared"))) == b"visible"

    def test_url_of_reopens_the_same_path(self, store):
        storage, root = store
        storage.write(storage.join(root, "u"), b"via url")
        again, path = open_storage(storage.url_of(storage.join(root, "u")), dict(storage.spec.options))
        assert bytes(again.read(path)) == b"via url"

    # --- publishing partition directories ---
    def test_staged_output_publishes_all_or_nothing(self, store):
        storage, root = store
        dst = storage.join(root, "out")
        with pytest.raises(RuntimeError):
            with StagedOutput(storage, dst) as out:
                out.write("p-0/00000000000000000000.log", b"x" * 10)
                raise RuntimeError("failed part-way")
        assert storage.walk(root) == []
        with StagedOutput(storage, dst) as out:
            out.write("p-0/00000000000000000000.log", b"y" * 10, mtime_ms=1_234_567_890_123)
            out.write("report.json", b"{}")
        [part] = find_partitions(storage, dst)
        assert part.name == "p-0" and [s.base_offset for s in part.segments] == [0]
        assert part.segments[0].log.mtime_ms == 1_234_567_890_123
        assert part.manifest_problems == []
        with pytest.raises(UsageError, match="not empty|published"):
            StagedOutput(storage, dst)

    @pytest.mark.parametrize("name", ["v2-none-0", "txn-v2-none-0", "v1-gzip-0"])
    def test_partition_directory_round_trip(self, store, name):
        """A corpus partition written through this backend reads back as the consumer saw it, with
        the same files and `.log` mtimes."""
        storage, root = store
        src_storage, src_path = open_storage(str(REALKAFKA / name))
        [src] = find_partitions(src_storage, src_path)
        mtimes = {s.base_offset: 1_700_000_000_000 + 1000 * i for i, s in enumerate(src.segments)}
        dst = storage.join(root, "logdir")
        with StagedOutput(storage, dst) as out:
            with PartitionWriter(out, name, RollPolicy(segment_bytes=8192), source=src) as writer:
                for seg, header, entry in source_entries(PartitionReader(src)):
                    writer.append(header, entry, mtime_ms=mtimes[seg.base_offset])
        [part] = find_partitions(storage, dst)
        assert records_of(part) == consumer_truth(name)
        assert sorted(part.files) == sorted(f.name for f in src.files.values()
                                            if not (f.name.endswith(".log") and f.size == 0))
        assert {s.base_offset: s.log.mtime_ms for s in part.segments} == mtimes
        assert bytes(storage.read(part.files["partition.metadata"].path)) == bytes(
            src_storage.read(src.files["partition.metadata"].path))


class TestLocal(StorageConformance):
    @pytest.fixture
    def store(self, tmp_path):
        storage, path = open_storage(str(tmp_path / "root"))
        storage.makedirs(path)
        return storage, path


class TestMemory(StorageConformance):
    @pytest.fixture
    def store(self):
        url = f"memory:///kfmt-conformance/{uuid.uuid4().hex}"
        storage, path = open_storage(url)
        yield storage, path
        storage.remove_tree(path)


@pytest.mark.s3
class TestS3(StorageConformance):
    @pytest.fixture
    def store(self, s3_server, s3_url):
        return open_storage(s3_url, s3_server.storage_options)
