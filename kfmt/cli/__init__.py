"""The `kfmt` command. One module per subcommand in this package (NAME, HELP, add_arguments, run);
plugins add more through the kfmt_register_commands hook. Exit codes (CLI.md): 0 success, 1 runtime
failure, 2 usage error, 65 bad data. Errors are one line on stderr, never a traceback (KFMT_DEBUG=1
shows one for failures that are not the input's fault)."""
from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys
import traceback
import warnings

# kfmt does no linear algebra, but numpy's OpenBLAS starts a thread per core when numpy is imported,
# which spins for a while (30 ms of CPU, measured): on two cores, time taken from kfmt's own work.
# Set before any command imports numpy; the pool's workers inherit it.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from kfmt import __version__
from kfmt.errors import EXIT_DATA, EXIT_FAILURE, EXIT_USAGE, DataError, KfmtError, KfmtWarning, UsageError
from kfmt.memory import keep_freed_memory
from kfmt.plugin import registry
from kfmt.storage.retries import retry_log


def _builtin_commands(only: str | None = None):
    """The built-in commands (one module each, named as the command); with `only`, just that one,
    if there is such a module: each imports what it runs, so a command loads only its own code."""
    import kfmt.cli as package

    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
        if info.name.startswith("_") or (only is not None and info.name != only):
            continue
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        yield registry.Command(module.NAME, module.add_arguments, module.run, module.HELP)


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse's own usage errors: one line, exit 2
        self.print_usage(sys.stderr)
        print(f"kfmt: error: {message}", file=sys.stderr)
        sys.exit(EXIT_USAGE)


def _command_named(argv: list[str] | None) -> str | None:
    """The command an argument list names (its first word: kfmt's own options are --help and
    --version, which take no value); None when there is none."""
    argv = sys.argv[1:] if argv is None else argv
    return argv[0] if argv and not argv[0].startswith("-") else None


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser for `argv`: when it names a built-in command, only that command's module is
    imported (a typo or a plugin's command gets every command, for argparse to list or run)."""
    parser = _Parser(prog="kfmt", description="Read, verify, convert and write Kafka partition "
                                              "directories without a broker.")
    parser.add_argument("--version", action="version", version=f"kfmt {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    named = _command_named(argv)
    commands = {c.name: c for c in _builtin_commands(named)} if named else {}
    if named not in commands:
        commands = {c.name: c for c in _builtin_commands()}
    commands.update(registry.commands())
    for name in sorted(commands):
        command = commands[name]
        p = sub.add_parser(name, help=command.help, description=command.help)
        command.add_arguments(p)
        p.set_defaults(_run=command.run)
    return parser


def one_line(text: str) -> str:
    """A message as one line: control characters (a newline in a directory name...) escaped."""
    return "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in str(text))


def os_error_line(err: OSError) -> str:
    """`/path: no such file or directory` rather than `[Errno 2] No such file or directory: '/path'`."""
    if not err.strerror:
        return str(err) or type(err).__name__
    reason = err.strerror[:1].lower() + err.strerror[1:]
    where = ": ".join(str(f) for f in (err.filename, err.filename2) if f is not None)
    return f"{where}: {reason}" if where else reason


def main(argv: list[str] | None = None) -> int:
    shown: set[str] = set()

    def show(message, category, *_args, **_kwargs):
        line = f"kfmt: warning: {one_line(message)}"
        if issubclass(category, KfmtWarning) and line not in shown:  # once per run
            shown.add(line)
            print(line, file=sys.stderr)

    retry_log.take()  # a report lists this run's retries, not those of an earlier run in this process
    said_before, retry_log.say = retry_log.say, lambda line: show(line, KfmtWarning)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always", KfmtWarning)
            warnings.showwarning = show
            return _main(argv)
    finally:
        retry_log.say = said_before


def _main(argv: list[str] | None) -> int:
    try:
        args = build_parser(argv).parse_args(argv)
        keep_freed_memory()  # after parsing: --help needs none of it
        return args._run(args) or 0
    except DataError as err:
        print(f"kfmt: error: {one_line(err)}", file=sys.stderr)
        return EXIT_DATA
    except UsageError as err:
        print(f"kfmt: error: {one_line(err)}", file=sys.stderr)
        return EXIT_USAGE
    except KfmtError as err:
        print(f"kfmt: error: {one_line(err)}", file=sys.stderr)
        return err.exit_code
    except BrokenPipeError:
        # The reader went away (kfmt cat | head): not an error of ours.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:  # the worker pool stops its workers first (kfmt.pipelines.pool)
        print("kfmt: interrupted", file=sys.stderr)
        return 130
    except OSError as err:  # what storage_failure leaves to callers and no caller handled
        print(f"kfmt: error: {one_line(os_error_line(err))}", file=sys.stderr)
        return EXIT_FAILURE
    except Exception as err:  # a bug: say so in one line; KFMT_DEBUG=1 shows where
        if os.environ.get("KFMT_DEBUG"):
            traceback.print_exc()
        print(f"kfmt: internal error: {type(err).__name__}: {one_line(err)} (set KFMT_DEBUG=1 for a traceback)",
              file=sys.stderr)
        return EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
