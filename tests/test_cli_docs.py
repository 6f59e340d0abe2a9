"""docs/cli.md keeps in step with the command line: every command `kfmt --help` lists and every long
flag each `kfmt COMMAND --help` defines is documented in that command's own section of the page."""
from __future__ import annotations

import re

import pytest
from support.cli import run_kfmt
from support.corpus import REPO

DOC = REPO / "docs" / "cli.md"
SECTION = re.compile(r"^#{2,4} `kfmt ([a-z][a-z0-9-]*)`\s*$", re.M)
COMMAND_LINE = re.compile(r"^    ([a-z][a-z0-9-]*)(?:\s{2,}|$)")  # argparse's list of subcommands
FLAG_LINE = re.compile(r"^  (?:-[A-Za-z], )?(--[a-z0-9][a-z0-9-]*)")  # an option's first help line


def help_commands() -> list[str]:
    result = run_kfmt("--help")
    assert result.code == 0, result.err
    listing = result.out.split("positional arguments:", 1)[1].split("options:", 1)[0]
    return [m[1] for line in listing.splitlines() if (m := COMMAND_LINE.match(line))]


def help_flags(command: str) -> list[str]:
    result = run_kfmt(command, "--help")
    assert result.code == 0, result.err
    flags = [m[1] for line in result.out.splitlines() if (m := FLAG_LINE.match(line))]
    return [f for f in flags if f != "--help"]


def doc_sections() -> dict[str, str]:
    """Command -> the text of its section (up to the next heading of any command)."""
    text = DOC.read_text()
    marks = list(SECTION.finditer(text))
    return {m[1]: text[m.end():(marks[i + 1].start() if i + 1 < len(marks) else len(text))]
            for i, m in enumerate(marks)}


COMMANDS = help_commands()


def test_the_help_parser_finds_the_commands_and_their_flags():
    """The parsing below must see what is there (or the other tests would pass on nothing)."""
    from kfmt.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert COMMANDS == sorted(sub.choices)
    assert {"cat", "verify", "upgrade", "export"} <= set(COMMANDS)
    parser = sub.choices["upgrade"]
    defined = sorted(s for a in parser._actions for s in a.option_strings if s.startswith("--") and s != "--help")
    assert sorted(help_flags("upgrade")) == defined


def test_every_command_has_a_section():
    missing = sorted(set(COMMANDS) - set(doc_sections()))
    assert not missing, f"docs/cli.md has no section for: {', '.join(missing)}"


@pytest.mark.parametrize("command", COMMANDS)
def test_every_flag_is_documented_in_its_commands_section(command):
    section = doc_sections().get(command)
    if section is None:
        pytest.fail(f"docs/cli.md has no section `kfmt {command}`")
    undocumented = [f for f in help_flags(command) if not re.search(re.escape(f) + r"(?![a-z0-9-])", section)]
    assert not undocumented, f"kfmt {command}: {', '.join(undocumented)} not in its docs/cli.md section"


def test_the_table_of_commands_lists_every_command():
    table = DOC.read_text().split("## Conventions", 1)[0]
    assert not [c for c in COMMANDS if f"`kfmt {c}`" not in table]
