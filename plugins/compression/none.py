"""Codec 0: no compression."""
from kfmt.format.codecs import DEFAULT_MAX_DECOMPRESSED, Compression, too_large
from kfmt.plugin.hookspecs import hookimpl


class NoCompression(Compression):
    id = 0
    name = "none"

    def compress(self, data, *, magic, level=None):
        return bytes(data)

    def decompress(self, data, *, magic, max_size=DEFAULT_MAX_DECOMPRESSED):
        if len(data) > max_size:
            raise too_large(self.name, max_size)
        return data


@hookimpl
def kfmt_register_compressions(register):
    register(NoCompression())
