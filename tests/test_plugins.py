"""The plugin mechanism, proved with a plugin from outside the package: a toy compression codec
(id 7, a reversible byte transform) shipped as its own distribution (a module plus a `.dist-info`
with an entry point in group `kfmt`) on PYTHONPATH, then kfmt run as a separate process. Also the
KFMT_LOAD_PLUGINS allow-list, and register()/unregister() at run time in this process.
"""
from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kfmt.errors import CompressionError
from kfmt.format.codecs import DEFAULT_MAX_DECOMPRESSED, Compression
from kfmt.format.model import BatchHeader, make_records
from kfmt.plugin import manager as plugins
from kfmt.plugin import registry
from kfmt.plugin.hookspecs import hookimpl

TOY_ID = 7
ENTRY_POINT = "toy-codec"

# The plugin: a codec whose "compression" reverses the bytes and XORs them with 0x5A. It uses only
# kfmt's public plugin API (Compression, hookimpl, the limit error).
TOY_MODULE = '''
"""A toy compression codec for kfmt: reversed bytes XOR 0x5A (reversible, obviously not compression)."""
from kfmt.format.codecs import DEFAULT_MAX_DECOMPRESSED, Compression, too_large
from kfmt.plugin.hookspecs import hookimpl


def _transform(data):
    return bytes(b ^ 0x5A for b in reversed(bytes(data)))


class ToyCodec(Compression):
    id = 7
    name = "toy"

    def compress(self, data, *, magic, level=None):
        return _transform(data)

    def decompress(self, data, *, magic, max_size=DEFAULT_MAX_DECOMPRESSED):
        if len(data) > max_size:
            raise too_large(self.name, max_size)
        return _transform(data)


@hookimpl
def kfmt_register_compressions(register):
    register(ToyCodec())
'''

# Writes a partition whose batches use the toy codec, through kfmt's own encoders, in a process
# where the plugin is loaded from its entry point: v2 batches and a v1 compressed wrapper.
WRITER = '''
import sys
from kfmt.plugin import registry
from kfmt.format.model import BatchHeader, TimestampType, make_records

reg = registry.get()
assert reg.compressions[7].name == "toy", sorted(reg.compressions)
v2, v1 = reg.format_for(2), reg.format_for(1)
entries = [
    v2.encode(BatchHeader(magic=2, base_offset=0, last_offset=2, compression=7, base_timestamp=1700000000000,
                          max_timestamp=1700000000002),
              make_records([0, 1, 2], [1700000000000, 1700000000002, 1700000000001], [b"k0", None, b""],
                           [b"value zero", b"value one", None], [[(b"h", b"x")], [], [(b"h", None)]])),
    v2.encode(BatchHeader(magic=2, base_offset=3, last_offset=3, compression=0, base_timestamp=1700000000003,
                          max_timestamp=1700000000003),
              make_records([3], [1700000000003], [b"plain"], [b"not toy"])),
    v2.encode(BatchHeader(magic=2, base_offset=4, last_offset=5, compression=7, base_timestamp=1700000000004,
                          max_timestamp=1700000000005, producer_id=9, producer_epoch=0, base_sequence=0),
              make_records([4, 5], [1700000000004, 1700000000005], [b"k4", b"k5"], [b"v4", b"v5"])),
]
with open(sys.argv[1], "wb") as f:
    f.write(b"".join(entries))
'''

EXPECTED = [
    (0, 1700000000000, "azA=", "dmFsdWUgemVybw==", [{"key": "h", "value": "eA=="}]),
    (1, 1700000000002, None, "dmFsdWUgb25l", []),
    (2, 1700000000001, "", None, [{"key": "h", "value": None}]),
    (3, 1700000000003, "cGxhaW4=", "bm90IHRveQ==", []),
    (4, 1700000000004, "azQ=", "djQ=", []),
    (5, 1700000000005, "azU=", "djU=", []),
]


def installed_distribution(site: Path, module: str, source: str, name: str, version: str,
                           entry_point: str) -> Path:
    """`site`, which put on PYTHONPATH holds `module` as an installed distribution whose `kfmt`
    entry point `entry_point` names it."""
    (site / f"{module}.py").write_text(source)
    dist_info = site / f"{module}-{version}.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (dist_info / "entry_points.txt").write_text(f"[kfmt]\n{entry_point} = {module}\n")
    (dist_info / "RECORD").write_text("")
    return site


@pytest.fixture(scope="module")
def toy_distribution(tmp_path_factory) -> Path:
    """A directory that, put on PYTHONPATH, holds the toy plugin as an installed distribution."""
    return installed_distribution(tmp_path_factory.mktemp("site"), "kfmt_toy_codec", TOY_MODULE,
                                  "kfmt-toy-codec", "0.3", ENTRY_POINT)


