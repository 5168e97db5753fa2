#!/usr/bin/env bash
# Per-run wall time of trivial commands as platter measures them (platter run, release
# build) next to hyperfine -N. Needs hyperfine (apt install hyperfine) and release
# binaries: cargo build --release --bins. Issue 12's per-run target (1000 × /bin/true,
# store and journal on tmpfs, platter's median over hyperfine's in alternating rounds) has
# its own script: per-run-median.sh.
set -euo pipefail
top=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
runs=${1:-300}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat > "$dir/trivial.yaml" <<YAML
name: trivial
matrix:
  command: [/bin/true, "/usr/bin/seq 1 10000"]
workload:
  command:
    run: \${command}
repeat: $runs
YAML
cd "$dir"
echo "platter (median, mean in ms):"
"$top/target/release/platter" run trivial.yaml --format csv 2>/dev/null |
  awk -F, '$5 == "wall" { printf "  %-22s %.3f  %.3f\n", $4, $9 * 1000, $10 * 1000 }'
hf() {
  hyperfine -N --warmup 5 --runs "$runs" "$@" /bin/true "/usr/bin/seq 1 10000" --export-json hf.json >/dev/null 2>&1
  python3 -c "
import json
for r in json.load(open('hf.json'))['results']:
    print('  %-22s %.3f  %.3f' % (r['command'], r['median'] * 1000, r['mean'] * 1000))"
}
echo "hyperfine -N, runs back to back (median, mean in ms):"
hf
# platter runs other steps (journal, acks) between measurements, so the CPU idles
# between runs; this is hyperfine under the same condition.
echo "hyperfine -N --prepare 'sleep 0.005' (median, mean in ms):"
hf --prepare "sleep 0.005"
