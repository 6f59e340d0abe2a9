"""Reading a segment: frame boundaries from headers alone, then batches decoded on demand.

Framing follows the broker's file reader (docs/format.md §2, FileLogInputStream): entries are
`offset(8) size(4) ...` with the magic at byte 16. Unlike the broker, which stops quietly at a bad
tail, kfmt says what it found there: `Tail` describes what follows the last complete entry, and the
strict readers turn anything but a clean end into a DataError naming file, position and offset.
A zero-filled tail (a preallocated segment, a copy from a running broker) is a clean end of data.

A bad tail of the partition's LAST segment (a broker killed mid-write, a copy cut short) is what
Kafka's log recovery truncates (LogSegment.recover stops at the first entry it cannot read and
truncates the segment there): readers that serve records as a broker does (`scan(...,
recover_tail=True)`) give every complete entry before it and one warning naming the file, the
position and the byte count. Anywhere else a bad tail stays an error.

Speed: the entries of the built-in formats are framed by the compiled scanner (kfmt.format.kernels) many
at a time; everything it is not sure of (the tail, damaged entries, other formats' magics) goes
through the Python step below, the reference, which makes every decision about bad data.
`FrameScanner.chunks()` gives the frames as arrays (kfmt.format.frames) for array-at-a-time callers.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from kfmt.errors import DataError, KfmtWarning
from kfmt.format.frames import FRAME_DTYPE, headers_of, rows_of
from kfmt.format.kernels import native
from kfmt.format.layout import (
    CODEC_MASK,
    HEADER_SIZE_UP_TO_MAGIC,
    LEGACY_ATTRIBUTES_AT,
    LOG_OVERHEAD,
    MAGIC_AT,
    MAGIC_V2,
    MAGICS,
    MIN_ENTRY_SIZE,
    V2_BATCH,
)
from kfmt.format.message_formats import STRICT, ReadOptions
from kfmt.format.model import INT32_MAX, Batch, BatchHeader
from kfmt.format.wire import INT16, INT64, OFFSET_AND_SIZE
from kfmt.plugin import registry

# Frames per array chunk: 640 KB of rows. Small enough that the entries a chunk covers (2 MB of
# 250-byte legacy messages) are still in the CPU's cache when the caller's next pass reads them
# (measured: 30% faster upgrades than with 64Ki-row chunks), large enough to make the per-chunk
# Python work negligible.
CHUNK_ROWS = 1 << 13


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

    def recovery_message(self, file: str) -> str:
        """One line for a bad tail of a partition's last segment, which log recovery truncates."""
        return (f"{file}: position {self.position}: {self.length} byte(s) after the last complete "
                f"entry are left out ({self.message}): a batch a running broker is still appending, "
                f"or a tail Kafka's log recovery truncates (LogSegment.recover)")

    def recovered(self, file: str) -> None:
        """Warn about a bad tail of a partition's last segment (no-op for a clean end)."""
        if self.is_error:
            warnings.warn(self.recovery_message(file), KfmtWarning, stacklevel=3)


def _all_zero(data, start: int, end: int) -> bool:
    return not np.frombuffer(data, dtype=np.uint8, count=end - start, offset=start).any()


