"""kfmt plugins: what is loaded and what each plugin registers."""
from __future__ import annotations

import sys

from kfmt.cli._common import add_format_argument, dumps
from kfmt.plugin.manager import describe_plugins, pm
from kfmt.plugin.options import declared

NAME = "plugins"
HELP = "list the loaded plugins and what each registers"

def _codec(c) -> str:
    levels = "" if c.levels is None else f", levels {c.levels.describe()}"  # named ones (isal-1) too
    return f"{c.name} (id {c.id}{levels})"


def _exporter(e) -> str:
    flags = ", ".join(o.flag_of(e.name) for o in declared(e))
    return f"{e.name} ({flags})" if flags else e.name


def _value_format(f) -> str:
    options = ", ".join(o.name + (f" [{o.describe()}]" if o.describe() else "") for o in declared(f))
    return f"{f.name} (options {options})" if options else f.name


_REGISTER_HOOKS = {
    "kfmt_register_formats": ("formats", lambda f: f"{f.name} (magic {', '.join(map(str, f.magics))})"),
    "kfmt_register_compressions": ("compressions", _codec),
    "kfmt_register_storage": ("storage", lambda s: s.name),
    "kfmt_register_exporters": ("exporters", _exporter),
    "kfmt_register_value_formats": ("value formats", _value_format),
    "kfmt_register_commands": ("commands", lambda name, *rest: name),
}


def add_arguments(p):
    add_format_argument(p)


def provided_by(plugin) -> dict[str, list[str]]:
    """Call the plugin's own register hooks with a collecting callback."""
    out = {}
    for hook, (kind, describe) in _REGISTER_HOOKS.items():
        impl = getattr(plugin, hook, None)
        if impl is None:
            continue
        items = []
        impl(register=lambda *a, **k: items.append(describe(*a)))
        out[kind] = items
    return out


def run(args) -> int:
    plugins = describe_plugins()
    for p in plugins:
        p["provides"] = provided_by(pm.get_plugin(p["name"]))
    if args.format == "json":
        print(dumps(plugins))
        return 0
    for p in plugins:
        dist = f"{p['distribution']} {p['version']}" if p["distribution"] else "(not from a distribution)"
        provides = "; ".join(f"{kind}: {', '.join(items)}" for kind, items in p["provides"].items())
        print(f"{p['name']:<22} {dist:<16} {provides}")
    sys.stdout.flush()
    return 0
