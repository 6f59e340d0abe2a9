"""Message formats, as plugins see them.

A format plugin handles one or more magic values (the byte at position 16 of every entry, docs/format.md §2).
It reads a batch header from an entry's bytes without decompressing, decodes an entry into a Batch
(header facts plus record columns) and encodes a header plus record columns into entry bytes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kfmt.format.codecs import DEFAULT_MAX_DECOMPRESSED
from kfmt.format.model import Batch, BatchHeader

if TYPE_CHECKING:
    import pyarrow as pa  # imported where used: not on the paths that hold no record columns


@dataclass(frozen=True, slots=True)
class ReadOptions:
    """How strictly to decode."""

    #: raise DataError on a CRC mismatch (a consumer with check.crcs=true does); when False the
    #: mismatch is only recorded on the batch (kafka-dump-log prints `isvalid: false`)
    check_crc: bool = True
    #: cap on one batch's decompressed size
    max_decompressed: int = DEFAULT_MAX_DECOMPRESSED


STRICT = ReadOptions()
LENIENT = ReadOptions(check_crc=False)


class MessageFormat:
    """Base class of a message-format plugin."""

    name: str
    #: the magic values this format handles
    magics: tuple[int, ...]

    def read_header(self, entry: memoryview, position: int) -> BatchHeader:
        """The header facts of one complete entry (`entry` starts at its offset field), without
        decompressing. `position` is where the entry starts in its file."""
        raise NotImplementedError

    def decode(self, entry: memoryview, header: BatchHeader, options: ReadOptions = STRICT) -> Batch:
        """Decode a complete entry whose header `read_header` returned."""
        raise NotImplementedError

    def crc_valid(self, entry: memoryview, header: BatchHeader) -> bool:
        """Whether the entry's stored CRC matches its bytes, without decoding the records
        (kafka-dump-log's `isvalid`). Formats override this with their cheap check."""
        return self.decode(entry, header, LENIENT).crc_valid

    def encode(self, header: BatchHeader, records: pa.RecordBatch, *, level: int | None = None) -> bytes:
        """Encode records under the given header facts into one entry (CRC and sizes computed here)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} magics={self.magics}>"
