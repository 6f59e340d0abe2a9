"""The command line starts quickly: building its parser (`kfmt --help`, `kfmt CMD --help`, and the
first thing every command does) imports none of the heavy libraries the commands run on, nor the
built-in plugins made of them. Checked in a fresh interpreter, as a user runs kfmt."""
from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

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


# Commands over batches read record columns as numpy without pyarrow's to_numpy or pa.array, which
# import pandas (0.3 CPU s of every run, as much as a 100 MB copy: kfmt.format.model.int64_values)
BATCH_COMMANDS = [("upgrade", "OUT"), ("recompress", "OUT", "--compression", "zstd"),
                  ("compact", "OUT", "--now", "1795340000000"), ("reindex", "OUT"),
                  ("resegment", "OUT", "--segment-bytes", "1048576"), ("retain", "OUT", "--retention-ms", "1000"),
                  ("info",), ("verify",), ("salvage", "OUT")]


# the compiled paths' start-up cost: the pure-Python references (KFMT_PURE_PYTHON=1) define results,
# not speed, and build their columns with pa.array and pyarrow.compute
@pytest.mark.needs("speedups")
@pytest.mark.parametrize("command", BATCH_COMMANDS, ids=lambda c: c[0])
def test_commands_over_compressed_batches_do_not_import_pandas(command, tmp_path):
    from tests.support.corpus import REALKAFKA

    src = tmp_path / "src"
    for name in ("v1-gzip-0", "v0-snappy-0", "v2-lz4-0", "compact-v2-none-0"):
        shutil.copytree(REALKAFKA / name, src / name)
    argv = [command[0], str(src), *(str(tmp_path / a) if a == "OUT" else a for a in command[1:])]
    code = ("import sys\nfrom kfmt.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit as e:\n"
            "    assert not e.code, e.code\nprint('pandas' in sys.modules, file=sys.stderr)")
    result = subprocess.run([sys.executable, "-c", code, *argv, "--no-progress"] if command[0] not in ("info", "verify")
                            else [sys.executable, "-c", code, *argv], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip().splitlines()[-1] == "False"


@pytest.mark.needs("speedups")
@pytest.mark.parametrize("command", [("upgrade", "OUT"), ("recompress", "OUT", "--compression", "gzip")],
                         ids=lambda c: c[0])
def test_the_legacy_upgrade_imports_no_module_it_does_not_use(command, tmp_path):
    """pyarrow.compute and numpy.ma cost 20-30 ms each of a command's start (np.unique imports numpy.ma;
    a plugin loaded with every command imported pyarrow.compute): neither is used to convert legacy
    entries, uncompressed or wrapped."""
    from tests.support.corpus import REALKAFKA

    src = tmp_path / "src"
    for name in ("v1-gzip-0", "v0-snappy-0", "v0-none-0", "v1-logappendtime-gzip-0"):
        shutil.copytree(REALKAFKA / name, src / name)
    argv = [command[0], str(src), *(str(tmp_path / a) if a == "OUT" else a for a in command[1:]), "--no-progress"]
    code = ("import sys\nfrom kfmt.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit as e:\n"
            "    assert not e.code, e.code\n"
            "print(sorted(m for m in ('pyarrow.compute', 'numpy.ma') if m in sys.modules), file=sys.stderr)")
    result = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip().splitlines()[-1] == "[]"


@pytest.mark.needs("speedups")
def test_the_upgrade_of_uncompressed_legacy_messages_does_not_import_pyarrow(tmp_path):
    """pyarrow is about 0.03 CPU s and 0.05 s of a command's start: the record columns are Arrow,
    but the upgrade of uncompressed v0/v1 messages (the kernels convert runs of them) and the copy
    of uncompressed v2 batches hold none, so pyarrow is imported where record columns are first
    made (kfmt.format.kernels, kfmt.format.model), not with the modules and plugins. numpy stays:
    the frame scan's rows are numpy arrays. A partition of gzip wrappers does import it (its
    records are decoded into Arrow columns and encoded again)."""
    from tests.support.corpus import REALKAFKA

    src = tmp_path / "src"
    for name in ("v0-none-0", "v1-none-0", "v2-none-0", "compact-v2-none-0"):
        shutil.copytree(REALKAFKA / name, src / name)
    code = ("import sys\nfrom kfmt.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit as e:\n"
            "    assert not e.code, e.code\n"
            "print(sorted(m for m in ('pyarrow', 'pandas') if m in sys.modules), file=sys.stderr)")
    for name, imported in (("v1", "[]"), ("gzip", "['pyarrow']")):
        if name == "gzip":
            shutil.copytree(REALKAFKA / "v1-gzip-0", src / "v1-gzip-0")
        argv = ["upgrade", str(src), str(tmp_path / f"out-{name}"), "--no-progress"]
        result = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
        assert result.stderr.strip().splitlines()[-1] == imported
