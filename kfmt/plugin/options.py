"""The settings a plugin brings with it, declared once by the plugin and used everywhere from there.

A plugin declares each setting it takes as an `Option`; kfmt builds the command line's flags, checks
what the Python API's keyword arguments give, fills in defaults, and hands the plugin the result: an
exporter receives its settings in `open` / `open_table` (kfmt.rows.exporters), a codec its level in
`compress` (kfmt.format.codecs, whose `level` is an Option). So a third-party plugin is selectable with
its own settings without a line of kfmt changing (docs/plugins.md), as llm's and fsspec's plugins bring
their own options.

Names follow from the plugin's name and the option's: option `table` of the exporter `iceberg` is the
flag `--iceberg-table` and the keyword `iceberg_table` of `kfmt.export`. `flag` spells the flag's tail
when it differs from the name (a repeatable `--iceberg-property KEY=VALUE` fills the dict `properties`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

from kfmt.errors import UsageError

_TYPES = {str: "text", int: "an integer", float: "a number", bool: "true or false"}


@dataclass(frozen=True)
class Option:
    """One setting of a plugin."""

    name: str  # the key the plugin receives; a Python identifier
    help: str = ""
    type: type = str  # str, int, float, or bool (a switch: a flag without a value)
    default: object = None  # what the plugin receives when the setting is not given
    choices: tuple = ()  # the values allowed, when they are few
    low: int | float | None = None  # the range allowed (int and float), both ends included
    high: int | float | None = None
    pairs: bool = False  # KEY=VALUE pairs, repeatable on the command line; received as a dict
    flag: str | None = None  # the flag's tail, when it is not the name with '-' for '_'
    metavar: str | None = None
    # the plugin's own check of a value that passed the above: what is wrong with it, or None
    validate: Callable[[object], str | None] | None = None

    def __post_init__(self):
        if not self.name.isidentifier():
            raise ValueError(f"option name {self.name!r} is not a Python identifier")
        if self.type not in _TYPES:
            raise ValueError(f"option {self.name!r}: type must be one of str, int, float, bool")

    def flag_of(self, owner: str) -> str:
        return f"--{owner}-{self.flag or self.name.replace('_', '-')}"

    def keyword_of(self, owner: str) -> str:
        return f"{owner.replace('-', '_')}_{self.name}"

    def describe(self) -> str:
        """The values allowed and the default, as `kfmt plugins` and the flags' help show them ("" for
        text without either)."""
        allowed = ("" if self.pairs else "/".join(map(str, self.choices)) if self.choices
                   else f"{self.low}..{self.high}" if self.low is not None and self.high is not None
                   else "" if self.type is str else _TYPES[self.type])
        if self.default is None:
            return allowed
        return f"{allowed}, default {self.default}" if allowed else f"default {self.default}"

    def check(self, value, owner: str, where: str | None = None):
        """`value` as the plugin receives it; a UsageError naming the flag and the keyword (or
        `where`, for a kind of plugin whose options are not flags of their own) if it is not
        allowed. Text (what the command line gives) is converted to the option's type."""
        if self.pairs:
            return key_value_pairs(value, where or self.flag_of(owner))
        where = where or f"{self.flag_of(owner)} ({self.keyword_of(owner)})"
        if isinstance(value, str) and self.type is not str:
            value = _parsed(value, self.type, where)
        if self.type is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, self.type) or (self.type is int and isinstance(value, bool)):
            raise UsageError(f"{where}: {value!r} is not {_TYPES[self.type]}")
        if self.choices and value not in self.choices:
            raise UsageError(f"{where} {value!r}: one of {', '.join(map(str, self.choices))}")
        if (self.low is not None and value < self.low) or (self.high is not None and value > self.high):
            raise UsageError(f"{where} {value} is outside {owner}'s range {self.low}..{self.high}")
        problem = self.validate(value) if self.validate is not None else None
        if problem:
            raise UsageError(f"{where} {value!r}: {problem}")
        return value


def declared(plugin) -> tuple[Option, ...]:
    """The options a plugin object declares in its `options` attribute (none: ())."""
    return tuple(getattr(plugin, "options", ()))


