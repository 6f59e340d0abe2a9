"""Plugins bring their own settings (kfmt.plugin.options): what a plugin declares is checked, filled in
with its defaults and named the same way on the command line and in the Python API; the built-in
exporters and codecs declare theirs there, not in kfmt's commands."""
from __future__ import annotations

import pytest
from support.cli import run_kfmt
from support.corpus import REALKAFKA

import kfmt
from kfmt.errors import UsageError
from kfmt.format.codecs import Compression, Levels
from kfmt.plugin import registry
from kfmt.plugin.options import Option, declared, from_keywords, settings

LEVEL = Option("level", "how hard", int, default=3, low=1, high=9)
MODE = Option("mode", "which way", choices=("fast", "small"), default="fast")
PROPS = Option("properties", "pairs", pairs=True, flag="property")
STRICT = Option("strict", "a switch", bool, default=False)
OPTIONS = (LEVEL, MODE, PROPS, STRICT)


def test_names_follow_from_the_plugin_and_the_option():
    assert LEVEL.flag_of("toy-codec") == "--toy-codec-level" and LEVEL.keyword_of("toy-codec") == "toy_codec_level"
    assert PROPS.flag_of("iceberg") == "--iceberg-property" and PROPS.keyword_of("iceberg") == "iceberg_properties"


def test_settings_fill_defaults_and_convert_text():
    assert settings("toy", OPTIONS, {}) == {"level": 3, "mode": "fast", "properties": {}, "strict": False}
    given = {"level": "7", "mode": "small", "properties": ["a=1", "b=x=y"], "strict": "true"}
    assert settings("toy", OPTIONS, given) == {"level": 7, "mode": "small", "properties": {"a": "1", "b": "x=y"},
                                               "strict": True}
    assert settings("toy", OPTIONS, {"properties": {"k": 1}})["properties"] == {"k": "1"}


@pytest.mark.parametrize("given, message", [
    ({"level": 10}, "--toy-level (toy_level) 10 is outside toy's range 1..9"),
    ({"level": "high"}, "--toy-level (toy_level): 'high' is not an integer"),
    ({"level": True}, "is not an integer"),
    ({"mode": "slow"}, "--toy-mode (toy_mode) 'slow': one of fast, small"),
    ({"properties": ["novalue"]}, "--toy-property 'novalue': give it as KEY=VALUE"),
    ({"strict": "maybe"}, "is not true or false"),
    ({"colour": "red"}, "toy has no setting 'colour' (its settings: level, mode, properties, strict)"),
])
def test_what_a_plugin_does_not_take_is_a_usage_error(given, message):
    with pytest.raises(UsageError) as failure:
        settings("toy", OPTIONS, given)
    assert message in str(failure.value)


def test_keywords_of_the_plugin_chosen_of_another_and_of_none():
    assert from_keywords("toy", OPTIONS, {"toy_level": 2, "other_width": None}, {"other": (Option("width"),)}) \
        == {"level": 2, "mode": "fast", "properties": {}, "strict": False}
    with pytest.raises(UsageError, match="other_width is a setting of 'other', not of 'toy'"):
        from_keywords("toy", OPTIONS, {"other_width": 5}, {"other": (Option("width"),)})
    with pytest.raises(TypeError, match="unexpected keyword argument 'toy_colour'"):
        from_keywords("toy", OPTIONS, {"toy_colour": 5}, {})


def test_an_option_name_must_be_a_python_name():
    with pytest.raises(ValueError):
        Option("bad-name")
    with pytest.raises(ValueError):
        Option("colour", type=list)


def test_codecs_declare_their_names_and_levels():
    codecs = {c.name: c for c in registry.get().compressions.values()}
    levels = {name: c.levels for name, c in codecs.items() if c.levels}
    assert {name: (v.lowest, v.highest, v.default, v.kafka_level) for name, v in levels.items()} == {
        "gzip": (1, 9, "isal-1", 6), "lz4": (1, 17, 9, 9), "zstd": (-131072, 22, 3, 3)}
    assert codecs["snappy"].levels is None and codecs["none"].levels is None
    assert codecs["zstd"].parse_level(-5) == -5 and codecs["gzip"].parse_level("isal-2") == "isal-2"
    with pytest.raises(UsageError, match="snappy has no compression levels"):
        codecs["snappy"].parse_level(1)
    with pytest.raises(UsageError, match="compression level 0 is outside lz4's levels 1..17"):
        codecs["lz4"].parse_level(0)


def test_a_codec_declaring_only_a_level_option_takes_its_range():
    class Numbered(Compression):
        id, name = 6, "numbered"
        level = Option("level", "a level", int, default=4, low=2, high=7)

    assert Numbered().levels == Levels(2, 7, 4) and Numbered().parse_level("3") == 3
    with pytest.raises(UsageError, match="compression level 8 is outside numbered's levels 2..7; default 4"):
        Numbered().parse_level(8)


def test_the_iceberg_exporter_declares_the_flags_kfmt_export_shows():
    iceberg = registry.get().exporters["iceberg"]
    assert [o.flag_of("iceberg") for o in declared(iceberg)] == [
        "--iceberg-catalog", "--iceberg-table", "--iceberg-property"]
    shown = run_kfmt("export", "--help")
    assert shown.code == 0 and "--format iceberg:" in shown.out and "--iceberg-table NS.TABLE" in shown.out


def test_a_setting_of_another_format_is_refused_not_ignored(tmp_path):
    src = REALKAFKA / "v2-lz4-0"
    result = run_kfmt("export", src, tmp_path / "out", "--iceberg-table", "a.b", "--master", "inprocess")
    assert result.code == 2
    assert result.err == "kfmt: error: iceberg_table is a setting of 'iceberg', not of 'parquet'\n"
    with pytest.raises(UsageError, match="iceberg_table is a setting of 'iceberg', not of 'jsonl'"):
        kfmt.export(src, tmp_path / "out", format="jsonl", iceberg_table="a.b")
    with pytest.raises(TypeError, match="iceberg_colour"):
        kfmt.export(src, tmp_path / "out", format="iceberg", iceberg_colour="red")
    assert not (tmp_path / "out").exists()
