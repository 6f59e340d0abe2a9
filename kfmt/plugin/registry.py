"""What the loaded plugins provide, looked up by key: formats by magic, codecs by id or name,
storage backends by URL, exporters and CLI commands by name. Built lazily from the plugin manager;
`reset()` after registering or unregistering a plugin at run time."""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Callable

from kfmt.errors import CompressionError, DataError, UsageError


@dataclass(frozen=True)
class Command:
    name: str
    add_arguments: Callable
    run: Callable
    help: str = ""


@dataclass
class Registry:
    formats: dict = field(default_factory=dict)  # magic -> MessageFormat
    compressions: dict = field(default_factory=dict)  # id -> Compression
    storage: list = field(default_factory=list)  # StorageBackend, in registration order
    exporters: dict = field(default_factory=dict)  # name -> Exporter
    commands: dict = field(default_factory=dict)  # name -> Command

    def format_for(self, magic: int):
        fmt = self.formats.get(magic)
        if fmt is None:
            raise DataError(f"unknown message format magic {magic} (known: "
                            f"{', '.join(map(str, sorted(self.formats)))})")
        return fmt

    def compression_for(self, codec_id: int, magic: int):
        codec = self.compressions.get(codec_id)
        if codec is None:
            raise CompressionError(f"unknown compression type id {codec_id}")
        if magic not in codec.magics:
            raise CompressionError(f"{codec.name} compression is not valid in message format v{magic}")
        return codec

    def compression_named(self, name: str):
        for codec in self.compressions.values():
            if codec.name == name:
                return codec
        raise UsageError(f"unknown compression {name!r} (known: "
                         f"{', '.join(c.name for c in self.compressions.values())})")

    def codec_name(self, codec_id: int) -> str:
        codec = self.compressions.get(codec_id)
        return codec.name if codec else f"unknown({codec_id})"


def _register_into(mapping_or_list, key=None, what=""):
    def register(item, *args):
        if key is None:
            mapping_or_list.append(item)
            return
        for k in key(item):
            mapping_or_list[k] = item
    return register


@functools.cache
def get() -> Registry:
    from kfmt.plugin.manager import load_plugins, pm

    load_plugins()
    reg = Registry()
    pm.hook.kfmt_register_formats(register=_register_into(reg.formats, key=lambda f: f.magics))
    pm.hook.kfmt_register_compressions(register=_register_into(reg.compressions, key=lambda c: (c.id,)))
    pm.hook.kfmt_register_storage(register=_register_into(reg.storage))
    pm.hook.kfmt_register_exporters(register=_register_into(reg.exporters, key=lambda e: (e.name,)))

    def register_command(name, add_arguments, run, help=""):
        reg.commands[name] = Command(name, add_arguments, run, help)
    pm.hook.kfmt_register_commands(register=register_command)
    return reg


def reset() -> None:
    get.cache_clear()
