"""Message format v2: record batches (Kafka 0.11+, docs/format.md §4), whose header is declared in
kfmt.format.layout (V2_BATCH: baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes,
lastOffsetDelta, baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, recordsCount,
then the records of kfmt.format.v2_records, or one compressed stream of them; V2_ATTRIBUTES: its
bits). The records' decode and encode, with the choice between their compiled kernels and their
reference, sit in the format layer beside the other kernel choices (docs/architecture.md).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from kfmt.errors import DataError
from kfmt.format.layout import (
    ATTR_CONTROL,
    ATTR_DELETE_HORIZON,
    ATTR_LOG_APPEND_TIME,
    ATTR_TRANSACTIONAL,
    CODEC_MASK,
    MAGIC_V2,
    V2_BATCH,
    V2_BATCH_OVERHEAD,
    V2_CRC_FROM,
)
from kfmt.format.message_formats import STRICT, MessageFormat, ReadOptions
from kfmt.format import model
from kfmt.format.model import Batch, BatchHeader, TimestampType
from kfmt.format.v2_records import decode_records, encode_records
from kfmt.format.wire import crc32c, int64
from kfmt.plugin import registry
from kfmt.plugin.hookspecs import hookimpl

if TYPE_CHECKING:
    import pyarrow as pa  # imported where used: not on the paths that hold no record columns

HEADER = V2_BATCH.struct
UP_TO_CRC = V2_BATCH.struct_of("baseOffset", "crc")  # the fields before those the CRC covers, and it
AFTER_CRC = V2_BATCH.struct_of("attributes", "recordsCount")
LENGTH_FROM_CRC = V2_CRC_FROM - V2_BATCH.at("partitionLeaderEpoch")  # partitionLeaderEpoch, magic, crc


def attributes_of(header: BatchHeader) -> int:
    return (header.compression
            | (ATTR_LOG_APPEND_TIME if header.timestamp_type == TimestampType.LOG_APPEND_TIME else 0)
            | (ATTR_TRANSACTIONAL if header.is_transactional else 0)
            | (ATTR_CONTROL if header.is_control else 0)
            | (ATTR_DELETE_HORIZON if header.has_delete_horizon else 0))


class RecordBatchV2(MessageFormat):
    name = "v2"
    magics = (MAGIC_V2,)
    native_frames = True  # kfmt.format.segment may frame these entries with the compiled scanner

    def read_header(self, entry: memoryview, position: int) -> BatchHeader:
        if len(entry) < V2_BATCH_OVERHEAD:
            raise DataError(f"record batch of {len(entry)} bytes is smaller than the minimum "
                            f"{V2_BATCH_OVERHEAD}", position=position)
        (base_offset, _length, ple, magic, crc, attrs, last_delta, base_ts, max_ts, pid, epoch,
         base_seq, count) = HEADER.unpack_from(entry)
        return BatchHeader(
            magic=magic, base_offset=base_offset, last_offset=int64(base_offset + last_delta),
            compression=attrs & CODEC_MASK,
            timestamp_type=(TimestampType.LOG_APPEND_TIME if attrs & ATTR_LOG_APPEND_TIME
                            else TimestampType.CREATE_TIME),
            max_timestamp=max_ts, base_timestamp=base_ts, partition_leader_epoch=ple,
            producer_id=pid, producer_epoch=epoch, base_sequence=base_seq, records_count=count,
            is_transactional=bool(attrs & ATTR_TRANSACTIONAL), is_control=bool(attrs & ATTR_CONTROL),
            has_delete_horizon=bool(attrs & ATTR_DELETE_HORIZON), attributes=attrs,
            position=position, size=len(entry), crc=crc)

    def crc_valid(self, entry: memoryview, header: BatchHeader) -> bool:
        return crc32c(entry[V2_CRC_FROM:]) == header.crc

    def decode(self, entry: memoryview, header: BatchHeader, options: ReadOptions = STRICT) -> Batch:
        crc_valid = self.crc_valid(entry, header)
        if not crc_valid and options.check_crc:
            raise DataError(f"record batch is corrupt (stored crc = {header.crc}, computed crc = "
                            f"{crc32c(entry[V2_CRC_FROM:])})", offset=header.base_offset)
        count = header.records_count
        if count < 0:
            raise DataError(f"record batch declares a negative record count {count}",
                            offset=header.base_offset)
        if count == 0:
            # DefaultRecordBatch.iterator() returns nothing for an empty batch without looking at
            # (or decompressing) what follows the header (docs/format.md §4.7).
            return Batch(header=header, records=model.EMPTY_RECORDS, crc_valid=crc_valid)
        payload = entry[V2_BATCH_OVERHEAD:]
        compressed = bool(header.compression)
        if compressed:
            codec = registry.get().compression_for(header.compression, MAGIC_V2)
            payload = codec.decompress(payload, magic=MAGIC_V2, max_size=options.max_decompressed)
        lat = header.max_timestamp if header.timestamp_type == TimestampType.LOG_APPEND_TIME else None
        try:
            records = decode_records(payload, count, header.base_offset, header.base_timestamp, lat)
        except DataError as err:
            if compressed:
                # A position inside the decompressed stream means nothing in the file.
                err.message = f"{err.message} (at byte {err.position} of the decompressed records)"
                err.position = None
            elif err.position is not None:
                err.position += V2_BATCH_OVERHEAD
            raise
        return Batch(header=header, records=records, crc_valid=crc_valid)

    def encode(self, header: BatchHeader, records: pa.RecordBatch, *, level: int | None = None) -> bytes:
        body = encode_records(records, header.base_offset, header.base_timestamp)
        if header.compression:
            codec = registry.get().compression_for(header.compression, MAGIC_V2)
            body = codec.compress(body, magic=MAGIC_V2, level=level)
        after_crc = AFTER_CRC.pack(
            attributes_of(header), header.last_offset - header.base_offset, header.base_timestamp,
            header.max_timestamp, header.producer_id, header.producer_epoch, header.base_sequence,
            records.num_rows) + body
        crc = crc32c(after_crc)
        batch_length = LENGTH_FROM_CRC + len(after_crc)  # batchLength counts the bytes after itself
        return UP_TO_CRC.pack(header.base_offset, batch_length, header.partition_leader_epoch, MAGIC_V2,
                              crc) + after_crc


@hookimpl
def kfmt_register_formats(register):
    register(RecordBatchV2())

