#!/usr/bin/env bash
# Issue 12's two targets for a trivial command, in alternating rounds against `hyperfine -N`:
# the median wall time of one run as `platter run` reports it (the JSON report's
# `cells[0].metrics[wall].median`, store and journal on tmpfs) against hyperfine's median,
# and the whole `platter run` (start-up, RUNS steps, provenance, the report) against the
# sum of hyperfine's RUNS times.
#
#   coordinator/benches/per-run-median.sh [ROUNDS=4] [RUNS=1000] [COMMAND=/bin/true]
#
# Prints per round both medians and their ratio, both totals and theirs, then the median
# ratios. PLATTER_AGENT_CPU=off (or a CPU) compares the agent's placement.
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

# "median_ms total_s" of one `platter run`; the total is timed inside the lock.
platter_median() {
  local d="$dir/run$1"
  mkdir "$d"
  (cd "$d" && "${lock[@]}" bash -c 's=$(date +%s%N); "$@"; e=$?; echo $(( $(date +%s%N) - s )) > took; exit $e' \
    - "$P" run "$dir/t.yaml" --db "$d/s.db" --state-dir "$d/st" --format json \
    > "$d/r.json" 2> "$d/err") || { cat "$d/err" >&2; exit 1; }
  python3 -c "import json, sys
r = json.load(open(sys.argv[1]))
m = [m for m in r['cells'][0]['metrics'] if m['metric'] == 'wall'][0]['median']
print(m * 1e3, int(open(sys.argv[2]).read()) / 1e9)" "$d/r.json" "$d/took"
  rm -rf "$d"
}

# "median_ms sum_s" of hyperfine's runs.
hyperfine_median() {
  "${lock[@]}" hyperfine -N --runs "$runs" "$command" --export-json "$dir/hf.json" \
    > /dev/null 2>&1
  python3 -c "import json, sys
r = json.load(open(sys.argv[1]))['results'][0]
print(r['median'] * 1e3, sum(r['times']))" "$dir/hf.json"
}

echo "$runs × $command (platter: store and journal in $shm, --agent-cpu ${PLATTER_AGENT_CPU:-auto})"
printf '%-6s %28s %28s\n' "" "per-run median, ms" "end to end, s"
printf '%-6s %10s %10s %6s %10s %10s %6s\n' round platter hyperfine ratio platter hyperfine ratio
ratios=()
totals=()
for r in $(seq 1 "$rounds"); do
  # Alternate which goes first, so a drift of the machine hits both alike.
  if [ $((r % 2)) -eq 1 ]; then
    p=$(platter_median "$r"); h=$(hyperfine_median)
  else
    h=$(hyperfine_median); p=$(platter_median "$r")
  fi
  read -r pm pt <<< "$p"
  read -r hm ht <<< "$h"
  ratio=$(python3 -c "print('%.3f' % ($pm / $hm))")
  total=$(python3 -c "print('%.2f' % ($pt / $ht))")
  ratios+=("$ratio")
  totals+=("$total")
  printf '%-6s %10.3f %10.3f %6s %10.2f %10.2f %6s\n' "$r" "$pm" "$hm" "$ratio" "$pt" "$ht" "$total"
done
python3 -c "import statistics, sys
n = len(sys.argv) // 2
for name, xs, target in (('per-run median', sys.argv[1:n + 1], '1.10'), ('end to end', sys.argv[n + 1:], '2')):
    v = sorted(float(x) for x in xs)
    print('%s: median ratio %.3f (min %.3f, max %.3f; target <= %s)' % (name, statistics.median(v), v[0], v[-1], target))" \
  "${ratios[@]}" "${totals[@]}"
