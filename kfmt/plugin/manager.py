"""The plugin manager. Plugins come from the `kfmt` entry-point group; kfmt's own formats, codecs and
storage backends are registered there too, so they load exactly like third-party plugins.

KFMT_LOAD_PLUGINS=name,name limits loading to the named third-party entry points (kfmt's built-ins
always load: nothing can be read without them); KFMT_LOAD_PLUGINS= (empty) loads only the built-ins.
Tests and embedders add plugins at run time with register()/unregister().

Loading is in two steps, because the command line needs only the commands plugins register
(kfmt_register_commands) to build its parser, and `kfmt --help` should not import what kfmt's
built-in plugins are made of (pyarrow, numpy, fsspec, the codecs' libraries): those register
formats, codecs, storage and exporters, never commands (kfmt's commands are the modules of
kfmt.cli). `load_plugins(builtin=False)` loads the third-party plugins only; `load_plugins()`
loads the built-ins too. Whatever the order they were loaded in, hooks are asked in the order of
`hookimpls`: the built-ins first, then the others as they came.
"""
from __future__ import annotations

import os
import threading

import pluggy

from kfmt.errors import KfmtError
from kfmt.plugin import hookspecs

ENTRY_POINT_GROUP = "kfmt"
ALLOW_LIST_ENV = "KFMT_LOAD_PLUGINS"
BUILTIN_DISTRIBUTION = "kfmt"

pm = pluggy.PluginManager("kfmt")
pm.add_hookspecs(hookspecs)
_distributions: dict = {}  # plugin name -> the importlib.metadata Distribution it came from
_builtin_names: set[str] = set()
_loaded: set[bool] = set()  # which of the two kinds (builtin: True/False) are loaded
_loading = threading.RLock()  # tasks on the threads engine may ask for the registry at once
# Bumped by every load and by register()/unregister(): kfmt.plugin.registry rebuilds its lookups
# when it changes, so this module needs nothing from the registry (the registry depends on the
# manager, not both ways).
generation = 0


def _entry_points() -> list[tuple[object, bool]]:
    """The `kfmt` entry points, each with whether it is one of kfmt's built-ins. Read from the
    distributions' entry_points.txt only: only a distribution that has kfmt entry points has its
    METADATA parsed (for its name), where parsing every installed distribution's (the venv holds
    about 75) cost more than the rest of `kfmt --help`."""
    import importlib.metadata  # about 15 ms: only when plugins are loaded

    names: dict[int, str] = {}

    def distribution_name(dist) -> str:
        if id(dist) not in names:
            names[id(dist)] = dist.metadata["Name"]
        return names[id(dist)]

    return [(ep, distribution_name(ep.dist) == BUILTIN_DISTRIBUTION)
            for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)]


def load_plugins(*, builtin: bool = True) -> None:
    """Load every allowed entry-point plugin once; with builtin=False only the third-party ones
    (what the command line's parser needs: module docstring)."""
    kinds = {False, True} if builtin else {False}
    if kinds <= _loaded:
        return
    with _loading:
        if not kinds <= _loaded:
            _load(kinds)


def load_declaring(kind: str) -> None:
    """The third-party plugins and those of kfmt's built-ins that provide things of one kind
    (their entry points are named `<kind>-...` in pyproject.toml: "exporters"), not the others:
    what the command line's parser needs to build the flags of the options those declare
    (kfmt.plugin.options). Such built-in modules import what they are made of on first use, as
    docs/plugins.md asks of every plugin, so `kfmt export --help` stays light."""
    load_plugins(builtin=False)
    if True in _loaded:
        return
    with _loading:
        _load({True}, only=f"{kind}-")


def _load(kinds: set[bool], only: str = "") -> None:
    global generation
    allow = os.environ.get(ALLOW_LIST_ENV)
    allowed = None if allow is None else {n.strip() for n in allow.split(",") if n.strip()}
    found = _entry_points()
    for ep, is_builtin in sorted(found, key=lambda e: not e[1]):  # built-ins first, else as found
        if is_builtin not in kinds or is_builtin in _loaded or not ep.name.startswith(only):
            continue
        if not is_builtin and allowed is not None and ep.name not in allowed:
            continue
        if pm.get_plugin(ep.name) is not None or pm.is_blocked(ep.name):
            continue
        try:
            pm.register(ep.load(), name=ep.name)
        except KfmtError:
            raise  # already says what is wrong in one line (a bad KFMT_MAX_DECOMPRESSED_BYTES: exit 2)
        except Exception as e:
            # Fail loudly: running without a codec or format the user installed would turn
            # readable data into misleading data errors.
            raise KfmtError(
                f"the kfmt plugin {ep.name!r} ({ep.dist.metadata['Name']} {ep.dist.version}) failed to "
                f"load: {type(e).__name__}: {e} (set {ALLOW_LIST_ENV} to the plugins to load to "
                f"leave it out)") from e
        _distributions[ep.name] = ep.dist
        if is_builtin:
            _builtin_names.add(ep.name)
    if True in kinds and not any(is_builtin for _, is_builtin in found):
        raise KfmtError("kfmt's built-in plugins are not registered: install kfmt (pip install -e .) "
                        "rather than running it from a source tree")
    if not only:
        _loaded.update(kinds)
    generation += 1


def hookimpls(hook) -> list:
    """A hook's implementations in the order plugins count (kfmt.plugin.registry: a later plugin
    may take a key over from an earlier one): kfmt's built-ins first, then the others in the order
    they were loaded or registered."""
    return sorted(hook.get_hookimpls(), key=lambda impl: impl.plugin_name not in _builtin_names)


def register(plugin, name: str) -> None:
    """Add a plugin at run time (tests, embedding applications)."""
    global generation
    load_plugins()
    pm.register(plugin, name=name)
    generation += 1


def unregister(name: str) -> None:
    global generation
    pm.unregister(name=name)
    generation += 1


def describe_plugins() -> list[dict]:
    """Loaded plugins with their distribution and hooks (for `kfmt plugins`)."""
    load_plugins()
    out = []
    for name, plugin in sorted(pm.list_name_plugin()):
        dist = _distributions.get(name)
        out.append({
            "name": name,
            "module": getattr(plugin, "__name__", type(plugin).__name__),
            "distribution": dist.metadata["Name"] if dist else None,
            "version": dist.version if dist else None,
            "hooks": sorted(h.name for h in pm.get_hookcallers(plugin) or []),
        })
    return out
