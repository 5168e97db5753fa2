#!/usr/bin/env bash
# Idle agent footprint: RSS and CPU time of a connected platter-agent that has nothing
# to do, over SECONDS (default 60). Needs release binaries: cargo build --release --bins
set -euo pipefail
top=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
bin=$top/target/release
secs=${1:-60}
dir=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$bin/platter" serve --dangerously-insecure --listen "127.0.0.1:$port" --db "$dir/db" 2>"$dir/serve.log" &
serve=$!
sleep 0.5
"$bin/platter-agent" --dangerously-insecure --coordinator "http://127.0.0.1:$port" --name idle --state-dir "$dir/agent" 2>"$dir/agent.log" &
agent=$!
trap 'kill $agent $serve 2>/dev/null; rm -rf "$dir"' EXIT
sleep 2
grep -q connected "$dir/agent.log" || { echo "agent did not connect"; cat "$dir/agent.log"; exit 1; }
t0=$(awk '{print $14+$15}' /proc/$agent/stat)
sleep "$secs"
t1=$(awk '{print $14+$15}' /proc/$agent/stat)
hz=$(getconf CLK_TCK)
rss=$(awk '/VmRSS/ {print $2}' /proc/$agent/status)
hwm=$(awk '/VmHWM/ {print $2}' /proc/$agent/status)
threads=$(awk '/Threads/ {print $2}' /proc/$agent/status)
echo "idle agent over ${secs}s: RSS ${rss} KiB (peak ${hwm} KiB), ${threads} threads, CPU $(( (t1 - t0) * 1000 / hz )) ms"
