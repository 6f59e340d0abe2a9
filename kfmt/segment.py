"""Reading a segment: frame boundaries from headers alone, then batches decoded on demand.

Framing follows the broker's file reader (reference §2, FileLogInputStream): entries are
`offset(8) size(4) ...` with the magic at byte 16. Unlike the broker, which stops quietly at a bad
tail, kfmt says what it found there: `Tail` describes what follows the last complete entry, and the
strict readers turn anything but a clean end into a DataError naming file, position and offset.
A zero-filled tail (a preallocated segment, a copy from a running broker) is a clean end of data.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np

from kfmt import registry
from kfmt.errors import DataError
from kfmt.formats import STRICT, ReadOptions
from kfmt.model import HEADER_SIZE_UP_TO_MAGIC, INT32_MAX, LOG_OVERHEAD, Batch, BatchHeader
from kfmt.wire import INT64, OFFSET_AND_SIZE

MIN_ENTRY_SIZE = 14  # LegacyRecord.RECORD_OVERHEAD_V0: the broker's lower bound for any entry


@dataclass(frozen=True)
class Tail:
    """What follows the last complete entry of a scanned range."""

    kind: str  # "clean" | "zeros" | "truncated" | "corrupt"
    position: int
    length: int  # bytes from position to the end of the range
    message: str = ""
    offset: int | None = None

    @property
    def is_error(self) -> bool:
        return self.kind in ("truncated", "corrupt")

    def error(self, file: str) -> DataError:
        return DataError(self.message, file=file, position=self.position, offset=self.offset)


def _all_zero(data, start: int, end: int) -> bool:
    return not np.frombuffer(data, dtype=np.uint8, count=end - start, offset=start).any()


class FrameScanner:
    """Iterate the entries of a byte range of a segment as BatchHeaders; afterwards `tail` says how
    the range ended.

    `data` holds the file's bytes from file position `base` on (a whole file has base 0); `start`
    and `end` are file positions. Header positions and error positions are file positions.
    """

    def __init__(self, data, file: str, start: int | None = None, end: int | None = None,
                 base: int = 0):
        self.data = data
        self.file = file
        self.base = base
        self.start = base if start is None else start
        self.end = base + len(data) if end is None else end
        self.tail: Tail | None = None

    def __iter__(self) -> Iterator[BatchHeader]:
        for header in self._scan(self.data, self.start - self.base, self.end - self.base):
            if self.base:
                header.position += self.base
            yield header
        if self.base:
            self.tail = Tail(self.tail.kind, self.tail.position + self.base, self.tail.length,
                             self.tail.message, self.tail.offset)

    def _scan(self, data, pos: int, end: int) -> Iterator[BatchHeader]:
        formats = registry.get().formats
        previous = None  # last offset of the previous entry of this range
        while True:
            remaining = end - pos
            if remaining == 0:
                self.tail = Tail("clean", pos, 0)
                return
            head = bytes(data[pos:pos + min(remaining, HEADER_SIZE_UP_TO_MAGIC)])
            # Only a range whose next header is all zeros can be a zero-filled tail, so the
            # (whole-tail) check runs at most once per range.
            if not any(head) and _all_zero(data, pos, end):
                self.tail = Tail("zeros", pos, remaining)
                return
            stored = INT64.unpack_from(head)[0] if len(head) >= 8 else None
            offset = _offset_to_name(stored, previous)

            def bad(kind: str, message: str) -> Tail:
                if stored is not None and offset != stored:
                    message = f"{remaining} bytes after offset {previous} are not an entry: {message}"
                return Tail(kind, pos, remaining, message, offset)

            if remaining <= HEADER_SIZE_UP_TO_MAGIC:
                self.tail = bad("truncated", f"{remaining} trailing bytes are too few for an entry header")
                return
            _, size = OFFSET_AND_SIZE.unpack_from(head)
            if size < MIN_ENTRY_SIZE:
                self.tail = bad("corrupt", f"entry size {size} is less than the minimum {MIN_ENTRY_SIZE}")
                return
            if size > remaining - LOG_OVERHEAD:
                self.tail = bad("truncated", f"entry of {size + LOG_OVERHEAD} bytes runs past the end of "
                                             f"the data: only {remaining} bytes remain")
                return
            magic = head[16]
            fmt = formats.get(magic)
            if fmt is None:
                self.tail = bad("corrupt", f"unknown magic {magic}")
                return
            entry = data[pos:pos + LOG_OVERHEAD + size]
            try:
                header = fmt.read_header(entry, pos)
            except DataError as err:
                self.tail = bad("corrupt", err.message)
                return
            yield header
            previous = header.last_offset
            pos += LOG_OVERHEAD + size


def _offset_to_name(stored: int | None, previous: int | None) -> int | None:
    """The offset an error about a bad entry names: the one its first bytes hold when that is
    plausible (after the previous entry's, within int32 of it, reference §18.16), else the offset
    the previous entry leads to: trailing garbage has no offset of its own."""
    if stored is not None and (previous is None or previous < stored <= previous + INT32_MAX):
        return stored
    return None if previous is None else previous + 1


def scan(data, file: str, start: int | None = None, end: int | None = None,
         base: int = 0) -> Iterator[BatchHeader]:
    """Frames of a range; raises DataError if the range does not end cleanly."""
    scanner = FrameScanner(data, file, start, end, base)
    yield from scanner
    if scanner.tail.is_error:
        raise scanner.tail.error(file)


def entry_bytes(data, header: BatchHeader, base: int = 0):
    start = header.position - base
    return data[start:start + header.size]


def decode(data, header: BatchHeader, file: str, options: ReadOptions = STRICT,
           base: int = 0) -> Batch:
    """Decode the entry `header` describes; errors carry the file and absolute position."""
    fmt = registry.get().format_for(header.magic)
    try:
        return fmt.decode(entry_bytes(data, header, base), header, options)
    except DataError as err:
        raise err.located(file=file, base_position=header.position,
                          offset=header.base_offset if header.base_offset is not None
                          else header.last_offset)


def batches(data, file: str, options: ReadOptions = STRICT, start: int | None = None,
            end: int | None = None, base: int = 0) -> Iterator[Batch]:
    for header in scan(data, file, start, end, base):
        yield decode(data, header, file, options, base)
