"""Built-in plugins: message formats, compression codecs, storage backends, export file formats."""
