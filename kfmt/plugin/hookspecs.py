"""The hooks kfmt plugins implement. Registry hooks receive a `register` callback (the llm/tox style):
call it once per thing the plugin provides. Built-in formats, codecs and storage backends are plugins
too, loaded through the same `kfmt` entry-point group as third-party ones."""
import pluggy

hookspec = pluggy.HookspecMarker("kfmt")
hookimpl = pluggy.HookimplMarker("kfmt")


@hookspec
def kfmt_register_formats(register):
    """Register message formats: call register(fmt) with a kfmt.format.message_formats.MessageFormat per format."""


@hookspec
def kfmt_register_compressions(register):
    """Register compression codecs: call register(codec) with a kfmt.format.codecs.Compression."""


@hookspec
def kfmt_register_storage(register):
    """Register storage backends: call register(backend) with a kfmt.storage.store.StorageBackend."""


@hookspec
def kfmt_register_exporters(register):
    """Register exporters: call register(exporter) with a kfmt.rows.exporters.Exporter."""


@hookspec
def kfmt_register_value_formats(register):
    """Register value formats (how key and value bytes decode to typed columns: `--key-format`,
    `--value-format`): call register(fmt) with a kfmt.format.value_formats.ValueFormat."""


@hookspec
def kfmt_register_commands(register):
    """Register CLI subcommands: call register(name, add_arguments, run, help)."""
