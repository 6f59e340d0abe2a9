#!/usr/bin/env bash
# Where `--master auto` switches engines (docs/performance.md, "Which engine runs a job"): whole-command
# wall and CPU time (the process and the workers it waits for; Spark's JVM is not among them) of
# reindex, upgrade and export on each input directory, in process, on the pool and on embedded Spark,
# plus the fixed start of each engine (a job of two trivial tasks).
#   bench/engine_threshold.sh LOGDIR...    (log directories of different sizes, e.g. from bench/data.py)
# Prints tab-separated rows: input bytes, command, master, wall s, user s, sys s, 1-minute load.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/bin/_bootstrap.sh"
KFMT="$VENV/bin/kfmt"
SCRATCH="$(mktemp -d)"
trap 'rm -rf "$SCRATCH"' EXIT
printf 'bytes\tcommand\tmaster\twall_s\tuser_s\tsys_s\tload1\n'
timed() {  # label... -- command...
  local labels=()
  while [ "$1" != "--" ]; do labels+=("$1"); shift; done; shift
  local load; load=$(cut -d' ' -f1 /proc/loadavg)
  /usr/bin/time -o "$SCRATCH/time" -f '%e\t%U\t%S' "$@" > /dev/null 2> "$SCRATCH/err" \
    || { echo "failed: ${labels[*]}: $(tail -1 "$SCRATCH/err")" >&2; return 0; }
  printf '%s\t' "${labels[@]}"; printf '%s\t%s\n' "$(tail -1 "$SCRATCH/time")" "$load"
}
for master in inprocess 'local-pool[2]' 'local[*]'; do
  timed 0 trivial "$master" -- "$VENV/bin/python" -c \
    "from kfmt.pipelines.runner import run_tasks; run_tasks(abs, [-1, -2], master='$master', progress=False)"
done
for src in "$@"; do
  bytes=$(du -sbL "$src" | cut -f1)
  for command in reindex upgrade export; do
    extra=(); [ "$command" = export ] && extra=(--format parquet)
    for master in inprocess pool 'local[*]'; do
      rm -rf "$SCRATCH/dst"; sync
      timed "$bytes" "$command" "$master" -- "$KFMT" "$command" "$src" "$SCRATCH/dst" --master "$master" \
        --no-progress "${extra[@]}"
    done
  done
done
