#!/usr/bin/env bash
# The built-in fsync loop as users run it — `platter run` of an `fsync` workload (one
# process: coordinator, agent, runtime threads) — against an untimed C loop of the same
# operations, alternating ROUNDS times (default 9): 200,000 × write of 1 byte +
# fdatasync into a preallocated file on /dev/shm (where fdatasync is just the system call),
# the file's position advancing. Prints each round's ns per operation (platter: the
# median of its 3 repetitions' wall / count) and the median ratio.
# Needs gcc and a release build (cargo build --release --bin platter).
set -euo pipefail
top=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
platter=${PLATTER_BIN:-$top/target/release/platter}
rounds=${1:-9}
work=$(mktemp -d)
shm=$(mktemp -d /dev/shm/fsync-run-vs-c.XXXXXX)
trap 'rm -rf "$work" "$shm"' EXIT
cat > "$work/loop.c" <<'C'
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
int main(int argc, char **argv) {
    long n = atol(argv[2]);
    int fd = open(argv[1], O_CREAT | O_TRUNC | O_WRONLY, 0644);
    if (fd < 0 || posix_fallocate(fd, 0, n) != 0) { perror(argv[1]); return 1; }
    char b = 'x';
    struct timespec a, z;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++)
        if (write(fd, &b, 1) != 1 || fdatasync(fd) != 0) { perror("write"); return 1; }
    clock_gettime(CLOCK_MONOTONIC, &z);
    printf("%.1f\n", ((z.tv_sec - a.tv_sec) * 1e9 + (z.tv_nsec - a.tv_nsec)) / n);
    return 0;
}
C
gcc -O2 -o "$work/loop" "$work/loop.c"
cat > "$work/fsync.yaml" <<YAML
name: fsync-run-vs-c
hosts: { names: [local] }
workload:
  fsync: { path: $shm/platter.dat, size: 1, count: 200000, sync: fdatasync, advance: true, prealloc: true }
repeat: 3
YAML
ratios=()
for i in $(seq "$rounds"); do
  c=$("$work/loop" "$shm/c.dat" 200000)
  rm -rf "$work/run"
  p=$("$platter" run "$work/fsync.yaml" --db "$work/run/p.db" --state-dir "$work/run/agent" \
        --format csv-samples 2>/dev/null |
      awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
               $col["metric"] == "wall" { print $col["value"] * 1e9 / 200000 }' |
      sort -n | sed -n 2p)
  r=$(awk -v p="$p" -v c="$c" 'BEGIN { printf "%.3f", p / c }')
  ratios+=("$r")
  echo "round $i: platter run $p ns/op, C $c ns/op, ratio $r"
done
printf '%s\n' "${ratios[@]}" | sort -n | awk '{ a[NR] = $1 } END { printf "median ratio %s (min %s, max %s) over %d rounds\n", a[int((NR + 1) / 2)], a[1], a[NR], NR }'
