"""The records inside a v2 batch (docs/format.md §4.4), decoded into and encoded from columns. Their
layout is kfmt.format.layout's V2_RECORD (length varint, attributes int8, timestampDelta varlong,
offsetDelta varint, keyLength varint and key, valueLength varint and value, headerCount varint and the
headers) and V2_RECORD_HEADER (headerKeyLength varint >= 0 and the key, headerValueLength varint and
the value; a negative length is null).

Strictness is Kafka's (DefaultRecord.readFrom): the bytes a record uses must equal its length, and no
bytes may follow the last declared record.

The v2 format plugin (plugins/formats/v2.py) decodes and encodes a batch's records here.
`decode_records` and `encode_records` run the compiled kernels of kfmt.format.kernels when they are
built (kfmt/csrc/records_v2.c: columns filled and read in C, handed to pyarrow without per-record
objects); the `*_reference` functions below are the pure-Python definition both must match.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from kfmt.errors import DataError
from kfmt.format.kernels import native
from kfmt.format.layout import V2_MIN_RECORD_SIZE
from kfmt.format.model import make_records
from kfmt.format.wire import int64, read_varint, read_varlong, varint

if TYPE_CHECKING:
    import pyarrow as pa  # imported where used: not on the paths that hold no record columns


def decode_records(data, count: int, base_offset: int, base_timestamp: int,
                   log_append_time: int | None) -> pa.RecordBatch:
    """Columns of `count` records in `data` (uncompressed). Positions in errors are relative to data."""
    if native is not None:
        try:
            records = native.decode_v2_records(data, count, base_offset, base_timestamp, log_append_time)
        except native.DecodeError as err:
            raise DataError(err.args[0], position=err.args[1]) from None
        if records is not NotImplemented:
            return records
    return decode_records_reference(data, count, base_offset, base_timestamp, log_append_time)


def encode_records(records: pa.RecordBatch, base_offset: int, base_timestamp: int) -> bytes:
    """The concatenated record bytes of `records` relative to the batch's base offset and time."""
    import pyarrow as pa  # records were made by it: already imported

    if native is not None and type(records) is pa.RecordBatch:
        body = native.encode_v2_records(records, base_offset, base_timestamp)
        if body is not NotImplemented:
            return body
    return encode_records_reference(records, base_offset, base_timestamp)


def decode_records_reference(data, count: int, base_offset: int, base_timestamp: int,
                             log_append_time: int | None) -> pa.RecordBatch:
    end = len(data)
    pos = 0
    if count > end // V2_MIN_RECORD_SIZE:
        # Checked before the columns are allocated: a corrupt count must not cost gigabytes.
        raise DataError(f"record batch declares {count} records but {end} bytes of records can hold "
                        f"at most {end // V2_MIN_RECORD_SIZE}", position=0)
    # The columns grow with the records parsed: a declared count allocates nothing (a few bytes of zstd
    # can decompress to a stream whose size allows millions of records, and hold none).
    offsets, timestamps, keys, values, headers = [], [], [], [], []
    for i in range(count):
        start = pos
        length, pos = read_varint(data, pos, end)
        body = pos
        if length < 0 or body + length > end:
            raise DataError(f"record {i} declares {length} bytes but {end - body} remain in the batch",
                            position=start)
        rec_end = body + length
        pos += 1  # attributes (unused)
        ts_delta, pos = read_varlong(data, pos, rec_end)
        off_delta, pos = read_varint(data, pos, rec_end)
        key, pos = _read_nullable(data, pos, rec_end, f"record {i} key", start)
        value, pos = _read_nullable(data, pos, rec_end, f"record {i} value", start)
        hcount, pos = read_varint(data, pos, rec_end)
        if hcount < 0 or hcount > rec_end - pos:
            raise DataError(f"record {i} has an invalid header count {hcount}", position=start)
        hs = ()
        if hcount:
            hs = []
            for _ in range(hcount):
                hklen, pos = read_varint(data, pos, rec_end)
                if hklen < 0 or pos + hklen > rec_end:
                    raise DataError(f"record {i} has an invalid header key length {hklen}", position=start)
                hkey = bytes(data[pos:pos + hklen])
                pos += hklen
                hval, pos = _read_nullable(data, pos, rec_end, f"record {i} header value", start)
                hs.append((hkey, hval))
        if pos != rec_end:
            raise DataError(f"record {i} declares {length} bytes but its fields use {pos - body}",
                            position=start)
        offsets.append(int64(base_offset + off_delta))
        timestamps.append(log_append_time if log_append_time is not None else int64(base_timestamp + ts_delta))
        keys.append(key)
        values.append(value)
        headers.append(hs)
    if pos != end:
        raise DataError(f"{end - pos} bytes follow the {count} declared records", position=pos)
    return make_records(offsets, timestamps, keys, values, headers)


def _read_nullable(data, pos: int, rec_end: int, what: str, start: int) -> tuple[bytes | None, int]:
    """A key, value or header value and the position after it: its varint length and bytes, or None for
    length -1 (docs/format.md, the v2 record); `what` names it in the error."""
    n, pos = read_varint(data, pos, rec_end)
    if n < 0:
        return None, pos
    if pos + n > rec_end:
        raise DataError(f"{what} of {n} bytes overruns its record", position=start)
    return bytes(data[pos:pos + n]), pos + n


def encode_records_reference(records: pa.RecordBatch, base_offset: int, base_timestamp: int) -> bytes:
    out = bytearray()
    cols = [records.column(i).to_pylist() for i in range(5)]
    for offset, timestamp, key, value, headers in zip(*cols):
        body = bytearray(b"\x00")
        body += varint(timestamp - base_timestamp)
        body += varint(offset - base_offset)
        _put_nullable(body, key)
        _put_nullable(body, value)
        body += varint(len(headers))
        for h in headers:
            hkey, hval = h["key"], h["value"]
            body += varint(len(hkey))
            body += hkey
            _put_nullable(body, hval)
        out += varint(len(body))
        out += body
    return bytes(out)


def _put_nullable(body: bytearray, data) -> None:
    """A record's key, value or header value: its varint length and bytes, or length -1 (the varint
    byte 0x01) for null (docs/format.md, the v2 record)."""
    if data is None:
        body += b"\x01"
    else:
        body += varint(len(data))
        body += data