def _parsed(text: str, kind: type, where: str):
    if kind is bool:
        if text.lower() in ("true", "yes", "1", "false", "no", "0"):
            return text.lower() in ("true", "yes", "1")
    else:
        try:
            return kind(text)
        except ValueError:
            pass
    raise UsageError(f"{where}: {text!r} is not {_TYPES[kind]}")


def key_value_pairs(value, flag: str) -> dict:
    """Repeated KEY=VALUE arguments (or a dict already) as a dict of text; a UsageError naming the
    flag for one without `=`."""
    if isinstance(value, dict):
        return {str(k): str(v) for k, v in value.items()}
    out = {}
    for pair in [value] if isinstance(value, str) else value or ():
        key, sep, text = str(pair).partition("=")
        if not sep or not key:
            raise UsageError(f"{flag} {pair!r}: give it as KEY=VALUE")
        out[key] = text
    return out


def settings(owner: str, options: Iterable[Option], given: dict,
             where: Callable[[Option], str] | None = None) -> dict:
    """What the plugin `owner` receives: every option's value from `given` (option name -> value;
    None: not given), checked, and its default where it is not given. A name the plugin does not
    declare is a UsageError listing those it does. `where` names an option in messages, for the
    kinds of plugins whose options are not flags of their own (Option.check)."""
    declared = {o.name: o for o in options}
    unknown = sorted(set(given) - set(declared))
    if unknown:
        known = ", ".join(sorted(declared)) or "none"
        raise UsageError(f"{owner} has no setting {', '.join(map(repr, unknown))} (its settings: {known})")
    out = {}
    for name, option in declared.items():
        value = given.get(name)
        if value is not None:
            out[name] = option.check(value, owner, where(option) if where else None)
        else:  # pairs not given: no pair (a dict of its own, which the plugin may change)
            out[name] = dict(option.default or {}) if option.pairs else option.default
    return out


def from_keywords(owner: str, options: Iterable[Option], keywords: dict, others: dict) -> dict:
    """The settings of `owner` from a Python function's keyword arguments named `<owner>_<option>`.
    `others` (plugin name -> its options) are the plugins of the same kind that were not chosen: a
    keyword of theirs given a value is a UsageError (it would be ignored); any other keyword is a
    TypeError, as Python gives for an unknown parameter."""
    options = tuple(options)
    mine = {o.keyword_of(owner): o.name for o in options}
    theirs = {o.keyword_of(name): name for name, opts in others.items() for o in opts}
    given = {}
    for keyword, value in keywords.items():
        if keyword in mine:
            given[mine[keyword]] = value
        elif keyword in theirs:
            if value is not None:
                raise UsageError(f"{keyword} is a setting of {theirs[keyword]!r}, not of {owner!r}")
        else:
            raise TypeError(f"unexpected keyword argument {keyword!r}")
    return settings(owner, options, given)


def add_flags(parser, owner: str, options: Iterable[Option], title: str) -> None:
    """The options of `owner` as flags of an argparse parser, in a group of their own; each flag's
    value is left as given (text, or a list for pairs) for `from_flags` to check."""
    options = tuple(options)
    if not options:
        return
    group = parser.add_argument_group(title)
    for option in options:
        flag, dest = option.flag_of(owner), f"_option_{option.keyword_of(owner)}"
        described = option.describe()
        shown = f"{option.help} ({described})" if option.help and described else option.help or described
        if option.type is bool and not option.pairs:
            group.add_argument(flag, dest=dest, action="store_const", const="true", help=shown)
        else:
            group.add_argument(flag, dest=dest, action="append" if option.pairs else "store",
                               metavar=option.metavar or ("KEY=VALUE" if option.pairs else "VALUE"), help=shown)


def from_flags(args, owner: str, options: Iterable[Option]) -> dict:
    """The keyword arguments (`<owner>_<option>` -> value) of the flags `add_flags` made that were
    given: what the command passes on to the kfmt.* function."""
    out = {}
    for option in options:
        value = getattr(args, f"_option_{option.keyword_of(owner)}", None)
        if value is not None:
            out[option.keyword_of(owner)] = value
    return out
