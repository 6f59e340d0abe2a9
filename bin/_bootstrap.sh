# Sourced by bin/kfmt and bin/test: make sure .venv exists and holds this checkout's dependencies.
# The first run creates the venv and installs everything in one pip resolve (pyspark included, so it
# takes a minute or two); later runs only re-install when pyproject.toml or setup.py changed.
set -euo pipefail
KFMT_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${KFMT_VENV:-$KFMT_ROOT/.venv}"
PY="$VENV/bin/python"
STAMP="$VENV/.kfmt-installed"
want="$(cat "$KFMT_ROOT/pyproject.toml" "$KFMT_ROOT/setup.py" | sha256sum | cut -d' ' -f1)"
if [ ! -x "$PY" ] || [ "$(cat "$STAMP" 2>/dev/null)" != "$want" ]; then
    echo "kfmt: installing into $VENV (first run only; about two minutes)" >&2
    if [ ! -x "$PY" ]; then
        "${KFMT_PYTHON:-$(command -v python3.11 || command -v python3)}" -m venv "$VENV"
    fi
    # grep drops pip's warnings about configured index folders that this machine does not have.
    if ! "$PY" -m pip install --quiet --disable-pip-version-check -e "$KFMT_ROOT[spark,s3,test,bench]" 2>&1 \
            | { grep -v "is ignored: it is neither a file nor a directory" || true; } >&2; then
        echo "kfmt: installing dependencies into $VENV failed (see above)" >&2
        exit 1
    fi
    echo "$want" > "$STAMP"
fi
