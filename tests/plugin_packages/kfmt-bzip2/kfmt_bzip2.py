"""bzip2 as a kfmt compression codec, with bzip2's levels (Python's bz2 module).

Kafka knows the codec ids 0 to 4 only: batches in this codec (id 5) are for tools that load this
plugin, not for a broker."""
import bz2

from kfmt.format.codecs import DEFAULT_MAX_DECOMPRESSED, Compression, corrupt, too_large
from kfmt.plugin.hookspecs import hookimpl
from kfmt.plugin.options import Option


class Bzip2(Compression):
    id = 5                           # the attribute bits 0-2 of the batches it compresses
    name = "bzip2"                   # kfmt recompress --compression bzip2
    magics = frozenset({2})          # the message formats it may appear in
    # its levels: kfmt recompress --level 1..9; compress() receives the one asked for, or None
    level = Option("level", "bzip2's block size, in 100 kB", int, default=9, low=1, high=9)

    def compress(self, data, *, magic, level=None):
        return bz2.compress(data, self.level.default if level is None else level)

    def decompress(self, data, *, magic, max_size=DEFAULT_MAX_DECOMPRESSED):
        inflater = bz2.BZ2Decompressor()
        try:  # never more than the cap: it stops decompression bombs
            out = inflater.decompress(data, max_length=max_size + 1)
        except OSError as err:
            raise corrupt(self.name, err) from None
        if len(out) > max_size:
            raise too_large(self.name, max_size)
        if not inflater.eof:
            raise corrupt(self.name, "the stream ends early")
        return out


@hookimpl
def kfmt_register_compressions(register):
    register(Bzip2())