def run(site: Path, *args: str, allow: str | None = None, script: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("KFMT_LOAD_PLUGINS", "PYTHONPATH")}
    env["PYTHONPATH"] = str(site)
    if allow is not None:
        env["KFMT_LOAD_PLUGINS"] = allow
    command = [sys.executable, "-c", script, *args] if script else [sys.executable, "-m", "kfmt", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)


@pytest.fixture(scope="module")
def toy_partition(toy_distribution, tmp_path_factory) -> Path:
    part = tmp_path_factory.mktemp("parts") / "toy-0"
    part.mkdir()
    written = run(toy_distribution, str(part / "00000000000000000000.log"), script=WRITER)
    assert written.returncode == 0, written.stderr
    return part


def records_of(stdout: str) -> list[tuple]:
    return [(r["offset"], r["timestamp"], r["key"], r["value"], r["headers"])
            for r in map(json.loads, stdout.splitlines())]


def test_the_toy_codec_really_is_used_on_disk(toy_partition):
    data = (toy_partition / "00000000000000000000.log").read_bytes()
    assert int.from_bytes(data[21:23], "big") & 0x07 == TOY_ID  # first batch's codec bits
    assert b"value zero" not in data and b"value zero"[::-1] not in data
    assert b"not toy" in data  # the uncompressed batch in between


def test_cat_reads_batches_of_a_third_party_codec(toy_distribution, toy_partition):
    result = run(toy_distribution, "cat", str(toy_partition), "--format", "json")
    assert result.returncode == 0, result.stderr
    assert records_of(result.stdout) == EXPECTED


def test_plugins_command_lists_the_third_party_plugin(toy_distribution):
    result = run(toy_distribution, "plugins", "--format", "json")
    assert result.returncode == 0, result.stderr
    listed = {p["name"]: p for p in json.loads(result.stdout)}
    toy = listed[ENTRY_POINT]
    assert (toy["distribution"], toy["version"], toy["module"]) == ("kfmt-toy-codec", "0.3", "kfmt_toy_codec")
    assert toy["hooks"] == ["kfmt_register_compressions"]
    assert toy["provides"] == {"compressions": ["toy (id 7)"]}
    assert listed["compression-gzip"]["distribution"] == "kfmt"  # built-ins come the same way
    text = run(toy_distribution, "plugins")
    assert any(line.split()[0] == ENTRY_POINT and "toy (id 7)" in line for line in text.stdout.splitlines())


@pytest.mark.parametrize("allow", ["", "some-other-plugin", " , "])
def test_allow_list_excludes_plugins_it_does_not_name(toy_distribution, toy_partition, allow):
    listed = run(toy_distribution, "plugins", "--format", "json", allow=allow)
    names = {p["name"] for p in json.loads(listed.stdout)}
    assert ENTRY_POINT not in names and "compression-gzip" in names  # built-ins always load
    result = run(toy_distribution, "cat", str(toy_partition), allow=allow)
    assert result.returncode == 65
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert "compression type id 7" in result.stderr and "position 0" in result.stderr


@pytest.mark.parametrize("allow", [ENTRY_POINT, f"other, {ENTRY_POINT}"])
def test_allow_list_loads_plugins_it_names(toy_distribution, toy_partition, allow):
    result = run(toy_distribution, "cat", str(toy_partition), "--format", "json", allow=allow)
    assert result.returncode == 0, result.stderr
    assert records_of(result.stdout) == EXPECTED


def test_register_and_unregister_at_run_time():
    namespace: dict = {}
    exec(compile(TOY_MODULE, "kfmt_toy_codec_inline", "exec"), namespace)
    plugin = type(sys)("kfmt_toy_codec_inline")
    plugin.__dict__.update(namespace)
    v2 = registry.get().format_for(2)
    header = BatchHeader(magic=2, base_offset=10, last_offset=11, compression=TOY_ID, base_timestamp=5,
                         max_timestamp=6)
    records = make_records([10, 11], [5, 6], [b"a", None], [b"b", b"c"])
    assert TOY_ID not in registry.get().compressions
    plugins.register(plugin, name="toy-inline")
    try:
        assert registry.get().compressions[TOY_ID].name == "toy"
        entry = v2.encode(header, records)
        batch = v2.decode(memoryview(entry), v2.read_header(memoryview(entry), 0))
        assert batch.records.to_pylist() == records.to_pylist()
        assert "toy-inline" in {p["name"] for p in plugins.describe_plugins()}
    finally:
        plugins.unregister("toy-inline")
    assert TOY_ID not in registry.get().compressions
    assert "toy-inline" not in {p["name"] for p in plugins.describe_plugins()}
    with pytest.raises(CompressionError, match="compression type id 7"):
        v2.decode(memoryview(entry), v2.read_header(memoryview(entry), 0))


