"""Partitions built from given segments, a gzip wrapper message, and a verify run as comparable
values, for the verify/info tests."""
from __future__ import annotations


def partition_with(tmp_path, data: bytes, base: int = 0):
    part = tmp_path / "t-0"
    part.mkdir(exist_ok=True)
    for old in part.iterdir():
        old.unlink()
    (part / f"{base:020d}.log").write_bytes(data)
    return part


def gzip_wrapper(wrapper_offset: int, timestamps: list[int], inner_offsets: list[int]) -> bytes:
    """A v1 gzip wrapper built with kafka-python (an independent encoder), its inner offsets as
    given (relative, as producers write them) and its own offset as given."""
    from kafka.record.legacy_records import LegacyRecordBatchBuilder
    builder = LegacyRecordBatchBuilder(1, 1, 1 << 20)
    for offset, ts in zip(inner_offsets, timestamps):
        builder.append(offset, ts, b"k", b"v")
    entry = bytearray(builder.build())
    entry[0:8] = wrapper_offset.to_bytes(8, "big", signed=True)  # not under the CRC (§3.1)
    return bytes(entry)


def verified(path, deep: bool = False) -> tuple:
    """kfmt verify of a directory (at `--deep` or the default depth) as values two runs can be
    compared by: its problems (check, message, file, position, offset, severity) and its counts."""
    from kfmt.inspect.verify import verify
    from kfmt.storage.store import open_storage

    storage, root = open_storage(str(path))
    report = verify(storage, root, deep=deep)
    return ([(p.check, p.message, p.file, p.position, p.offset, p.severity) for p in report.problems],
            vars(report.counts))
