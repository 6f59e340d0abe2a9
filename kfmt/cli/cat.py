"""kfmt cat: records in offset order, as a Kafka consumer sees them."""
from __future__ import annotations

import sys
import warnings

from kfmt.cli._common import (
    add_format_argument,
    add_include_deleted_argument,
    add_path_arguments,
    add_typing_arguments,
    b64,
    dumps,
    java_utf8,
    open_partitions,
    typing_arguments,
)
from kfmt.errors import DataError, KfmtWarning, UsageError

NAME = "cat"
HELP = "print records in offset order (JSON lines with --format json)"


def add_arguments(p):
    add_path_arguments(p)
    seek = p.add_mutually_exclusive_group()
    seek.add_argument("--from-offset", type=int, metavar="N", help="start at offset N (seeks via .index)")
    seek.add_argument("--from-timestamp", type=int, metavar="MS",
                      help="start at the first record whose timestamp is >= MS (seeks via .timeindex)")
    p.add_argument("--max-records", type=int, metavar="K", help="stop after K records (per partition)")
    p.add_argument("--isolation", choices=("read_uncommitted", "read_committed"),
                   default="read_uncommitted", help="read_committed leaves out aborted transactions")
    p.add_argument("--include-control", action="store_true",
                   help="also print control records (transaction markers)")
    add_include_deleted_argument(p)
    add_format_argument(p)
    add_typing_arguments(p, on_error_default="skip")


def run(args) -> int:
    if args.max_records is not None and args.max_records < 0:
        raise UsageError("--max-records must be >= 0")
    parts, is_log_dir = open_partitions(args)
    args.typing = _bind_typing(args, parts)
    out = sys.stdout
    raw = getattr(out, "buffer", None)
    for part in parts:
        where = {"topic": part.topic, "partition": part.partition} if is_log_dir else {}
        for line in live_partition_lines(part, args, where):
            if isinstance(line, bytes):  # ASCII lines of a whole batch (json_lines.record_block)
                if raw is None:
                    line = line.decode("ascii")
                else:
                    out.flush()
                    raw.write(line)
                    raw.write(b"\n")
                    continue
            out.write(line)
            out.write("\n")
    out.flush()
    return 0


class _Progress:
    next_offset: int | None = None  # after the last batch read


def live_partition_lines(part, args, where: dict):
    """partition_lines, on a directory a broker may be changing (kfmt.partition.live): a segment
    that goes before any record was read makes the partition be listed again and read from the
    start; one that goes later ends the partition's records there, with one warning."""
    from kfmt.partition.layout import relisted
    from kfmt.partition.live import RETRIES, SegmentGone, stopped_warning

    for attempt in range(RETRIES + 1):
        progress = _Progress()
        try:
            yield from partition_lines(part, args, where, progress)
            return
        except SegmentGone as err:
            if progress.next_offset is not None or attempt == RETRIES:
                warnings.warn(stopped_warning(part.label, str(err), progress.next_offset), KfmtWarning)
                return
            part = relisted(part)


def partition_lines(part, args, where: dict, progress: _Progress | None = None):
    # imported here, not at the top: building the parser (kfmt --help) must not import pyarrow
    from kfmt.partition.reader import PartitionReader
    from kfmt.partition.transactions import ABORTED, OPEN, TransactionStatus, transaction_batches
    from kfmt.rows import json_lines

    progress = progress or _Progress()
    reader = PartitionReader(part, from_log_start=not args.include_deleted, recover_tail=True)
    start = reader.start_point(args.from_offset, args.from_timestamp)
    if start is None:
        return
    committed_only = args.isolation == "read_committed"
    txns = (TransactionStatus(transaction_batches(PartitionReader(part, recover_tail=True), *start[:2]))
            if committed_only else None)
    left = args.max_records
    for seg, batch, skip in reader.batches_from(*start):
        h = batch.header
        progress.next_offset = h.next_offset
        if h.is_control and not args.include_control:
            continue
        if committed_only and h.is_transactional and not h.is_control:
            status = txns.status(h)
            if status == OPEN:
                return  # the last stable offset: a committed reader sees nothing beyond it
            if status == ABORTED:
                continue
        typing = args.typing.get(part.topic) if getattr(args, "typing", None) else None
        if typing is not None:
            if left is not None:  # decode only the records still wanted
                if left <= 0:
                    return
                wanted = min(left, len(batch.records) - skip)
                left -= wanted
            else:
                wanted = None
            try:
                yield from typed_records_of(batch, skip, where, args.format == "json", typing, wanted)
            except DataError as err:
                raise err.located(file=part.display(seg.log), base_position=h.position) from None
            continue
        if left is None and args.format == "json":
            block = json_lines.record_block(batch, skip, where)  # a batch's lines in one call
            if block is not None:
                if block:
                    yield block
                continue
        try:
            for record in records_of(batch, skip, where, args.format == "json"):
                if left is not None:
                    if left <= 0:
                        return
                    left -= 1
                yield record
        except DataError as err:  # a malformed control record: name where it is
            raise err.located(file=part.display(seg.log), base_position=h.position,
                              offset=h.base_offset) from None