def test_a_plugin_can_be_registered_again_after_unregistering():
    plugin = type(sys)("kfmt_toy_again")
    exec(compile(TOY_MODULE, "kfmt_toy_again", "exec"), plugin.__dict__)
    for _ in range(2):
        plugins.register(plugin, name="toy-again")
        try:
            assert registry.get().compressions[TOY_ID].name == "toy"
        finally:
            plugins.unregister("toy-again")
        assert TOY_ID not in registry.get().compressions



class _Reversed(Compression):
    """A codec claiming gzip's id 1 (it only reverses bytes): a clash with the built-in gzip plugin."""
    id, name, magics = 1, "reversed", (0, 1, 2)

    def compress(self, data, *, magic, level=None):
        return bytes(data)[::-1]

    def decompress(self, data, *, magic, max_size=DEFAULT_MAX_DECOMPRESSED):
        return bytes(data)[::-1]


def _codec_plugin(name: str, replace: bool):
    plugin = type(sys)(name)

    @hookimpl
    def kfmt_register_compressions(register):
        register(_Reversed(), replace=replace) if replace else register(_Reversed())
    plugin.kfmt_register_compressions = kfmt_register_compressions
    return plugin


def test_a_plugin_may_not_silently_take_over_a_codec_id():
    from kfmt.errors import KfmtError
    plugins.register(_codec_plugin("kfmt_clash", replace=False), name="clash")
    try:
        with pytest.raises(KfmtError) as failure:
            registry.get()
        message = str(failure.value)
        assert "'clash'" in message and "compression id 1" in message and "compression-gzip" in message
        assert "replace=True" in message
    finally:
        plugins.unregister("clash")
    assert registry.get().compressions[1].name == "gzip"


def test_a_plugin_that_asks_to_replace_a_codec_takes_it_over():
    plugins.register(_codec_plugin("kfmt_takeover", replace=True), name="takeover")
    try:
        assert registry.get().compressions[1].name == "reversed"
    finally:
        plugins.unregister("takeover")
    assert registry.get().compressions[1].name == "gzip"


def test_a_plugin_that_fails_to_load_is_named_in_one_line(tmp_path):
    site = tmp_path / "broken-site"
    dist_info = site / "kfmt_broken-1.0.dist-info"
    dist_info.mkdir(parents=True)
    (site / "kfmt_broken.py").write_text("raise ImportError('needs libfoo')\n")
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: kfmt-broken\nVersion: 1.0\n")
    (dist_info / "entry_points.txt").write_text("[kfmt]\nbroken = kfmt_broken\n")
    result = run(site, "plugins")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert "'broken' (kfmt-broken 1.0)" in result.stderr and "needs libfoo" in result.stderr
    # the allow-list is the way around it
    assert run(site, "plugins", allow="").returncode == 0


# --- an export file format from outside the package ---

TOY_EXPORTER = '''
"""A toy export format for kfmt: one line per record, "offset<TAB>value as hex"."""
import pyarrow as pa
from kfmt.errors import KfmtError
from kfmt.rows.columns import rows_to_records  # noqa: F401  (what a real exporter might use)
from kfmt.plugin.hookspecs import hookimpl


class Writer:
    def __init__(self, stream, schema):
        self.stream, self.schema = stream, schema
        self.rows = []

    def write(self, rows):
        self.rows.append(rows)

    def close(self):
        # the whole rows go along as Arrow IPC after the readable lines, so read_back is exact
        table = pa.Table.from_batches(self.rows, self.schema)
        for offset, value in zip(table.column("offset").to_pylist(), table.column("value").to_pylist()):
            self.stream.write(f"{offset}\\t{(value or b'').hex()}\\n".encode())
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, self.schema) as ipc:
            ipc.write_table(table)
        self.stream.write(b"--\\n" + sink.getvalue().to_pybytes())


class Tsv:
    name = "toy-tsv"
    extension = ".tsv"

    def open(self, stream, schema, settings):
        return Writer(stream, schema)

    def read_back(self, data, schema, settings):
        data = bytes(data)
        at = data.find(b"--\\n")
        if at < 0:
            raise KfmtError("no rows in the file")
        yield from pa.ipc.open_stream(data[at + 3:]).read_all().to_batches()


@hookimpl
def kfmt_register_exporters(register):
    register(Tsv())
'''


@pytest.fixture(scope="module")
def exporter_distribution(tmp_path_factory) -> Path:
    return installed_distribution(tmp_path_factory.mktemp("site-exporter"), "kfmt_toy_tsv", TOY_EXPORTER,
                                  "kfmt-toy-tsv", "1.0", "toy-tsv")


