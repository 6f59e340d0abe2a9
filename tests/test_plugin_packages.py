"""A third-party codec, exporter and value format with settings of their own, each a package (tests/plugin_packages/,
shown whole in docs/plugins.md): built into a wheel and installed by pip into a directory of their own,
then used by kfmt run as a separate process with that directory on its path, as a user who installs a
plugin runs it. Nothing of kfmt names them: the codec's levels, the exporter's flags and keywords and
the value format's options come from what the packages declare (kfmt.plugin.options)."""
from __future__ import annotations

import base64
import csv
import gzip
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.corpus import REALKAFKA, REPO

PACKAGES = REPO / "tests" / "plugin_packages"
DOC = (REPO / "docs" / "plugins.md").read_text()


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("plugin-packages")
    wheels, site = work / "wheels", work / "site"
    for package in sorted(PACKAGES.iterdir()):
        source = shutil.copytree(package, work / package.name)  # a build writes beside its sources
        pip("wheel", "--no-deps", "--no-build-isolation", "--wheel-dir", str(wheels), str(source))
    pip("install", "--no-deps", "--target", str(site), *map(str, sorted(wheels.glob("*.whl"))))
    return site


def pip(*args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet", *args],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


def kfmt(site: Path, *args, script: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("KFMT_LOAD_PLUGINS", "PYTHONPATH")}
    env["PYTHONPATH"] = str(site)
    command = [sys.executable, *(["-c", script] if script else ["-m", "kfmt"]), *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)


def test_the_doc_shows_each_package_whole():
    for path in sorted(PACKAGES.rglob("*")):
        if path.is_file() and path.suffix in (".py", ".toml"):
            assert path.read_text().strip() in DOC, f"docs/plugins.md does not show {path.relative_to(REPO)}"


def test_kfmt_plugins_lists_them_with_their_settings(site):
    listed = {p["name"]: p for p in json.loads(kfmt(site, "plugins", "--format", "json").stdout)}
    assert listed["bzip2"]["distribution"] == "kfmt-bzip2"
    assert listed["bzip2"]["provides"] == {"compressions": ["bzip2 (id 5, levels 1..9; default 9)"]}
    assert listed["csv"]["provides"] == {
        "exporters": ["csv (--csv-columns, --csv-delimiter, --csv-header, --csv-binary)"]}
    assert listed["delimited"]["provides"] == {"value formats": [
        "delimited (options fields [default first,second], separator [comma/semicolon/pipe/tab, default comma], "
        "strip [true or false, default False])"]}


def cat(site: Path, path: Path) -> list[dict]:
    done = kfmt(site, "cat", path, "--format", "json")
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_recompress_into_the_third_party_codec_at_a_level_it_declares(site, tmp_path):
    src = REALKAFKA / "v2-lz4-0"
    done = kfmt(site, "recompress", src, tmp_path / "out", "--compression", "bzip2", "--level", 1,
                "--master", "inprocess", "--no-progress")
    assert done.returncode == 0, done.stderr
    assert cat(site, tmp_path / "out") == cat(site, src)
    census = json.loads(kfmt(site, "info", tmp_path / "out", "--format", "json").stdout)["formats"]
    assert {f["compression"] for f in census} == {"bzip2"}
    assert kfmt(site, "verify", tmp_path / "out").returncode == 0
    refused = kfmt(site, "recompress", src, tmp_path / "again", "--compression", "bzip2", "--level", 10)
    assert (refused.returncode, refused.stderr) == (
        2, "kfmt: error: compression level 10 is outside bzip2's levels 1..9; default 9\n")


def test_export_to_the_third_party_format_with_its_flags(site, tmp_path):
    src = REALKAFKA / "v2-zstd-0"
    done = kfmt(site, "export", src, tmp_path / "out", "--format", "csv", "--csv-columns", "offset,key,value",
                "--csv-binary", "hex", "--csv-delimiter", ";", "--csv-header", "--master", "inprocess",
                "--no-progress")
    assert done.returncode == 0, done.stderr
    rows = []
    for written in sorted((tmp_path / "out").rglob("*.csv")):
        lines = list(csv.reader(io.StringIO(written.read_text()), delimiter=";"))
        assert lines[0] == ["offset", "key", "value"]
        rows += lines[1:]
    expected = [[str(r["offset"]), *("" if r[c] is None else base64.b64decode(r[c]).hex() for c in ("key", "value"))]
                for r in cat(site, src)]
    assert sorted(rows, key=lambda r: int(r[0])) == expected
    bad = kfmt(site, "export", src, tmp_path / "bad", "--format", "csv", "--csv-columns", "offset,headers")
    assert bad.returncode == 2 and bad.stderr.startswith(
        "kfmt: error: --csv-columns (csv_columns) 'offset,headers': no flat column headers (one of key, value,")
    assert not (tmp_path / "bad").exists()


EXPORT_FROM_PYTHON = '''
import sys, kfmt
report = kfmt.export(sys.argv[1], sys.argv[2], format="csv", csv_delimiter="tab", master="inprocess")
print(report["totals"]["output_records"])
'''


def test_kfmt_export_takes_the_exporters_settings_as_keywords(site, tmp_path):
    src = REALKAFKA / "v2-zstd-0"
    done = kfmt(site, script=EXPORT_FROM_PYTHON.replace("sys.argv[1], sys.argv[2]", f"{str(src)!r}, "
                                                                                        f"{str(tmp_path / 'out')!r}"))
    assert done.returncode == 0, done.stderr
    lines = [line.split("\t") for written in (tmp_path / "out").rglob("*.csv")
             for line in written.read_text().splitlines()]
    assert int(done.stdout) == len(lines) == len(cat(site, src))
    assert {len(fields) for fields in lines} == {4}  # offset, timestamp_ms, key, value: the default columns


def delimited_truth(name: str, fields: int, strip: bool) -> tuple[dict, int]:
    """offset -> the value's fields as Python splits (and strips) them, for the values of the truth
    (records.jsonl.gz: what the Java consumer read) that are UTF-8 with `fields` fields; and how many
    values (not null) are not."""
    good, bad = {}, 0
    with gzip.open(REALKAFKA / f"{name}.truth" / "records.jsonl.gz", "rt") as f:
        for record in map(json.loads, f):
            if record["value"] is None:
                continue
            try:
                parts = base64.b64decode(record["value"]).decode("utf-8").split(",")
            except UnicodeDecodeError:
                parts = []
            if len(parts) == fields:
                good[record["offset"]] = [p.strip(" \t\n\r\v\f") if strip else p for p in parts]
            else:
                bad += 1
    return good, bad


def test_export_with_the_third_party_value_format_and_its_options(site, tmp_path):
    import pyarrow.parquet as pq

    done = kfmt(site, "export", REALKAFKA / "v2-zstd-0", tmp_path / "out", "--value-format", "delimited",
                "--value-format-option", "fields=left,right", "--value-format-option", "strip=true",
                "--master", "inprocess", "--no-progress")
    assert done.returncode == 0, done.stderr
    table = pq.read_table(tmp_path / "out" / "topic=v2-zstd", columns=["offset", "value"])
    assert table.schema.field("value").type == pa_struct("left", "right")
    got = {r["offset"]: [r["value"]["left"], r["value"]["right"]] for r in table.to_pylist() if r["value"]}
    good, bad = delimited_truth("v2-zstd-0", 2, strip=True)
    assert got == good and len(good) > 100
    dead = sum(pq.read_metadata(f).num_rows for f in (tmp_path / "out" / "_errors").rglob("*.parquet"))
    assert dead == bad > 100
    refused = kfmt(site, "export", REALKAFKA / "v2-zstd-0", tmp_path / "no", "--value-format", "delimited",
                   "--value-format-option", "separator=colon")
    assert (refused.returncode, refused.stderr) == (2, "kfmt: error: value format 'delimited' option "
                                                       "'separator' 'colon': one of comma, semicolon, pipe, tab\n")


def pa_struct(*names):
    import pyarrow as pa

    return pa.struct([(name, pa.string()) for name in names])


READ_FROM_PYTHON = '''
import json, sys, kfmt
table = kfmt.read(sys.argv[1], value_format="delimited",
                  value_format_options={"fields": "a,b,c", "separator": "comma"}).read_all()
print(json.dumps({r["offset"]: list(r["value"].values()) for r in table.to_pylist() if r["value"]}))
'''


def test_kfmt_read_decodes_with_it(site):
    done = kfmt(site, REALKAFKA / "v2-zstd-0", script=READ_FROM_PYTHON)
    assert done.returncode == 0, done.stderr
    good, _ = delimited_truth("v2-zstd-0", 3, strip=False)
    assert {int(k): v for k, v in json.loads(done.stdout).items()} == good and len(good) > 10
