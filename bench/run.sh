#!/usr/bin/env bash
# kfmt's benchmark harness (bench/README.md): sets up .venv on first use as bin/kfmt does (the bench
# extra: kafka-python, aiokafka; the C extension is built by the editable install), then runs.
#   bench/run.sh [--quick] ...              the kernel and codec benchmarks (bench/run.py)
#   bench/run.sh commands 2G [--runs N] ... whole commands on a generated 2 GB input (bench/commands.py)
#   bench/run.sh typed 2G [--runs N]       the typed export of Avro values against raw and a fastavro script
#   bench/run.sh typed-values 200M --kind protobuf|json   typed Protobuf / JSON Schema export against raw and a one-by-one script
#   bench/run.sh generate DST --size 2G ... a producer-shaped log directory (bench/producer_logs.py)
#   bench/run.sh windows [--runs N] ...     a 1 % time window written every way, through Spark (bench/window_forms.py)
#   bench/run.sh ab BASE ROUNDS CMD ...     one kfmt command here and in checkout BASE, taking turns (bench/ab.py)
source "$(dirname "${BASH_SOURCE[0]}")/../bin/_bootstrap.sh"
case "${1:-}" in
    commands)
        shift
        size=()
        if [ $# -gt 0 ] && [[ "$1" != -* ]]; then size=(--size "$1"); shift; fi
        exec "$VENV/bin/python" "$KFMT_ROOT/bench/commands.py" "${size[@]}" "$@" ;;
    typed)
        shift
        size=()
        if [ $# -gt 0 ] && [[ "$1" != -* ]]; then size=(--size "$1"); shift; fi
        exec "$VENV/bin/python" "$KFMT_ROOT/bench/typed_avro.py" "${size[@]}" "$@" ;;
    typed-values)
        shift
        size=()
        if [ $# -gt 0 ] && [[ "$1" != -* ]]; then size=(--size "$1"); shift; fi
        exec "$VENV/bin/python" "$KFMT_ROOT/bench/typed_values.py" "${size[@]}" "$@" ;;
    generate)
        shift
        exec "$VENV/bin/python" "$KFMT_ROOT/bench/producer_logs.py" "$@" ;;
    windows)
        shift
        exec "$VENV/bin/python" "$KFMT_ROOT/bench/window_forms.py" "$@" ;;
    ab)
        shift
        exec "$VENV/bin/python" "$KFMT_ROOT/bench/ab.py" "$@" ;;
    *)
        exec "$VENV/bin/python" "$KFMT_ROOT/bench/run.py" "$@" ;;
esac
