"""The plugin manager. Plugins come from the `kfmt` entry-point group; kfmt's own formats, codecs and
storage backends are registered there too, so they load exactly like third-party plugins.

KFMT_LOAD_PLUGINS=name,name limits loading to the named third-party entry points (kfmt's built-ins
always load: nothing can be read without them); KFMT_LOAD_PLUGINS= (empty) loads only the built-ins.
Tests and embedders add plugins at run time with register()/unregister().
"""
from __future__ import annotations

import importlib.metadata
import os

import pluggy

from kfmt.errors import KfmtError
from kfmt.plugin import hookspecs

ENTRY_POINT_GROUP = "kfmt"
ALLOW_LIST_ENV = "KFMT_LOAD_PLUGINS"
BUILTIN_DISTRIBUTION = "kfmt"

pm = pluggy.PluginManager("kfmt")
pm.add_hookspecs(hookspecs)
_distributions: dict[str, importlib.metadata.Distribution] = {}
_loaded = False
# Bumped by register()/unregister(): kfmt.plugin.registry rebuilds its lookups when it changes, so
# this module needs nothing from the registry (the registry depends on the manager, not both ways).
generation = 0


def load_plugins() -> None:
    """Load every allowed entry-point plugin once."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    allow = os.environ.get(ALLOW_LIST_ENV)
    allowed = None if allow is None else {n.strip() for n in allow.split(",") if n.strip()}
    for dist in importlib.metadata.distributions():
        builtin = dist.metadata["Name"] == BUILTIN_DISTRIBUTION
        for ep in dist.entry_points:
            if ep.group != ENTRY_POINT_GROUP:
                continue
            if not builtin and allowed is not None and ep.name not in allowed:
                continue
            if pm.get_plugin(ep.name) is not None or pm.is_blocked(ep.name):
                continue
            try:
                pm.register(ep.load(), name=ep.name)
            except Exception as e:
                # Fail loudly: running without a codec or format the user installed would turn
                # readable data into misleading data errors.
                raise KfmtError(
                    f"the kfmt plugin {ep.name!r} ({dist.metadata['Name']} {dist.version}) failed to "
                    f"load: {type(e).__name__}: {e} (set {ALLOW_LIST_ENV} to the plugins to load to "
                    f"leave it out)") from e
            _distributions[ep.name] = dist
    if not any(d.metadata["Name"] == BUILTIN_DISTRIBUTION for d in _distributions.values()):
        raise KfmtError("kfmt's built-in plugins are not registered: install kfmt (pip install -e .) "
                        "rather than running it from a source tree")


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
