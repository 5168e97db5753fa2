#!/usr/bin/env bash
# Per-operation write+fdatasync latency of the built-in fsync workload and of fio, on the
# same file on the same mount (DIR, default: a directory under the current one), through
# `platter run`, alternating the two campaigns ROUNDS times (default 3). Both rewrite the
# same 4 KiB block 1000 times (fio: size 4k, io_size 4000k), as diskbenchmark does.
# Needs fio and a built platter (cargo build --release --bins).
set -euo pipefail
top=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
platter=$top/target/release/platter
dir=$(realpath "${1:-./fsync-vs-fio}")
rounds=${2:-3}
mkdir -p "$dir"
cd "$dir"
cat > fsync.yaml <<YAML
name: cmp-fsync
workload:
  fsync: { path: $dir/same.dat, size: 4096, count: 1000, sync: fdatasync, prealloc: true }
repeat: 5
YAML
cat > fio.yaml <<YAML
name: cmp-fio
workload:
  fio:
    options: { filename: $dir/same.dat, rw: write, bs: 4k, size: 4k, io_size: 4000k, ioengine: sync, fdatasync: 1 }
repeat: 5
YAML
for i in $(seq "$rounds"); do
  "$platter" run --fresh fsync.yaml --format csv 2>/dev/null |
    awk -F, '$4 == "latency.mean" { printf "fsync workload: per-op mean %.1f us (median of 5 runs)\n", $8 * 1e6 }'
  "$platter" run --fresh fio.yaml --format csv 2>/dev/null |
    awk -F, '$4 == "write.lat.mean" { w = $8 } $4 == "sync.lat.mean" { s = $8 }
             END { printf "fio:            per-op mean %.1f us (write %.1f + fdatasync %.1f)\n", (w + s) * 1e6, w * 1e6, s * 1e6 }'
done