class FrameScanner:
    """Iterate the entries of a byte range of a segment as BatchHeaders; afterwards `tail` says how
    the range ended.

    `data` holds the file's bytes from file position `base` on (a whole file has base 0); `start`
    and `end` are file positions. Header positions and error positions are file positions.
    """

    def __init__(self, data, file: str, start: int | None = None, end: int | None = None,
                 base: int = 0, first_rows: int | None = None):
        """`first_rows`: how many frames the first compiled call frames (default CHUNK_ROWS), doubling
        up to CHUNK_ROWS after it (a caller that wants the first entries only, as a lookup does,
        passes 1: framing and converting a whole chunk per lookup made index dumps slow)."""
        self.data = data
        self.file = file
        self.base = base
        self.start = base if start is None else start
        self.end = base + len(data) if end is None else end
        self.first_rows = first_rows
        self.tail: Tail | None = None

    def __iter__(self) -> Iterator[BatchHeader]:
        for item in self._walk():
            if isinstance(item, BatchHeader):
                yield item
            else:
                yield from headers_of(item)

    def chunks(self) -> Iterator[np.ndarray]:
        """The same frames as arrays of FRAME_DTYPE rows (at most CHUNK_ROWS each), in file order;
        afterwards `tail` says how the range ended."""
        pending: list[BatchHeader] = []
        for item in self._walk():
            if isinstance(item, BatchHeader):
                pending.append(item)
                if len(pending) < CHUNK_ROWS:
                    continue
                item = rows_of(pending)
                pending = []
            elif pending:
                yield rows_of(pending)
                pending = []
            yield item
        if pending:
            yield rows_of(pending)

    def _walk(self) -> Iterator[BatchHeader | np.ndarray]:
        """Row chunks from the compiled scanner and headers from the Python step, in file order
        (positions made file positions); sets `tail`."""
        for item in self._scan(self.data, self.start - self.base, self.end - self.base):
            if isinstance(item, BatchHeader) and self.base:
                item.position += self.base
            yield item
        if self.base:
            self.tail = Tail(self.tail.kind, self.tail.position + self.base, self.tail.length,
                             self.tail.message, self.tail.offset)

    def _scan(self, data, pos: int, end: int) -> Iterator[BatchHeader | np.ndarray]:
        formats = registry.get().formats
        magics = _natively_framed(formats)
        previous = None  # last offset of the previous entry of this range
        limit = self.first_rows or CHUNK_ROWS
        while True:
            if magics:
                rows, count, pos = native.scan_frames(data, pos, end, self.base, magics, limit)
                if count:
                    rows = np.frombuffer(rows, FRAME_DTYPE, count)
                    yield rows
                    previous = int(rows["last_offset"][-1])
                    if count == limit:
                        limit = min(2 * limit, CHUNK_ROWS)
                        continue
            # The Python step: one entry, or the end of the range.
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
            magic = head[MAGIC_AT]
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


def _natively_framed(formats: dict) -> int:
    """Bit m set when magic m's format lets the compiled scanner frame its entries (a format class
    says so itself with `native_frames = True`; a subclass that does not repeat it is not trusted
    to read headers the same way)."""
    if native is None:
        return 0
    mask = 0
    for magic in MAGICS:
        fmt = formats.get(magic)
        if fmt is not None and type(fmt).__dict__.get("native_frames", False):
            mask |= 1 << magic
    return mask


def _offset_to_name(stored: int | None, previous: int | None) -> int | None:
    """The offset an error about a bad entry names: the one its first bytes hold when that is
    plausible (after the previous entry's, within int32 of it, docs/format.md §18.16), else the offset
    the previous entry leads to: trailing garbage has no offset of its own."""
    if stored is not None and (previous is None or previous < stored <= previous + INT32_MAX):
        return stored
    return None if previous is None else previous + 1


def scan(data, file: str, start: int | None = None, end: int | None = None,
         base: int = 0, recover_tail: bool = False) -> Iterator[BatchHeader]:
    """Frames of a range; raises DataError if the range does not end cleanly, or with
    `recover_tail` (the range ends the partition's last segment) warns that the tail is left out."""
    scanner = FrameScanner(data, file, start, end, base)
    yield from scanner
    if scanner.tail.is_error:
        if not recover_tail:
            raise scanner.tail.error(file)
        scanner.tail.recovered(file)


# The bytes of an entry's start that say its magic and codec, whatever its format.
KIND_BYTES = V2_BATCH.at("lastOffsetDelta")


def entry_kind(head) -> tuple[int, int] | None:
    """(magic, codec) of the entry whose first KIND_BYTES bytes are `head` (docs/format.md §2: the
    magic at byte 16 of every entry; the codec the low bits of the attributes, an int8 in v0/v1 and
    an int16 in v2); None when they are fewer."""
    if len(head) < KIND_BYTES:
        return None
    magic = head[MAGIC_AT]
    if magic < MAGIC_V2:
        return magic, head[LEGACY_ATTRIBUTES_AT] & CODEC_MASK
    return magic, INT16.unpack_from(head, V2_BATCH.at("attributes"))[0] & CODEC_MASK


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
            end: int | None = None, base: int = 0, recover_tail: bool = False) -> Iterator[Batch]:
    for header in scan(data, file, start, end, base, recover_tail):
        yield decode(data, header, file, options, base)
