"""The compressed bytes of a run of entries, inflated by their codec plugins with no Python per entry
but the codec's call.

`compressed_spans` (kfmt/csrc/compressed.c) checks a run of compressed data entries as
kfmt.format.inflated_runs.inflated_v2 / inflated_wrapper check each one (framing, CRC, attributes) and
says where each one's compressed bytes lie, one int64 row per entry (SPAN_FIELDS). `SpanInflater`
inflates those rows a few MB at a time: one list comprehension of codec calls over slices of one
memoryview (codecs are plugins: each payload is one call), no Python object made per entry but the
payload. The codec of an entry that refuses it (DataError), or the format of one that is not
kfmt's own, ends the payloads there: the per-entry decode then decides on that entry and reports it.
"""
from __future__ import annotations

import numpy as np

from kfmt.errors import DataError
from kfmt.format.message_formats import ReadOptions

# compressed_spans' rows (kfmt/csrc/compressed.c): where an entry's compressed bytes lie in the data
# (value_len -1: an empty v2 batch, nothing to inflate) and what the walk of its records needs (v2:
# count, base offset and timestamp; a wrapper: its offset in base_offset)
SPAN_FIELDS = ("value_at", "value_len", "codec", "magic", "count", "base_offset", "base_timestamp",
               "has_lat", "lat")
(VALUE_AT, VALUE_LEN, CODEC, MAGIC, COUNT, BASE_OFFSET, BASE_TS, HAS_LAT, LAT) = range(len(SPAN_FIELDS))

# Inflated bytes per kernel call: the payloads of a call are held at once, and decoded into columns of
# their size (at this size, below glibc's mmap threshold, that memory is reused rather than fresh pages)
MAX_CALL_BYTES = 1 << 23
_FIRST_RATIO = 4  # inflated bytes per compressed byte guessed before anything is inflated


def native_format(formats, magic: int) -> bool:
    """Whether the format plugin reading `magic` is kfmt's own, whose decode the kernels mirror (another
    plugin's format decides for itself)."""
    return bool(type(formats.format_for(magic)).__dict__.get("native_frames", False))


class SpanInflater:
    """Payloads of span rows of `data`, about MAX_CALL_BYTES inflated at a time. The inflated size is
    known only after inflating, so each slice of rows is sized from its compressed bytes by the ratio
    what was inflated before came out at (memory stays about one call's worth, however well the
    entries compress)."""

    def __init__(self, data, options: ReadOptions):
        self.data = memoryview(data)
        self.max_size = options.max_decompressed
        self.compressed, self.inflated = 1, _FIRST_RATIO
        self._decompress: dict[int, object] = {}  # codec << 8 | magic -> the plugin's decompress, or None

    def payloads(self, spans: np.ndarray, start: int, stop: int, formats) -> tuple[list, bool]:
        """(the payloads of span rows start.. (before stop), refused): refused where the row after the
        last payload is one the per-entry decode must decide on (its codec refused it, or there is no
        codec or no kfmt format for it); payload i is row start + i's (b"" for an empty v2 batch)."""
        part = spans[start:stop]
        ratio = max(self.inflated / self.compressed, 1.0)
        sizes = np.cumsum(np.maximum(part[:, VALUE_LEN], 0))
        n = max(int(np.searchsorted(sizes, MAX_CALL_BYTES / ratio, side="right")), 1)
        keys = part[:n, CODEC] << 8 | part[:n, MAGIC]
        n, refused = self._known(keys, n, formats)
        data, max_size, decompress = self.data, self.max_size, self._decompress
        ats, lens, keys = part[:n, VALUE_AT].tolist(), part[:n, VALUE_LEN].tolist(), keys[:n].tolist()
        try:
            out = [decompress[k](data[a:a + m], magic=k & 0xFF, max_size=max_size) if m >= 0 else b""
                   for a, m, k in zip(ats, lens, keys)]
        except DataError:
            out, refused = self._one_by_one(ats, lens, keys), True
        self.compressed += int(sizes[len(out) - 1]) if out else 0
        self.inflated += sum(map(len, out))
        return out, refused

    def _known(self, keys: np.ndarray, n: int, formats) -> tuple[int, bool]:
        """(how many of the first n rows have a codec plugin and a kfmt format, whether one does not)."""
        for key in np.flatnonzero(np.bincount(keys)).tolist():  # not np.unique: it imports numpy.ma
            if key not in self._decompress:
                self._decompress[key] = _decompressor(formats, key >> 8, key & 0xFF)
            if self._decompress[key] is None:
                n = min(n, int(np.argmax(keys == key)))
        return n, n < len(keys)

    def _one_by_one(self, ats: list, lens: list, keys: list) -> list:
        """The payloads up to the first one its codec refuses."""
        out = []
        for a, m, k in zip(ats, lens, keys):
            try:
                out.append(self._decompress[k](self.data[a:a + m], magic=k & 0xFF, max_size=self.max_size)
                           if m >= 0 else b"")
            except DataError:
                break
        return out


def _decompressor(formats, codec: int, magic: int):
    """The decompress of `codec`'s plugin in `magic`, or None: no such codec, or a format not kfmt's."""
    if not native_format(formats, magic):
        return None
    try:
        return formats.compression_for(codec, magic).decompress
    except DataError:
        return None
