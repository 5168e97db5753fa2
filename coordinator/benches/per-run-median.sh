#!/usr/bin/env bash
# Issue 12's per-run target: the median wall time of one run of a trivial command as
# `platter run` reports it (the JSON report's `cells[0].metrics[wall].median`, store and
# journal on tmpfs) against `hyperfine -N`'s median, in alternating rounds.
#
#   coordinator/benches/per-run-median.sh [ROUNDS=4] [RUNS=1000] [COMMAND=/bin/true]
#
# Prints per round platter's median, hyperfine's and their ratio, then the median ratio.
# Needs hyperfine, python3 and a release build (cargo build --release --bins); P overrides
# the binary. On a shared machine set BENCH_LOCK to a lock file that other benchmarks
# take too (each timed run is wrapped in `flock $BENCH_LOCK`).
set -euo pipefail
top=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
P=${P:-$top/target/release/platter}
rounds=${1:-4}
runs=${2:-1000}
command=${3:-/bin/true}
lock=()
if [ -n "${BENCH_LOCK:-}" ]; then lock=(flock "$BENCH_LOCK"); fi
shm=/dev/shm
[ -d "$shm" ] || shm=${TMPDIR:-/tmp}
dir=$(mktemp -d "$shm/per-run-median.XXXXXX")
trap 'rm -rf "$dir"' EXIT
printf 'name: per-run\nworkload: { command: { run: "%s" } }\nrepeat: %s\n' "$command" "$runs" \
  > "$dir/t.yaml"

platter_median() {
  local d="$dir/run$1"
  mkdir "$d"
  (cd "$d" && "${lock[@]}" "$P" run "$dir/t.yaml" --db "$d/s.db" --state-dir "$d/st" \
    --format json > "$d/r.json" 2> "$d/err") || { cat "$d/err" >&2; exit 1; }
  python3 -c "import json, sys
r = json.load(open(sys.argv[1]))
print([m for m in r['cells'][0]['metrics'] if m['metric'] == 'wall'][0]['median'] * 1e3)" \
    "$d/r.json"
  rm -rf "$d"
}

hyperfine_median() {
  "${lock[@]}" hyperfine -N --runs "$runs" "$command" --export-json "$dir/hf.json" \
    > /dev/null 2>&1
  python3 -c "import json, sys
print(json.load(open(sys.argv[1]))['results'][0]['median'] * 1e3)" "$dir/hf.json"
}

echo "$runs × $command, per-run median in ms (platter: store and journal in $shm)"
printf '%-6s %10s %10s %7s\n' round platter hyperfine ratio
ratios=()
for r in $(seq 1 "$rounds"); do
  # Alternate which goes first, so a drift of the machine hits both alike.
  if [ $((r % 2)) -eq 1 ]; then
    p=$(platter_median "$r"); h=$(hyperfine_median)
  else
    h=$(hyperfine_median); p=$(platter_median "$r")
  fi
  ratio=$(python3 -c "print('%.3f' % ($p / $h))")
  ratios+=("$ratio")
  printf '%-6s %10.3f %10.3f %7s\n' "$r" "$p" "$h" "$ratio"
done
python3 -c "import statistics, sys
v = sorted(float(x) for x in sys.argv[1:])
print('median ratio %.3f (min %.3f, max %.3f; target <= 1.10)' % (statistics.median(v), v[0], v[-1]))" \
  "${ratios[@]}"
