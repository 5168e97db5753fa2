#!/usr/bin/env bash
# Per-operation write+fdatasync latency of the built-in fsync workload and of fio, on the
# same file on the same mount (DIR, default: a directory under the current one), through
# `platter run`, alternating the two campaigns ROUNDS times (default 3). Both write 1000
# blocks of 4 KiB one after the other into a preallocated file, each followed by fdatasync.
# Both start from a fresh file each run (fio: unlink=1; platter truncates), because writing
# into fallocated-but-unwritten blocks costs a journal commit per fdatasync that a reused,
# already written file does not. (Not a rewrite of one block: fio, made to wrap around a
# 4 KiB file, calls fdatasync twice per write.)
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
  fsync: { path: $dir/same.dat, size: 4096, count: 1000, sync: fdatasync, prealloc: true, advance: true }
repeat: 5
YAML
cat > fio.yaml <<YAML
name: cmp-fio
workload:
  fio:
    options: { filename: $dir/same.dat, rw: write, bs: 4k, size: 4000k, ioengine: sync, fdatasync: 1, fallocate: native, unlink: 1 }
repeat: 5
YAML
for i in $(seq "$rounds"); do
  "$platter" run --fresh fsync.yaml --format csv 2>/dev/null |
    awk -F, '$4 == "latency.mean" { printf "fsync workload: per-op mean %.1f us (median of 5 runs)\n", $8 * 1e6 }'
  "$platter" run --fresh fio.yaml --format csv 2>/dev/null |
    awk -F, '$4 == "write.lat.mean" { w = $8 } $4 == "sync.lat.mean" { s = $8 }
             END { printf "fio:            per-op mean %.1f us (write %.1f + fdatasync %.1f)\n", (w + s) * 1e6, w * 1e6, s * 1e6 }'
done
