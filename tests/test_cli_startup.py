"""The command line starts quickly: building its parser (`kfmt --help`, `kfmt CMD --help`, and the
first thing every command does) imports none of the heavy libraries the commands run on, nor the
built-in plugins made of them. Checked in a fresh interpreter, as a user runs kfmt."""
from __future__ import annotations

import subprocess
import sys

HEAVY = ("pyarrow", "numpy", "fsspec", "pandas", "pyspark", "tqdm", "lz4", "zstandard", "cramjam", "isal")

PARSER_IMPORTS = f'''
import sys
from kfmt.cli import build_parser
parser = build_parser([])  # every command's arguments
for action in parser._actions:
    for name, sub in getattr(action, "choices", None).items() if action.dest == "command" else ():
        sub.format_help()
print(len(parser._actions[-1].choices), sorted(m for m in {HEAVY!r} if m in sys.modules))
'''


def python(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout


def test_the_parser_of_every_command_imports_nothing_heavy():
    count, heavy = python(PARSER_IMPORTS).split(" ", 1)
    assert int(count) >= 15  # the built-in commands were all there
    assert heavy.strip() == "[]"


def test_kfmt_help_imports_nothing_heavy():
    code = ("import sys\nfrom kfmt.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            f"print(sorted(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "usage: kfmt" in result.stdout and result.stderr.strip() == "[]"
