"""What the loaded plugins provide, looked up by key: formats by magic, codecs by id or name,
storage backends by URL, exporters, value formats and CLI commands by name. Built lazily from the plugin manager,
and again whenever a plugin is registered or unregistered at run time.

Two plugins may not provide the same key (a codec id, a magic, an exporter or command name, a
storage backend name): the second is refused with an error naming both, unless it asks to take the
key over with `register(thing, replace=True)` -- fsspec's `register_implementation(clobber=...)` habit.
Silently replacing a codec would turn readable data into wrong data."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from kfmt.errors import CompressionError, DataError, KfmtError, UsageError
from kfmt.plugin import manager


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
    value_formats: dict = field(default_factory=dict)  # name -> ValueFormat
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


class _Keyed:
    """The register callback of one hook: puts each thing under its keys, refusing a clash."""

    def __init__(self, kind: str, table: dict, keys: Callable, describe: Callable = str):
        self.kind, self.table, self.keys, self.describe = kind, table, keys, describe
        self.owners: dict = {}  # key -> name of the plugin that provided it

    def callback(self, plugin_name: str) -> Callable:
        def register(item, *args, replace: bool = False, **kwargs):
            for key in self.keys(item, *args, **kwargs):
                owner = self.owners.get(key)
                if owner is not None and owner != plugin_name and not replace:
                    raise KfmtError(
                        f"the kfmt plugin {plugin_name!r} registers {self.kind} {self.describe(key)}, "
                        f"which the plugin {owner!r} already provides (a plugin that means to replace "
                        f"it registers with replace=True)")
                self.table[key] = self._value(item, *args, **kwargs)
                self.owners[key] = plugin_name
        return register

    def _value(self, item, *args, **kwargs):
        return item


class _Commands(_Keyed):
    def _value(self, name, add_arguments, run, help=""):
        return Command(name, add_arguments, run, help)


def _call_each(hook, keyed: _Keyed) -> None:
    # One call per implementation, in the order the plugins count (built-ins first, manager.hookimpls),
    # so a later plugin can take a key over with replace=True and a clash can name both plugins.
    for impl in manager.hookimpls(hook):
        impl.function(register=keyed.callback(impl.plugin_name))


def _commands() -> dict:
    table: dict = {}
    _call_each(manager.pm.hook.kfmt_register_commands,
               _Commands("command", table, lambda name, *a, **k: (name,), repr))
    return table


_cached: tuple[int, Registry] | None = None


def get() -> Registry:
    global _cached
    manager.load_plugins()
    if _cached is not None and _cached[0] == manager.generation:
        return _cached[1]
    hook = manager.pm.hook
    reg = Registry()
    _call_each(hook.kfmt_register_formats, _Keyed("message format magic", reg.formats, lambda f: f.magics))
    _call_each(hook.kfmt_register_compressions,
               _Keyed("compression id", reg.compressions, lambda c: (c.id,)))
    backends: dict = {}
    _call_each(hook.kfmt_register_storage, _Keyed("storage backend", backends, lambda b: (b.name,), repr))
    reg.storage = list(reversed(backends.values()))  # the latest plugin is asked first
    _call_each(hook.kfmt_register_exporters, _Keyed("exporter", reg.exporters, lambda e: (e.name,), repr))
    _call_each(hook.kfmt_register_value_formats,
               _Keyed("value format", reg.value_formats, lambda f: (f.name,), repr))
    reg.commands = _commands()
    _cached = (manager.generation, reg)
    return reg


def exporters_declared() -> dict:
    """The exporters (name -> Exporter) of the third-party plugins and of kfmt's own, without loading
    kfmt's other built-in plugins (kfmt.plugin.manager.load_declaring): what the command line's
    parser needs for the flags of their options."""
    manager.load_declaring("exporters")
    table: dict = {}
    _call_each(manager.pm.hook.kfmt_register_exporters, _Keyed("exporter", table, lambda e: (e.name,), repr))
    return table


def commands() -> dict:
    """The CLI commands plugins register (name -> Command), without loading kfmt's built-in
    plugins, which register none (kfmt.plugin.manager): what the command line's parser needs, so
    `kfmt --help` imports no pyarrow."""
    manager.load_plugins(builtin=False)
    return _commands()
