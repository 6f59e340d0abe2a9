# Sourced by bin/kfmt and bin/test: make sure .venv exists and holds this checkout's dependencies.
# The first run creates the venv and installs everything in one pip resolve (pyspark included, so it
# takes a minute or two); later runs only re-install when pyproject.toml or setup.py changed.
# Every `bin/kfmt` run passes here, so the usual case starts no process: when the stamp is newer
# than both files, nothing changed since the install (their hash is compared only otherwise).
set -euo pipefail
here="${BASH_SOURCE[0]%/*}"
[ "$here" != "${BASH_SOURCE[0]}" ] || here=.
KFMT_ROOT="$(cd "$here/.." && pwd)"
VENV="${KFMT_VENV:-$KFMT_ROOT/.venv}"
PY="$VENV/bin/python"
STAMP="$VENV/.kfmt-installed"
if [ -x "$PY" ] && [ "$STAMP" -nt "$KFMT_ROOT/pyproject.toml" ] && [ "$STAMP" -nt "$KFMT_ROOT/setup.py" ]; then
    want=""  # installed after the last change of either file
else
    want="$(cat "$KFMT_ROOT/pyproject.toml" "$KFMT_ROOT/setup.py" | sha256sum | cut -d' ' -f1)"
    [ "$(cat "$STAMP" 2>/dev/null)" != "$want" ] || touch "$STAMP"  # the same files, touched
fi
if [ -n "$want" ] && { [ ! -x "$PY" ] || [ "$(cat "$STAMP" 2>/dev/null)" != "$want" ]; }; then
    echo "kfmt: installing into $VENV (on the first run, and when pyproject.toml or setup.py change; about two minutes)" >&2
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
# The editable install builds the C kernels into the checkout (kfmt/_speedups*.so); a pull or merge
# that changes kfmt/csrc leaves that build behind, so rebuild it when a source is newer (bash's own
# test: no process in the usual case). Without a build (no compiler) there is nothing to refresh.
built=("$KFMT_ROOT"/kfmt/_speedups*.so)
if [ -e "${built[0]}" ]; then
    for source in "$KFMT_ROOT"/kfmt/csrc/*; do
        if [ "$source" -nt "${built[0]}" ]; then
            echo "kfmt: rebuilding the C kernels (kfmt/csrc changed since they were built)" >&2
            if ! "$PY" -m pip install --quiet --no-deps --disable-pip-version-check -e "$KFMT_ROOT" 2>&1 \
                    | { grep -v "is ignored: it is neither a file nor a directory" || true; } >&2; then
                echo "kfmt: rebuilding the C kernels failed (see above)" >&2
                exit 1
            fi
            touch "${built[0]}"  # an unchanged build is not rewritten: mark it as current
            break
        fi
    done
fi
