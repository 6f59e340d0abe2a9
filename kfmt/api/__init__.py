"""kfmt's Python API (docs/python.md): `kfmt.read` / `kfmt.open_log` (reader) and the commands as
functions (commands). `import kfmt` exposes these names lazily (kfmt/__init__.py)."""
