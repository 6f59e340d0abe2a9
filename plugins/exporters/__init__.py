"""Built-in exporters: the file formats of `kfmt export`."""
