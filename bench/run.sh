#!/usr/bin/env bash
# kfmt's benchmark harness (bench/README.md): sets up .venv on first use as bin/kfmt does (the bench
# extra: kafka-python, aiokafka; the C extension is built by the editable install), then runs.
source "$(dirname "${BASH_SOURCE[0]}")/../bin/_bootstrap.sh"
exec "$VENV/bin/python" "$KFMT_ROOT/bench/run.py" "$@"
