"""A value format's options are what it declares (kfmt.plugin.options.Option in its `options`):
`--key-format-option`/`--value-format-option`, the keywords `key_format_options`/`value_format_options`
and the data source's `keyFormatOption.<k>`/`valueFormatOption.<k>` are checked against those
declarations before any work, one line naming the format and the option; `kfmt plugins` lists them."""
from __future__ import annotations

import json

import pytest
from support.cli import run_kfmt
from support.schema_truth import SCHEMAS_DEV

import kfmt
from kfmt.errors import UsageError
from kfmt.plugin.options import Option

ORDERS = SCHEMAS_DEV / "orders-avro-0"


def read(**options) -> int:
    return kfmt.read(ORDERS, **options).read_all().num_rows


@pytest.mark.parametrize("options, message", [
    ({"value_format": "avro", "value_format_options": {"subjekt": "x"}},
     "value format 'avro' has no option 'subjekt' (its options: message, subject, tables)"),
    ({"value_format": ["avro", "plain-*:json"], "value_format_options": {"subjekt": "x"}},
     "value formats 'avro', 'json' have no option 'subjekt' (their options: message, schema, subject, tables)"),
    ({"value_format": "avro", "value_format_options": {"tables": "many"}},
     "value format 'avro' option 'tables' 'many': one of one, per-schema-id"),
    # no key format chosen: keys stay raw, which takes no option
    ({"value_format": "avro", "key_format_options": {"subject": "x"}},
     "key format 'raw' has no option 'subject' (its options: none)"),
    ({"key_format": "string", "key_format_options": {"schema": "x"}},
     "key format 'string' has no option 'schema' (its options: none)"),
])
def test_an_option_no_chosen_format_declares_is_refused(options, message):
    with pytest.raises(UsageError) as refused:
        read(**options)
    assert str(refused.value) == message


def test_an_option_reaches_the_formats_that_declare_it_only():
    """`subject` is avro's; json, chosen for other topics of the same side, is bound without it."""
    chosen = {"value_format": ["avro", "plain-*:json"], "value_format_options": {"subject": "orders-avro-value"}}
    plain = kfmt.read(SCHEMAS_DEV, topics="plain-json", **chosen).read_all()
    assert plain.num_rows == kfmt.read(SCHEMAS_DEV, topics="plain-json").read_all().num_rows
    assert read(**chosen) == read(value_format="avro") > 0
    with pytest.raises(UsageError, match="no subject 'nothing-value'"):
        read(value_format="avro", value_format_options={"subject": "nothing-value"})


def test_the_command_line_refuses_it_in_one_line_before_any_work(tmp_path):
    done = run_kfmt("export", ORDERS, tmp_path / "out", "--value-format", "avro",
                    "--value-format-option", "tables=many")
    assert (done.code, done.err) == (2, "kfmt: error: value format 'avro' option 'tables' 'many': one of "
                                        "one, per-schema-id\n")
    assert not (tmp_path / "out").exists()
    done = run_kfmt("cat", ORDERS, "--value-format", "json", "--value-format-option", "subject=x")
    assert (done.code, done.err) == (2, "kfmt: error: value format 'json' has no option 'subject' (its "
                                        "options: schema)\n")
    done = run_kfmt("cat", ORDERS, "--value-format", "avro", "--value-format-option", "subject")
    assert (done.code, done.err) == (2, "kfmt: error: --value-format-option 'subject': give it as KEY=VALUE\n")


def test_the_data_source_refuses_it_before_spark_reads():
    from kfmt.pipelines.datasource import SourceOptions

    with pytest.raises(UsageError, match="value format 'avro' has no option 'subjekt'"):
        SourceOptions.parse({"path": str(ORDERS), "valueFormat": "avro", "valueFormatOption.subjekt": "x"})
    parsed = SourceOptions.parse({"path": str(ORDERS), "valueFormat": "avro",
                                  "valueFormatOption.subject": "orders-avro-value"})
    assert dict(parsed.typing.value_options) == {"subject": "orders-avro-value"}


def test_kfmt_plugins_lists_every_value_format_with_its_options():
    done = run_kfmt("plugins", "--format", "json")
    provided = {p["name"]: p["provides"] for p in json.loads(done.out)}
    assert provided["values-basic"] == {"value formats": ["raw", "string", "json (options schema)"]}
    assert provided["values-registry"]["value formats"][0] == (
        "avro (options subject, message, tables [one/per-schema-id, default one])")
    text = run_kfmt("plugins").out
    assert "value formats: raw, string, json (options schema)" in text


def test_the_builtin_formats_declare_options():
    from kfmt.format.value_formats import value_formats

    for fmt in value_formats().values():
        assert all(isinstance(option, Option) for option in fmt.options), fmt.name
