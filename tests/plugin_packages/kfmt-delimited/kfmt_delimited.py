"""Delimited text as a kfmt value format: each value split on a separator into the fields named, a
struct of strings (kfmt export --value-format delimited --value-format-option fields=id,name)."""
from kfmt.plugin.hookspecs import hookimpl
from kfmt.plugin.options import Option

SEPARATORS = {"comma": ",", "semicolon": ";", "pipe": "|", "tab": "\t"}


def _names_problem(text):
    names = text.split(",")
    if "" in names or len(set(names)) < len(names):
        return "give distinct field names, comma-separated"
    return None


class Delimited:
    name = "delimited"               # --key-format / --value-format delimited
    description = "delimited text, split into named string fields"
    # Its options: --value-format-option fields=... (or --key-format-option), the keyword
    # value_format_options={"fields": ...} of kfmt.read and kfmt.export, the data source's
    # valueFormatOption.fields; bind() receives them checked, with the defaults, in binding.options.
    options = (
        Option("fields", "the fields' names, comma-separated", default="first,second",
               validate=_names_problem),
        Option("separator", "what separates the fields", choices=tuple(SEPARATORS), default="comma"),
        Option("strip", "remove ASCII white space around each field", bool, default=False),
    )

    def bind(self, binding):          # on the driver, once per topic and side
        given = binding.options
        return DelimitedDecoder(given["fields"].split(","), SEPARATORS[given["separator"]], given["strip"])


class DelimitedDecoder:
    """Picklable (tasks run in other processes); decodes a whole column per call."""

    def __init__(self, names, separator, strip):
        import pyarrow as pa  # only once a format is bound, not when kfmt builds its command line

        self.names, self.separator, self.strip = names, separator, strip
        self.arrow_type = pa.struct([(name, pa.string()) for name in names])

    def decode(self, data):           # a binary column: its values, nulls included
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc
        from kfmt.format.value_formats import Decoded

        not_text = _not_utf8(data)
        text = pc.if_else(pa.array(not_text), pa.scalar(None, data.type), data).cast(pa.string())
        parts = pc.split_pattern(text, self.separator)
        counts = pc.list_value_length(parts).fill_null(len(self.names)).to_numpy()
        wrong = (counts != len(self.names)) & ~not_text
        parts = pc.if_else(pa.array(wrong), pa.scalar(None, parts.type), parts)
        fields = [pc.list_element(parts, i) for i in range(len(self.names))]
        if self.strip:
            fields = [pc.ascii_trim_whitespace(field) for field in fields]
        column = pa.StructArray.from_arrays(fields, fields=list(self.arrow_type), mask=pc.is_null(parts))
        failed = np.flatnonzero(not_text | wrong)
        reasons = ["not UTF-8 text" if not_text[row] else f"{counts[row]} fields, not {len(self.names)}"
                   for row in failed]
        return Decoded(column, failed, reasons)


def _not_utf8(data):
    """Which values are not UTF-8 (looked at one by one only when Arrow's cast finds one)."""
    import numpy as np
    import pyarrow as pa

    try:
        data.cast(pa.string())
        return np.zeros(len(data), bool)
    except pa.ArrowInvalid:
        return np.array([value is not None and not _decodes(value) for value in data.to_pylist()], bool)


def _decodes(value):
    try:
        value.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


@hookimpl
def kfmt_register_value_formats(register):
    register(Delimited())