def _bind_typing(args, parts) -> dict:
    from kfmt.api.commands import typing_options
    from kfmt.rows.typed import bind_typing
    from kfmt.storage.store import parse_storage_options

    options = typing_options(**typing_arguments(args))
    return bind_typing(options, parts, args.path, parse_storage_options(args.storage_option))


def typed_records_of(batch, skip: int, where: dict, as_json: bool, typing, count: int | None = None):
    """records_of with keys and values decoded by the topic's value formats (kfmt.rows.typed): JSON
    values of the decoded columns (docs/typed-export.md, "cat"); the first `count` records from `skip`
    only, if given (--max-records: the rest are not decoded)."""
    from kfmt.rows.typed import plain_values

    h = batch.header
    records = batch.records.slice(skip, count)
    decoded = {}
    for side in ("key", "value"):
        decoder = typing.decoders.get(side)
        if decoder is None:
            continue
        out = decoder.decode(records.column(side))
        if len(out.failed) and not h.is_control:
            row = int(out.failed[0])
            message = (f"{typing.topic}: offset {records.column('offset')[row].as_py()}: the {side} "
                       f"does not decode as {typing.formats[side]}: {out.reasons[0]}")
            if typing.on_decode_error == "fail":
                raise DataError(message)
            for i, reason in zip(out.failed.tolist(), out.reasons):
                warnings.warn(f"{typing.topic}: offset {records.column('offset')[i].as_py()}: the {side} "
                              f"does not decode as {typing.formats[side]}: {reason}", KfmtWarning)
        decoded[side] = plain_values(out.column)
    for i, obj in enumerate(_plain_records(batch, skip, where, count)):
        for side, values in decoded.items():
            obj[side] = values[i]
        yield dumps(obj) if as_json else text_line(obj, None, None, [])


def _plain_records(batch, skip: int, where: dict, count: int | None = None):
    h = batch.header
    cols = batch.records.slice(skip, count).to_pydict()
    epoch = h.partition_leader_epoch if h.partition_leader_epoch >= 0 else None
    for offset, ts, key, value, headers in zip(cols["offset"], cols["timestamp"], cols["key"],
                                                cols["value"], cols["headers"]):
        yield {"offset": offset, "timestamp": ts, "timestampType": h.timestamp_type.java_name,
               "key": b64(key), "value": b64(value),
               "headers": [{"key": java_utf8(x["key"]), "value": b64(x["value"])} for x in headers],
               "leaderEpoch": epoch, **where}


def records_of(batch, skip: int, where: dict, as_json: bool):
    from kfmt.format.control import control_type

    h = batch.header
    cols = batch.records.slice(skip).to_pydict()
    ts_type = h.timestamp_type.java_name
    epoch = h.partition_leader_epoch if h.partition_leader_epoch >= 0 else None
    for offset, ts, key, value, headers in zip(cols["offset"], cols["timestamp"], cols["key"],
                                                cols["value"], cols["headers"]):
        obj = {"offset": offset, "timestamp": ts, "timestampType": ts_type, "key": b64(key),
               "value": b64(value),
               "headers": [{"key": java_utf8(x["key"]), "value": b64(x["value"])} for x in headers],
               "leaderEpoch": epoch, **where}
        if h.is_control:
            obj["control"] = control_type(key).name
        yield dumps(obj) if as_json else text_line(obj, key, value, headers)


def text_line(obj: dict, key, value, headers) -> str:
    prefix = f"{obj['topic']}-{obj['partition']} " if "topic" in obj else ""
    hs = ",".join(f"{java_utf8(h['key'])}={_show(h['value'])}" for h in headers)
    control = f" control={obj['control']}" if "control" in obj else ""
    return (f"{prefix}offset={obj['offset']} {obj['timestampType']}={obj['timestamp']}{control} "
            f"key={_show(key)} value={_show(value)}" + (f" headers=[{hs}]" if headers else ""))


_ESCAPES = {c: f"\\x{c:02x}" for c in [*range(0x20), 0x7F]} | {ord("\n"): "\\n", ord("\t"): "\\t",
                                                         ord("\r"): "\\r", ord("\\"): "\\\\"}


def _show(data: bytes | None) -> str:
    """Bytes for a one-line display: UTF-8 text (invalid bytes and control characters escaped)."""
    if data is None:
        return "null"
    return data.decode("utf-8", "backslashreplace").translate(_ESCAPES)
