#!/usr/bin/env bash
# The performance guard `.ci/run` runs: BENCHMARKS.md's goals for the path users run,
# measured on the release build against a reference run side by side, each figure the
# best of TRIES tries, held to a bound about 1.5× its goal — a gross slowdown fails, the
# noise of a shared machine does not. One goal is not met on this machine (the fsync
# loop; BENCHMARKS.md, "The guard"): its bound is 1.5× today's excess instead, so the guard
# still catches a slowdown from where it stands.
#
#   coordinator/benches/guard.sh            # every figure, GUARD_TRIES=3 tries each
#   GUARD_ONLY=steps coordinator/benches/guard.sh   # one group: steps, fsync or report
#
# Figures (goal → bound):
#   steps:  1,000 and 8,000 × /bin/true through `platter run` (store and journal in
#           /dev/shm) against `hyperfine -N` of /bin/true in the same try:
#           overhead per step = (T(N) − T(1)) / (N − 1) − hyperfine's mean   0.1 ms → 0.15 ms
#           fixed cost = T(1) − hyperfine's mean (start-up, provenance, report) 0.15 s → 0.225 s
#           a step's cost at 8,000 over its cost at 1,000                     1.15 → 1.225
#           per-run median (the report's) over hyperfine's median             1.05 → 1.075
#   fsync:  the fsync loop through `platter run` over an untimed C loop, the median of 7
#           alternating rounds (fsync-run-vs-c.sh)                           1.05 → 1.32
#             (not met here: 1.19–1.21, the same before issue 46's changes; the excess
#             over 1, 0.21, times 1.5)
#   report: `platter report` of 1,000,000 samples (report_scale's store)     2 s → 3 s, 300 → 450 MiB
#
# Needs a release build (cargo build --release --bins), hyperfine, gcc and python3; the
# report group builds the report_scale bench. Prints a table; exits 1 if a figure is past
# its bound in every try.
set -euo pipefail
top=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
P=${P:-$top/target/release/platter}
tries=${GUARD_TRIES:-3}
only=${GUARD_ONLY:-steps fsync report}
[ -x "$P" ] || { echo "guard: no release build at $P (cargo build --release --bins)" >&2; exit 2; }
for tool in hyperfine gcc python3; do
  command -v "$tool" >/dev/null || { echo "guard: needs $tool" >&2; exit 2; }
done
shm=/dev/shm
[ -d "$shm" ] || shm=${TMPDIR:-/tmp}
work=$(mktemp -d "$shm/platter-guard.XXXXXX")
trap 'rm -rf "$work"' EXIT

# Each figure: "name value goal bound unit" lines in $work/figures, one per try; the best
# of the tries is judged.
figure() { echo "$1 $2 $3 $4 $5" >> "$work/figures"; }

for n in 1 1000 8000; do
  printf 'name: guard\nworkload: { command: { run: /bin/true } }\nrepeat: %s\n' "$n" > "$work/t$n.yaml"
done

# Seconds the whole `platter run` of N steps took; its JSON report in $work/r$N.json.
run_steps() {
  local n=$1 d="$work/run"
  rm -rf "$d"
  mkdir "$d"
  local s e
  s=$(date +%s%N)
  (cd "$d" && "$P" run "$work/t$n.yaml" --db "$d/s.db" --state-dir "$d/st" --format json \
     > "$work/r$n.json" 2> "$d/err") || { cat "$d/err" >&2; echo "guard: platter run failed" >&2; exit 1; }
  e=$(date +%s%N)
  python3 -c "print(($e - $s) / 1e9)"
}

steps_try() {
  # The reference first and last, so a drift of the machine within the try shows.
  hyperfine -N --warmup 20 --runs 1000 /bin/true --export-json "$work/hf1.json" > /dev/null 2>&1
  local t1 t1000 t8000
  t1=$(run_steps 1)
  t1000=$(run_steps 1000)
  t8000=$(run_steps 8000)
  hyperfine -N --warmup 20 --runs 1000 /bin/true --export-json "$work/hf2.json" > /dev/null 2>&1
  python3 - "$work" "$t1" "$t1000" "$t8000" >> "$work/figures" <<'PY'
import json, statistics, sys
work, t1, t1000, t8000 = sys.argv[1], *map(float, sys.argv[2:])
hf = [json.load(open(f"{work}/hf{i}.json"))["results"][0] for i in (1, 2)]
mean = statistics.mean(r["mean"] for r in hf)
median = statistics.mean(r["median"] for r in hf)
per1000 = (t1000 - t1) / 999
per8000 = (t8000 - t1) / 7999
report = json.load(open(f"{work}/r1000.json"))
wall = [m for m in report["cells"][0]["metrics"] if m["metric"] == "wall"][0]["median"]
print("overhead/step@1000", (per1000 - mean) * 1e3, 0.1, 0.15, "ms")
print("overhead/step@8000", (per8000 - mean) * 1e3, 0.1, 0.15, "ms")
print("fixed-cost", t1 - mean, 0.15, 0.225, "s")
print("step@8000/step@1000", per8000 / per1000, 1.15, 1.225, "x")
print("per-run-median/hyperfine", wall / median, 1.05, 1.075, "x")
print(f"  try: T(1) {t1:.3f} s, T(1000) {t1000:.3f} s, T(8000) {t8000:.3f} s, /bin/true mean {mean*1e3:.3f} ms median {median*1e3:.3f} ms, platter's median {wall*1e3:.3f} ms", file=sys.stderr)
PY
}

fsync_try() {
  local out
  out=$(PLATTER_BIN="$P" "$top/coordinator/benches/fsync-run-vs-c.sh" 7)
  echo "$out" | tail -1 >&2
  figure fsync/C "$(echo "$out" | awk '/^median ratio/ { print $3 }')" 1.05 1.32 x
}

report_fill() {
  # One store of 2 × 1,000,000 samples, filled once; each try times the report again.
  (cd "$top" && cargo bench -q -p platter --bench report_scale -- --samples 1000000 --metrics 6 \
     --formats json --keep "$work/rs") > "$work/rs.out"
  cat "$work/rs.out" >&2
  campaign=$(awk '/^again by hand/ { print $6 }' "$work/rs.out")
}

report_try() {
  local took rss
  /usr/bin/time -f "%e %M" -o "$work/time" "$P" report "$campaign" --db "$work/rs/report-scale.db" \
    --format json > /dev/null
  read -r took rss < "$work/time"
  figure report-1M-samples "$took" 2 3 s
  figure report-1M-peak-RSS "$(python3 -c "print($rss / 1024)")" 300 450 MiB
}

for group in $only; do
  [ "$group" = report ] && report_fill
  for t in $(seq "$tries"); do
    echo "== $group, try $t of $tries" >&2
    "${group}_try"
  done
done

python3 - "$work/figures" <<'PY'
import sys
best = {}
for line in open(sys.argv[1]):
    name, value, goal, bound, unit = line.split()
    value, goal, bound = float(value), float(goal), float(bound)
    tries = best.setdefault(name, (goal, bound, unit, []))[3]
    tries.append(value)
failed = 0
print(f"{'figure':<28} {'best':>9} {'tries':<30} {'goal':>7} {'bound':>7}  unit")
for name, (goal, bound, unit, values) in best.items():
    b = min(values)
    verdict = "ok" if b <= bound else "FAILED"
    failed += b > bound
    shown = ", ".join(f"{v:.3f}" for v in values)
    print(f"{name:<28} {b:>9.3f} {shown:<30} {goal:>7} {bound:>7}  {unit}  {verdict}")
sys.exit(1 if failed else 0)
PY