@pytest.mark.spark
def test_export_writes_a_third_party_format(exporter_distribution, tmp_path):
    src = Path(__file__).resolve().parent.parent / "samples" / "kafka-logs" / "v2-zstd-0"
    listed = {p["name"]: p for p in json.loads(run(exporter_distribution, "plugins", "--format", "json").stdout)}
    assert listed["toy-tsv"]["provides"] == {"exporters": ["toy-tsv"]}
    dst = tmp_path / "out"
    result = run(exporter_distribution, "export", str(src), str(dst), "--format", "toy-tsv",
                 "--master", "inprocess", "--no-progress")
    assert result.returncode == 0, result.stderr
    lines = [line for written in dst.rglob("*.tsv")  # a file per range of segments
             for line in written.read_bytes().split(b"--\n", 1)[0].decode().splitlines()]
    lines.sort(key=lambda line: int(line.split("\t")[0]))
    cat = run(exporter_distribution, "cat", str(src), "--format", "json")
    expected = [f"{r['offset']}\t{base64.b64decode(r['value'] or '').hex()}"
                for r in map(json.loads, cat.stdout.splitlines())]
    assert lines == expected
    unknown = run(exporter_distribution, "export", str(src), str(tmp_path / "x"), "--format", "csv")
    assert unknown.returncode == 2 and "known: iceberg, jsonl, parquet, toy-tsv" in unknown.stderr


# --- a command from outside the package ---

TOY_COMMAND = '''
"""A toy kfmt command: `kfmt toy-hello NAME` greets NAME."""
from kfmt.plugin.hookspecs import hookimpl


def add_arguments(p):
    p.add_argument("name", metavar="NAME")


def run(args):
    print(f"hello {args.name}")
    return 0


@hookimpl
def kfmt_register_commands(register):
    register("toy-hello", add_arguments, run, "greet NAME, from a third-party plugin")
'''

# What `kfmt --help` leaves imported: the parser is built from the commands alone.
HELP_IMPORTS = '''
import sys
from kfmt.cli import main
try:
    main(["--help"])
except SystemExit:
    pass
print(sorted(m for m in ("pyarrow", "numpy", "fsspec") if m in sys.modules), file=sys.stderr)
'''


@pytest.fixture(scope="module")
def command_distribution(tmp_path_factory) -> Path:
    return installed_distribution(tmp_path_factory.mktemp("site-command"), "kfmt_toy_command", TOY_COMMAND,
                                  "kfmt-toy-command", "2.0", "toy-command")


def test_a_plugins_command_is_listed_and_runs(command_distribution):
    listed = run(command_distribution, "--help")
    assert listed.returncode == 0, listed.stderr
    assert any(line.split()[:1] == ["toy-hello"] for line in listed.stdout.splitlines()), listed.stdout
    assert "greet NAME, from a third-party plugin" in " ".join(listed.stdout.split())
    greeted = run(command_distribution, "toy-hello", "world")
    assert (greeted.returncode, greeted.stdout) == (0, "hello world\n"), greeted.stderr
    # the built-in plugins (pyarrow, numpy, fsspec) are not loaded to list it
    light = run(command_distribution, script=HELP_IMPORTS)
    assert "toy-hello" in light.stdout and light.stderr.strip() == "[]", light.stderr
    # nor when the allow-list leaves the plugin out, and then its command is gone
    left_out = run(command_distribution, "--help", allow="")
    assert left_out.returncode == 0 and "toy-hello" not in left_out.stdout


TAKEOVER_MODULE = '''
"""A codec plugin taking gzip's id over (replace=True)."""
from kfmt.format.codecs import DEFAULT_MAX_DECOMPRESSED, Compression
from kfmt.plugin.hookspecs import hookimpl


class Reversed(Compression):
    id, name, magics = 1, "reversed", (0, 1, 2)

    def compress(self, data, *, magic, level=None):
        return bytes(data)[::-1]

    def decompress(self, data, *, magic, max_size=DEFAULT_MAX_DECOMPRESSED):
        return bytes(data)[::-1]


@hookimpl
def kfmt_register_compressions(register):
    register(Reversed(), replace=True)
'''


def test_a_replacing_plugin_loaded_before_the_builtins_still_comes_after_them(tmp_path):
    """The parser loads third-party plugins alone (for their commands), the built-ins come later:
    the registry still asks the built-ins first, so the plugin's replace=True takes gzip's id over
    rather than clashing with it."""
    site = installed_distribution(tmp_path, "kfmt_takeover", TAKEOVER_MODULE, "kfmt-takeover", "1.0",
                                  "takeover-gzip")
    script = ("from kfmt.plugin import registry\n"
              "registry.commands()\n"
              "print(registry.get().compressions[1].name)\n")
    result = run(site, script=script)
    assert (result.returncode, result.stdout.strip()) == (0, "reversed"), result.stderr
