#!/usr/bin/env bash
# A series' history and a run's report at scale: RUNS runs (default 25) of a campaign of
# 500 cells (a 20 × 25 matrix of `true`, 6 repetitions each) into one SQLite store, then
# hyperfine of `platter history` (the last run only: it reads ten runs before it for their
# spread; every run) and of `platter report` of the first run (no series before it) and of
# the last (its "since the last run" section reads the series' last twelve runs). Needs
# hyperfine and the release binary: cargo build --release -p platter --bin platter.
set -euo pipefail
top=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
runs=${1:-25}
platter=$top/target/release/platter
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
cat > series.yaml <<'YAML'
name: big-series
matrix:
  a: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20]
  b: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25]
workload:
  command:
    run: "true ${a} ${b}"
repeat: 6
YAML
for _ in $(seq "$runs"); do "$platter" run series.yaml >/dev/null 2>&1; done
first=$("$platter" campaigns 2>/dev/null | awk 'NR > 1 { id = $1 } END { print id }')
last=$("$platter" campaigns 2>/dev/null | awk 'NR == 2 { print $1 }')
hyperfine -N --warmup 1 --runs 5 \
  "$platter history big-series --last 1 --format json" \
  "$platter history big-series --format json" \
  "$platter report $first --format json" \
  "$platter report $last --format json"
