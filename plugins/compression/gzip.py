"""Codec 1: gzip (docs/format.md §5.2).

Kafka writes one gzip member through java.util.zip.GZIPOutputStream at level 6 (mtime 0, no file
name); it reads anything GZIPInputStream accepts, including header flags and concatenated members,
since payloads are often stored exactly as a non-Java producer compressed them.

kfmt writes the same member layout (Java's 10-byte header, raw deflate, CRC-32 and size), deflated by
ISA-L at its level 1 unless told otherwise: about nine times zlib level 6's speed on JSON-like
records (output 27 % larger) and ten times on incompressible ones (same size), measured in
docs/performance.md. Levels 1..9 are Kafka's own (compression.gzip.level, KIP-390: zlib's levels, as
java.util.zip deflates); isal-1..isal-3 are ISA-L's (its level 0 is left out: it grows incompressible
data by a fifth).
"""
import zlib


def _isal():
    """ISA-L's zlib-compatible module (the isal package): it inflates the same streams about twice as
    fast as zlib; None without it. Imported on first use: most commands never inflate anything."""
    global _fast_zlib
    if _fast_zlib is False:
        try:
            from isal import isal_zlib
        except ImportError:
            isal_zlib = None
        _fast_zlib = isal_zlib
    return _fast_zlib


_fast_zlib = False  # not imported yet


def _igzip():
    """ISA-L's own module (igzip_lib), which writes a gzip member whole in one call; None without it."""
    global _fast_igzip
    if _fast_igzip is False:
        try:
            from isal import igzip_lib
        except ImportError:
            igzip_lib = None
        _fast_igzip = igzip_lib
    return _fast_igzip


_fast_igzip = False  # not imported yet

from kfmt.format.codecs import DEFAULT_MAX_DECOMPRESSED, Compression, Levels, corrupt, too_large
from kfmt.plugin.hookspecs import hookimpl

ISAL_LEVELS = {"isal-1": 1, "isal-2": 2, "isal-3": 3}
KAFKA_LEVEL = 6  # Deflater.DEFAULT_COMPRESSION: what GZIPOutputStream writes in Kafka
DEFAULT_LEVEL = "isal-1"
# A member header's FLG byte and the bits RFC 1952 (2.3.1) reserves, which must be zero.
_FLG, _FLG_RESERVED = 3, 0xE0

# The 10-byte header GZIPOutputStream writes (JDK >= 16 sets OS = 0xff).
JAVA_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
CHUNK = 1 << 20


def _deflate(data, level) -> bytes:
    """Raw deflate at a gzip level: ISA-L for its named levels (zlib at level 1 where the isal
    package is missing: the output stays valid gzip), zlib for Kafka's numbers."""
    if level in ISAL_LEVELS:
        isal = _isal()
        if isal is not None:
            return isal.compress(data, ISAL_LEVELS[level], -15)
        level = 1
    return zlib.compress(data, level, -15)


class Gzip(Compression):
    id = 1
    name = "gzip"
    levels = Levels(1, 9, DEFAULT_LEVEL, tuple(ISAL_LEVELS), kafka=KAFKA_LEVEL)

    def compress(self, data, *, magic, level=None):
        level = DEFAULT_LEVEL if level is None else level
        igzip = _igzip() if level in ISAL_LEVELS else None
        if igzip is not None:  # one call: ISA-L's member header is Java's 10 bytes (a test holds it)
            return igzip.compress(data, ISAL_LEVELS[level], igzip.COMP_GZIP)
        body = _deflate(data, level)
        crc32 = (_isal() or zlib).crc32  # ISA-L's by carry-less multiplication: several times zlib's
        trailer = (crc32(data) & 0xFFFFFFFF).to_bytes(4, "little") + (len(data) & 0xFFFFFFFF).to_bytes(4, "little")
        return JAVA_HEADER + body + trailer

    def decompress(self, data, *, magic, max_size=DEFAULT_MAX_DECOMPRESSED):
        fast = _isal()
        if fast is not None:
            try:
                return self._decompress(fast, data, max_size)
            except Exception:  # anything amiss: zlib's verdict and message are the definition
                pass
        return self._decompress(zlib, data, max_size)

    def _decompress(self, lib, data, max_size):
        out = bytearray()
        data = memoryview(data)
        while True:  # one pass per gzip member
            if lib is not zlib and len(data) > _FLG and data[_FLG] & _FLG_RESERVED:
                # ISA-L reads past reserved header flags (RFC 1952 2.3.1) that zlib refuses: zlib's verdict
                raise ValueError("reserved gzip header flags: leave the member to zlib")
            d = lib.decompressobj(zlib.MAX_WBITS | 16)
            try:
                piece = d.decompress(data, max_size + 1 - len(out))
                if (not out and d.eof and not d.unconsumed_tail and len(piece) <= max_size
                        and d.unused_data[:2] != b"\x1f\x8b"):
                    return piece  # the usual single member: no copies into and out of `out`
                out += piece
                while d.unconsumed_tail and len(out) <= max_size:
                    out += d.decompress(d.unconsumed_tail, max_size + 1 - len(out))
            except lib.error as e:
                raise corrupt(self.name, e) from None
            if len(out) > max_size:
                raise too_large(self.name, max_size)
            if not d.eof:
                raise corrupt(self.name, "stream ends before the end of the gzip member")
            rest = d.unused_data
            # GZIPInputStream goes on into a concatenated member and ignores anything else.
            if rest[:2] != b"\x1f\x8b":
                return bytes(out)
            data = memoryview(rest)


@hookimpl
def kfmt_register_compressions(register):
    register(Gzip())
