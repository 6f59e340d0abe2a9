"""The machine-readable report every transform writes (`kfmt-report.json` in DST, CLI.md), and the
content digest that lets a reader check that a transform kept the records it should.

The content digest covers what a consumer sees of every data record: offset, timestamp (as a
consumer reports it: LogAppendTime and v0 resolved, reference §3.5, §4.3), key, value and headers,
in offset order. It does not depend on how the records are batched, compressed or encoded (magic),
so `reindex`, `upgrade`, `resegment` and `recompress` must leave it unchanged. Control records
(transaction markers) are not content: they are counted apart.

Digest definition (version 1), so that other tools can recompute it: eleven SHA-256 streams, each
fed record by record across all batches — offsets (int64 big-endian), timestamps (int64 BE), key
lengths (int32 BE, -1 for null), key bytes, value lengths, value bytes, header counts (int32 BE),
header key lengths, header key bytes, header value lengths (-1 for null), header value bytes (the
headers of all records, in order) — and the digest is SHA-256 of `kfmt-content-digest-v1` followed by
the eleven digests in that order. Each stream pair (lengths, bytes) decodes unambiguously, so equal
digests mean equal records.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field

import numpy as np
import pyarrow as pa

from kfmt import __version__
from kfmt.model import Batch

REPORT_NAME = "kfmt-report.json"
REPORT_VERSION = 1
DIGEST_TAG = b"kfmt-content-digest-v1"


def _binary_parts(array: pa.Array) -> tuple[bytes, memoryview | bytes]:
    """(lengths as int32 BE with -1 for null, the concatenated bytes) of a binary array."""
    n = len(array)
    validity, offsets_buf, data_buf = array.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=np.int32, count=n + 1, offset=array.offset * 4)
    lengths = np.diff(offsets).astype(">i4")
    if array.null_count:
        bits = np.unpackbits(np.frombuffer(validity, dtype=np.uint8), bitorder="little")
        lengths[~bits[array.offset:array.offset + n].astype(bool)] = -1
    data = b"" if data_buf is None else memoryview(data_buf)[offsets[0]:offsets[-1]]
    return lengths.tobytes(), data


class ContentDigest:
    """The content digest of a stream of data records (see the module docstring)."""

    STREAMS = ("offsets", "timestamps", "key_lengths", "keys", "value_lengths", "values",
               "header_counts", "header_key_lengths", "header_keys", "header_value_lengths",
               "header_values")

    #: records are hashed in chunks of about this many rows or bytes: per-call costs dominate
    #: small batches, and the bytes bound the memory held
    CHUNK_ROWS = 65536
    CHUNK_BYTES = 32 << 20

    def __init__(self):
        self._streams = {name: hashlib.sha256() for name in self.STREAMS}
        self._pending: list[pa.RecordBatch] = []
        self._pending_rows = self._pending_bytes = 0
        self.records = 0

    def update(self, records: pa.RecordBatch) -> None:
        if records.num_rows == 0:
            return
        self._pending.append(records)
        self._pending_rows += records.num_rows
        self._pending_bytes += records.nbytes
        self.records += records.num_rows
        if self._pending_rows >= self.CHUNK_ROWS or self._pending_bytes >= self.CHUNK_BYTES:
            self._flush()

    def _flush(self) -> None:
        if not self._pending:
            return
        records = pa.Table.from_batches(self._pending).combine_chunks().to_batches()[0]
        self._pending, self._pending_rows, self._pending_bytes = [], 0, 0
        s = self._streams
        s["offsets"].update(records.column(0).to_numpy().astype(">i8").tobytes())
        s["timestamps"].update(records.column(1).to_numpy().astype(">i8").tobytes())
        headers = records.column(4)
        s["header_counts"].update(headers.value_lengths().to_numpy(zero_copy_only=False)
                                  .astype(">i4").tobytes())
        header_keys, header_values = headers.flatten().flatten()
        for name, column in (("key", records.column(2)), ("value", records.column(3)),
                             ("header_key", header_keys), ("header_value", header_values)):
            lengths, data = _binary_parts(column)
            s[f"{name}_lengths"].update(lengths)
            s[f"{name}s"].update(data)

    def hexdigest(self) -> str:
        self._flush()
        final = hashlib.sha256(DIGEST_TAG)
        for name in self.STREAMS:
            final.update(self._streams[name].digest())
        return final.hexdigest()


@dataclass
class PartitionSummary:
    """What one partition holds: counts, offsets and the content digest."""

    path: str
    topic: str | None
    partition: int | None
    segments: int = 0
    batches: int = 0
    records: int = 0
    control_records: int = 0
    log_bytes: int = 0
    first_offset: int | None = None  # of the first data record
    next_offset: int | None = None  # after the last batch
    content_digest: str | None = None

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class PartitionTally:
    """Accumulates a PartitionSummary from the batches of a partition, in offset order."""

    summary: PartitionSummary
    digest: ContentDigest = field(default_factory=ContentDigest)

    def add_segment(self, log_bytes: int) -> None:
        self.summary.segments += 1
        self.summary.log_bytes += log_bytes

    def add_batch(self, batch: Batch) -> None:
        s = self.summary
        s.batches += 1
        s.next_offset = batch.header.next_offset
        if batch.header.is_control:
            s.control_records += len(batch)
            return
        if len(batch):
            if s.first_offset is None:
                s.first_offset = batch.records.column(0)[0].as_py()
            s.records += len(batch)
            self.digest.update(batch.records)

    def finish(self) -> PartitionSummary:
        self.summary.content_digest = self.digest.hexdigest()
        return self.summary


def make_report(command: str, source: str, destination: str, options: dict,
                inputs: list[PartitionSummary], outputs: list[PartitionSummary],
                files: dict[str, dict], notes: list[str] | None = None) -> dict:
    """The report of one transform run. `files`: every file written (relative path -> size, sha256,
    mtime_ms), the report itself excepted."""
    return {
        "kfmt_report_version": REPORT_VERSION,
        "kfmt_version": __version__,
        "command": command,
        "source": source,
        "destination": destination,
        "options": options,
        "totals": {
            "partitions": len(inputs),
            "input_records": sum(p.records for p in inputs),
            "input_batches": sum(p.batches for p in inputs),
            "output_records": sum(p.records for p in outputs),
            "output_batches": sum(p.batches for p in outputs),
            "content_unchanged": [p.content_digest for p in inputs]
                                 == [p.content_digest for p in outputs],
        },
        "inputs": [p.to_json() for p in inputs],
        "outputs": [p.to_json() for p in outputs],
        "files": dict(sorted(files.items())),
        "notes": list(notes or []),
    }


def report_bytes(report: dict) -> bytes:
    return (json.dumps(report, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
