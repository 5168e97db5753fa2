#!/usr/bin/env bash
# A platter lab in containers: a coordinator and three agents (rc66, rcmonster, flygecko),
# each agent with its own loop-device drive, built from local files only (no registry).
#
#   deploy/lab/lab.sh [--bin PLATTER] up       build the image, make the drives, start it
#   deploy/lab/lab.sh run                      submit campaign.yaml, print the report, check
#                                              that every expected sample arrived
#   deploy/lab/lab.sh agents                   the agents and their drives
#   deploy/lab/lab.sh logs [SERVICE]           container logs
#   deploy/lab/lab.sh down                     remove containers, volumes, network, drives
#   deploy/lab/lab.sh qualify                  qualify.yaml: thresholds per drive, JUnit XML
#   deploy/lab/lab.sh peers                    peers.yaml LAB_PEER_RUNS times over every
#                                              agent's drives (its own and its peer drives,
#                                              one model), then `platter peers`: flygecko's
#                                              throttled drive must be the one outlier
#   deploy/lab/lab.sh ci                       up (flygecko's drive throttled); run; qualify;
#                                              peers; down (always) — non-zero on failure
#   deploy/lab/lab.sh faults N                 the fault suite: up; campaigns (faults.yaml) back
#                                              to back while N random faults are injected one
#                                              at a time (agent SIGKILL, container restart,
#                                              coordinator SIGKILL, agent SIGSTOP past the
#                                              heartbeat timeout, network partition, the
#                                              coordinator's /data full); then every campaign
#                                              must be done with each sample stored once and
#                                              its teardown run, every agent connected; down
#                                              (always) — non-zero on failure. Faults are
#                                              logged to $LAB_WORK/faults.log; results,
#                                              reports, a copy of the database and the
#                                              container logs stay in $LAB_WORK/faults
#   deploy/lab/lab.sh context DIR              only assemble the image's build context
#
# Needs root (losetup), docker, docker-compose (or `docker compose`), python3, and for the
# FROM-scratch image busybox-static (`apt-get install busybox-static`).
#
# Settings (environment):
#   PLATTER_BIN     the platter binary [target/release/platter, built if missing]
#   LAB_TLS         1: mutual TLS with certificates from `platter certs` (default);
#                   0: plaintext gRPC (--dangerously-insecure), for binaries without TLS
#   LAB_WORK        drive images, certificates, reports [/var/tmp/platter-lab]
#   LAB_PORT        coordinator port on 127.0.0.1 [7461]
#   LAB_IMAGE       image tag [platter-lab:latest]; LAB_BASE base image [scratch]
#   LAB_DRIVE_SIZE  size of each drive image [256M]
#   LAB_PEER_DRIVES drives each agent has besides its own, for `peers` [3]; every drive
#                   is named model PLATTER LAB DRIVE, serial LAB-HOST-N in the agent's udev
#                   database (docker-compose.yml says how), so the drives are peers
#   LAB_PEER_RUNS   how many times `peers` runs peers.yaml [5: Holm over 12 drives at 1%
#                   needs 5 runs a drive to call one different at all]
#   LAB_CAMPAIGN    campaign file [deploy/lab/campaign.yaml]
#   LAB_METRIC, LAB_EXPECT_CELLS
#                   what `run` checks: every host has LAB_EXPECT_CELLS cells [2], each with
#                   `repeat` samples of LAB_METRIC [wall]
#   LAB_TIMEOUT     seconds `run` waits for the campaign [900]
#   LAB_WAIT        seconds `up` waits for the agents to connect [90]
#   LAB_PROJECT     compose project name [platter-lab]
#   LAB_COMPOSE     compose command [docker-compose if installed, else docker compose]
#   RC66_WRITE_IOPS, RCMONSTER_WRITE_IOPS, FLYGECKO_WRITE_IOPS
#                   cgroup write IOPS limit of that host's drive [0 = none]
#   LAB_HA          1: two coordinators (coordinator, coordinator-b) on one PostgreSQL
#                   database (service postgres, docker-compose.ha.yml), every agent given
#                   both; `run` checks both give the same report; the fault suite kills
#                   either coordinator and kills, pauses or freezes (SIGSTOP) the database,
#                   checking health and status while it is frozen [0: one coordinator
#                   on SQLite]. Needs Debian's postgresql package on this machine: its files
#                   make the database image (Dockerfile.postgres)
#   LAB_PORT_B      coordinator-b's port on 127.0.0.1 [7462]
#   LAB_PG_IMAGE    the database image's tag [platter-lab-postgres:latest]
#   LAB_PG_PASSWORD the database password of the role platter [platter-lab]
# The fault suite (`faults N`):
#   LAB_SEED        seed of every random choice (kind, target, pauses, durations) [random,
#                   printed at the start and in faults.log]
#   LAB_FAULT_KINDS the kinds to draw from [agent-kill agent-restart coordinator-kill
#                   agent-stop partition disk-full; with LAB_HA=1: agent-kill agent-restart
#                   coordinator-kill agent-stop partition db-kill db-pause db-freeze]
#   LAB_FAULT_ROUNDS
#                   1: draw the kinds in rounds, each kind once per round in a random order,
#                   so that a short run has every kind; 0: each fault's kind independently [0]
#   LAB_PARTITION   seconds a network partition lasts [30]
#   LAB_FREEZE      "MIN MAX" seconds PostgreSQL stays stopped in a db-freeze, and as long
#                   as its checks take (8-10 s when health never fails) [5 30, or 5
#                   LAB_PARTITION if that is shorter]
#   LAB_HEARTBEAT   the coordinator's --heartbeat-timeout; a SIGSTOP lasts 2-8 s more [10]
#   LAB_GAP         "MIN MAX" seconds of pause after a fault's recovery [2 10]
#   LAB_RECOVERY_TIMEOUT
#                   seconds the lab may take to recover from a fault before it counts as
#                   wedged and the suite fails [180]
#   LAB_FAULT_CAMPAIGN, LAB_FAULT_REPEAT
#                   the campaign run back to back [deploy/lab/faults.yaml], and its
#                   `repeat:` if set (shorter campaigns: the last one ends sooner)
#   LAB_DATA_SIZE   size of the tmpfs that is the coordinator's /data [256M]
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
default_bin=$repo/target/release/platter

PLATTER_BIN=${PLATTER_BIN:-$default_bin}
LAB_TLS=${LAB_TLS:-1}
LAB_WORK=${LAB_WORK:-/var/tmp/platter-lab}
LAB_PORT=${LAB_PORT:-7461}
LAB_IMAGE=${LAB_IMAGE:-platter-lab:latest}
LAB_BASE=${LAB_BASE:-scratch}
LAB_BUSYBOX=${LAB_BUSYBOX:-/bin/busybox}
LAB_DRIVE_SIZE=${LAB_DRIVE_SIZE:-256M}
LAB_PEER_DRIVES=${LAB_PEER_DRIVES:-3}
LAB_PEER_RUNS=${LAB_PEER_RUNS:-5}
LAB_CAMPAIGN=${LAB_CAMPAIGN:-$here/campaign.yaml}
LAB_METRIC=${LAB_METRIC:-wall}
LAB_EXPECT_CELLS=${LAB_EXPECT_CELLS:-2}
LAB_TIMEOUT=${LAB_TIMEOUT:-900}
LAB_PROJECT=${LAB_PROJECT:-platter-lab}
LAB_FAULT_CAMPAIGN=${LAB_FAULT_CAMPAIGN:-$here/faults.yaml}
LAB_PARTITION=${LAB_PARTITION:-30}
LAB_HEARTBEAT=${LAB_HEARTBEAT:-10}
LAB_GAP=${LAB_GAP:-2 10}
# 5-30 s, at most LAB_PARTITION (not under 5) when that is shorter (CI's 10 s partitions).
LAB_FREEZE=${LAB_FREEZE:-5 $((LAB_PARTITION < 5 ? 5 : LAB_PARTITION < 30 ? LAB_PARTITION : 30))}
LAB_DATA_SIZE=${LAB_DATA_SIZE:-256M}
LAB_RECOVERY_TIMEOUT=${LAB_RECOVERY_TIMEOUT:-180}
LAB_HA=${LAB_HA:-0}
LAB_PORT_B=${LAB_PORT_B:-7462}
LAB_PG_IMAGE=${LAB_PG_IMAGE:-platter-lab-postgres:latest}
LAB_PG_PASSWORD=${LAB_PG_PASSWORD:-platter-lab}
AGENTS=(rc66 rcmonster flygecko)

pki=$LAB_WORK/pki
drives=$LAB_WORK/drives
envfile=$LAB_WORK/lab.env
peers_compose=$LAB_WORK/compose.peers.yml
out=$LAB_WORK/run
data_dir=$LAB_WORK/data

log() { printf 'lab: %s\n' "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}
# Prints a command, then runs it.
run() {
  printf '+' >&2
  printf ' %q' "$@" >&2
  printf '\n' >&2
  "$@"
}

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }

need_root() {
  [ "$(id -u)" = 0 ] || die "$1 needs root (losetup and docker); run it with sudo"
}

# The compose command: docker-compose 1.29 (Debian 12) or the docker CLI plugin.
compose() {
  local c
  if [ -n "${LAB_COMPOSE:-}" ]; then
    read -r -a c <<<"$LAB_COMPOSE"
  elif command -v docker-compose >/dev/null 2>&1; then
    c=(docker-compose)
  else
    c=(docker compose)
  fi
  c+=(-p "$LAB_PROJECT" -f "$here/docker-compose.yml")
  [ "$LAB_HA" = 0 ] || c+=(-f "$here/docker-compose.ha.yml")
  [ ! -f "$peers_compose" ] || c+=(-f "$peers_compose")
  run "${c[@]}" "$@"
}

# What the compose file reads. The drives come from lab.env once `up` made them.
export_compose_env() {
  export LAB_IMAGE LAB_PORT LAB_PKI="$pki" LAB_PORT_B LAB_PG_IMAGE LAB_PG_PASSWORD
  if [ "$LAB_TLS" = 1 ]; then
    export LAB_SCHEME=https LAB_SECURITY_FLAGS="--tls-dir /pki"
  else
    export LAB_SCHEME=http LAB_SECURITY_FLAGS=--dangerously-insecure
  fi
  export LAB_COORDINATOR_URL=$LAB_SCHEME://coordinator:7461
  if [ -f "$envfile" ]; then
    # shellcheck disable=SC1090
    . "$envfile"
  fi
  local a var
  for a in "${AGENTS[@]}"; do
    var=${a^^}_DEV
    export "$var=${!var:-}"
  done
}

# platter SUBCOMMAND … as an operator on this machine, talking to the published
# coordinator port. OP_TIMEOUT=SECONDS bounds the command (--foreground: Ctrl-C reaches it).
#
# With two coordinators (LAB_HA=1) OP_VIA picks the one: a (coordinator), b
# (coordinator-b) or any (either, drawn per call; SRANDOM leaves the fault suite's seeded
# RANDOM sequence alone) [any].
platter_op() {
  local sub=$1 env flags=() port=$LAB_PORT
  shift
  if [ "$LAB_HA" = 1 ]; then
    case ${OP_VIA:-any} in
      a) ;;
      b) port=$LAB_PORT_B ;;
      *) [ $((SRANDOM % 2)) = 0 ] || port=$LAB_PORT_B ;;
    esac
  fi
  if [ "$LAB_TLS" = 1 ]; then
    env=("PLATTER_COORDINATOR=https://127.0.0.1:$port" "PLATTER_TLS_DIR=$pki/operator-lab")
  else
    env=("PLATTER_COORDINATOR=http://127.0.0.1:$port")
    # Clients ask for plaintext explicitly; before mutual TLS an http:// address was enough.
    flags=(--dangerously-insecure)
  fi
  local argv=(env "${env[@]}" ${OP_TIMEOUT:+timeout --foreground "$OP_TIMEOUT"} "$PLATTER_BIN" "$sub" "${flags[@]}" "$@")
  # OP_QUIET=1: without printing the command (the fault suite polls every second).
  if [ -n "${OP_QUIET:-}" ]; then
    "${argv[@]}"
  else
    run "${argv[@]}"
  fi
}

ensure_binary() {
  [ -z "${binary_checked:-}" ] || return 0
  if [ ! -x "$PLATTER_BIN" ]; then
    [ "$PLATTER_BIN" = "$default_bin" ] || die "$PLATTER_BIN is not an executable"
    log "no $PLATTER_BIN yet: building it (a few minutes)"
    (cd "$repo" && run cargo build --release --bin platter)
  fi
  log "binary: $PLATTER_BIN ($("$PLATTER_BIN" --version))"
  binary_checked=1
}

# add_libraries ROOTFS FILE…: every library `ldd` resolves for the files (`name => /path
# (addr)`) and the loader (`/path (addr)`), each at the path the binary and the loader
# look for it.
add_libraries() {
  local rootfs=$1 f lib
  shift
  for f in "$@"; do
    if ldd "$f" | grep -q 'not found'; then
      die "ldd cannot resolve every library of $f"
    fi
  done
  while read -r lib; do
    [ -e "$rootfs$lib" ] && continue
    mkdir -p "$rootfs$(dirname "$lib")"
    cp -L "$lib" "$rootfs$lib"
  done < <(for f in "$@"; do ldd "$f"; done |
    awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' | sort -u)
}

# add_busybox ROOTFS: a static busybox with every applet as /bin/NAME, /tmp, /var/tmp.
add_busybox() {
  local rootfs=$1 applet
  [ -x "$LAB_BUSYBOX" ] || die "no $LAB_BUSYBOX: apt-get install -y busybox-static"
  if ldd "$LAB_BUSYBOX" >/dev/null 2>&1; then
    die "$LAB_BUSYBOX is dynamically linked; the image needs a static one (apt-get install -y busybox-static)"
  fi
  mkdir -p "$rootfs/bin" "$rootfs/etc" "$rootfs/root" "$rootfs/tmp" "$rootfs/var/tmp"
  chmod 1777 "$rootfs/tmp" "$rootfs/var/tmp"
  install -m 0755 "$LAB_BUSYBOX" "$rootfs/bin/busybox"
  # Debian's busybox has no mkfs.* or hdparm applets, so a campaign that formats fails
  # with "cannot run mkfs.ext4" rather than running a look-alike.
  for applet in $("$LAB_BUSYBOX" --list); do
    [ "$applet" = busybox ] || ln -s busybox "$rootfs/bin/$applet"
  done
}

# The image's build context: rootfs/ (binary, its libraries and loader, busybox, /etc)
# and the Dockerfile.
cmd_context() {
  local dir=${1:?usage: lab.sh context DIR}
  local rootfs=$dir/rootfs
  ensure_binary
  mkdir -p "$rootfs/usr/local/bin"
  install -m 0755 "$PLATTER_BIN" "$rootfs/usr/local/bin/platter"
  cp "$here/Dockerfile" "$dir/Dockerfile"
  if [ "$LAB_BASE" != scratch ]; then
    log "context: the binary only (base image $LAB_BASE brings the userland)"
    return
  fi
  add_libraries "$rootfs" "$PLATTER_BIN"
  add_busybox "$rootfs"
  printf 'root:x:0:0:root:/root:/bin/sh\n' >"$rootfs/etc/passwd"
  printf 'root:x:0:\n' >"$rootfs/etc/group"
  printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$rootfs/etc/nsswitch.conf"
  log "context: $dir ($(du -sh "$rootfs" | cut -f1): platter, $(find "$rootfs" -name '*.so*' | wc -l) libraries, busybox with $(find "$rootfs/bin" -type l | wc -l) applets)"
}

# The PostgreSQL image's build context (Dockerfile.postgres): the server from the
# `postgresql` package installed on this machine, its libraries, busybox, the entry point.
pg_context() {
  local dir=${1:?} rootfs=$1/rootfs pg bins=() f
  pg=$(pg_home) || die "no PostgreSQL server here for the lab's database image: apt-get install -y postgresql"
  # home/data: PGDATA, there in the image so that a new volume mounted on it (or on its
  # parent) takes the server user's ownership.
  mkdir -p "$rootfs$pg/bin" "$rootfs$pg/lib" "$rootfs/usr/share/postgresql" "$rootfs/usr/local/bin" "$dir/home/data"
  chmod 0700 "$dir/home/data"
  for f in postgres initdb psql pg_isready; do
    install -m 0755 "$pg/bin/$f" "$rootfs$pg/bin/$f"
    bins+=("$pg/bin/$f")
  done
  # The server's modules (PL/pgSQL, text search dictionaries, …) but not the LLVM JIT
  # (a 100 MB library; the entry point turns JIT off).
  for f in "$pg"/lib/*.so; do
    case ${f##*/} in llvmjit*) continue ;; esac
    cp "$f" "$rootfs$pg/lib/"
    bins+=("$f")
  done
  cp -a "/usr/share/postgresql/${pg##*/}" "$rootfs/usr/share/postgresql/"
  mkdir -p "$rootfs/usr/share"
  cp -a /usr/share/zoneinfo "$rootfs/usr/share/"
  add_libraries "$rootfs" "${bins[@]}"
  add_busybox "$rootfs"
  install -m 0755 "$here/postgres-entrypoint.sh" "$rootfs/usr/local/bin/platter-postgres"
  # initdb looks its user up by uid.
  printf 'root:x:0:0:root:/root:/bin/sh\npostgres:x:999:999:PostgreSQL:/var/lib/postgresql:/bin/sh\n' >"$rootfs/etc/passwd"
  printf 'root:x:0:\npostgres:x:999:\n' >"$rootfs/etc/group"
  printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$rootfs/etc/nsswitch.conf"
  cp "$here/Dockerfile.postgres" "$dir/Dockerfile"
  log "context: $dir ($(du -sh "$rootfs" | cut -f1): PostgreSQL ${pg##*/}, $(find "$rootfs" -name '*.so*' | wc -l) libraries)"
}

# The newest PostgreSQL server installed here, e.g. /usr/lib/postgresql/15.
pg_home() {
  local v
  # The newest version with a server (a newer client-only one may sit beside it).
  v=$(for d in /usr/lib/postgresql/*/bin/postgres; do [ -x "$d" ] && basename "$(dirname "$(dirname "$d")")"; done | sort -V | tail -n1)
  [ -n "$v" ] && printf '/usr/lib/postgresql/%s' "$v"
}

cmd_build() {
  local ctx=$LAB_WORK/context start=$SECONDS
  rm -rf "$ctx"
  mkdir -p "$ctx"
  cmd_context "$ctx"
  run docker build -t "$LAB_IMAGE" --build-arg "BASE=$LAB_BASE" "$ctx"
  rm -rf "$ctx"
  if [ "$LAB_HA" = 1 ]; then
    mkdir -p "$ctx"
    pg_context "$ctx"
    run docker build -t "$LAB_PG_IMAGE" --build-arg "PG_VERSION=$(basename "$(pg_home)")" "$ctx"
    rm -rf "$ctx"
  fi
  rmdir "$LAB_WORK" 2>/dev/null || true # when only the image was asked for
  log "image $LAB_IMAGE$([ "$LAB_HA" = 0 ] || echo " and $LAB_PG_IMAGE") built in $((SECONDS - start)) s"
}

# Certificates: a CA, one identity per coordinator (`coordinator`, and `coordinator-b` of
# LAB_HA=1, each reached by its name inside the lab network and as 127.0.0.1/localhost
# from this machine), one agent identity per host, one operator. What exists is reused
# (`platter certs issue` never replaces an identity unasked).
make_pki() {
  local a c
  if [ "$LAB_TLS" != 1 ]; then
    # Plaintext: the directories the compose files mount only have to exist.
    mkdir -p "$pki/coordinator-coordinator" "$pki/coordinator-coordinator-b" "${AGENTS[@]/#/$pki/agent-}"
    return
  fi
  if [ -f "$pki/ca/ca.pem" ]; then
    log "certificates: reusing the CA in $pki"
  else
    run "$PLATTER_BIN" certs init --dir "$pki"
  fi
  issue_once() { # DIR ROLE NAME…
    local dir=$1
    shift
    [ -f "$pki/$dir/cert.pem" ] || run "$PLATTER_BIN" certs issue "$@" --dir "$pki"
  }
  for c in coordinator coordinator-b; do
    issue_once "coordinator-$c" coordinator "$c" localhost 127.0.0.1
  done
  for a in "${AGENTS[@]}"; do
    issue_once "agent-$a" agent "$a"
  done
  issue_once operator-lab operator lab
}

# The loop device of image file $1, attached if it is not yet.
attach() {
  local img=$1 dev
  [ -f "$img" ] || run truncate -s "$LAB_DRIVE_SIZE" "$img" >&2
  dev=$(losetup -j "$img" | cut -d: -f1 | head -n1)
  [ -n "$dev" ] || dev=$(run losetup --find --show "$img")
  printf '%s\n' "$dev"
}

# One image file and loop device per agent, and LAB_PEER_DRIVES more each for `peers`;
# lab.env records which, and compose.peers.yml passes the peer drives to their agents.
make_drives() {
  local a i img dev peers
  mkdir -p "$drives"
  : >"$envfile.new"
  printf 'version: "2.4"\nservices:\n' >"$peers_compose.new"
  for a in "${AGENTS[@]}"; do
    dev=$(attach "$drives/$a.img")
    log "drive of $a: $dev ($drives/$a.img)"
    printf '%s_DEV=%s\n' "${a^^}" "$dev" >>"$envfile.new"
    peers=()
    for ((i = 1; i <= LAB_PEER_DRIVES; i++)); do
      peers+=("$(attach "$drives/$a-peer$i.img")")
    done
    [ "${#peers[@]}" = 0 ] || log "peer drives of $a: ${peers[*]}"
    {
      printf '  %s:\n    environment:\n      LAB_PEERS: "%s"\n' "$a" "${peers[*]}"
      [ "${#peers[@]}" = 0 ] || printf '    devices:\n'
      for dev in "${peers[@]}"; do printf '      - %s\n' "$dev"; done
    } >>"$peers_compose.new"
  done
  mv "$envfile.new" "$envfile"
  mv "$peers_compose.new" "$peers_compose"
}

# Until every agent has said hello with its drive (by-id link platter-lab-drive).
wait_agents() {
  local deadline=$((SECONDS + ${LAB_WAIT:-90})) inv
  log "waiting for ${AGENTS[*]} to connect"
  while :; do
    if inv=$(platter_op inventory --format json 2>/dev/null) &&
      printf '%s' "$inv" | python3 -c '
import json, sys
inv = json.load(sys.stdin)
sys.exit(0 if all(any("platter-lab-drive" in d.get("by_id", []) for d in inv.get(h, []))
                  for h in sys.argv[1:]) else 1)
' "${AGENTS[@]}"; then
      log "all agents connected"
      return 0
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      compose ps || true
      compose logs --no-color --tail=30 || true
      die "the agents did not all connect within ${LAB_WAIT:-90} s (logs above)"
    fi
    sleep 2
  done
}

cmd_up() {
  local start=$SECONDS
  need_root up
  command -v python3 >/dev/null || die "python3 is needed (agent and report checks)"
  log "mode: $([ "$LAB_TLS" = 1 ] && echo 'mutual TLS' || echo 'plaintext (LAB_TLS=0)'), work dir $LAB_WORK"
  ensure_binary
  mkdir -p "$LAB_WORK"
  cmd_build
  make_pki
  make_drives
  export_compose_env
  compose up -d
  wait_agents
  cmd_agents
  log "up in $((SECONDS - start)) s; next: $0 run"
}

cmd_agents() {
  export_compose_env
  platter_op agents
  platter_op inventory
}

# Checks the JSON report: state done, no failed step, no refused plan, no measurement
# missing, every host's provenance (kernel, drives) on record, and every host has
# LAB_EXPECT_CELLS cells, the same matrix points, each with `repeat` stored samples of
# LAB_METRIC.
check_report() {
  python3 - "$1" "$LAB_METRIC" "$LAB_EXPECT_CELLS" "${AGENTS[@]}" <<'EOF'
import json, sys

path, metric, expect_cells, hosts = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
r = json.load(open(path))
repeat = r["repeat"]
problems = []
if r["state"] != "done":
    problems.append(f"campaign state is {r['state']}, not done")
if r["steps_failed"]:
    problems.append(f"{r['steps_failed']} step(s) failed: " + "; ".join(
        f"{f['host']} {f['step']} rep {f['repetition']}: {f['error']}" for f in r["failures"]))
for ref in r["refused"]:
    problems.append(f"{ref['host']} refused its plan: {ref['reason']}")
if r.get("measurements_missing"):
    problems.append(f"{r['measurements_missing']} of {r['measurements_expected']} measurements missing")
described = {s["host"] for s in r.get("provenance", []) if s["facts"].get("host")}
for h in sorted(set(hosts) - described):
    problems.append(f"{h}: no provenance (kernel, drives) in the report")
others = sorted({c["host"] for c in r["cells"]} - set(hosts))
if others:
    problems.append(f"cells of unexpected hosts: {', '.join(others)}")

def point(c):  # the matrix point; `device` differs from host to host
    return tuple(sorted((k, v) for k, v in c["params"].items() if k != "device"))

points = {point(c) for c in r["cells"]}
for h in hosts:
    cells = [c for c in r["cells"] if c["host"] == h]
    counts = []
    for c in cells:
        m = next((m for m in c["metrics"] if m["metric"] == metric), None)
        # Every stored sample with a value, not a summary's count.
        n = sum(1 for x in m["samples"] if x["value"] is not None) if m else 0
        counts.append(n)
        if n != repeat:
            params = " ".join(f"{k}={v}" for k, v in c["params"].items())
            problems.append(f"{h} cell {params}: {n} of {repeat} samples of {metric}")
    missing = points - {point(c) for c in cells}
    if missing:
        problems.append(f"{h} lacks {len(missing)} matrix point(s) the other hosts ran")
    if len(cells) != expect_cells:
        problems.append(f"{h} has {len(cells)} cells, expected {expect_cells} (LAB_EXPECT_CELLS)")
    print(f"check: {h}: {len(cells)} cells, samples of {metric} per cell: {counts or 'none'}")
if problems:
    for p in problems:
        print(f"check FAILED: {p}")
    sys.exit(1)
total = len(hosts) * expect_cells * repeat
print(f"check: ok, {len(hosts)} hosts × {expect_cells} cells × {repeat} repetitions = {total} samples of {metric}")
EOF
}

cmd_run() {
  local start=$SECONDS id status=0
  command -v python3 >/dev/null || die "python3 is needed for the report check"
  [ -f "$envfile" ] || die "the lab is not up ($envfile missing): $0 up"
  export_compose_env
  mkdir -p "$out"
  # Planned against the live fleet: the hosts, their drives, every step.
  platter_op validate "$LAB_CAMPAIGN" >"$out/validate.txt" || {
    cat "$out/validate.txt"
    die "invalid campaign"
  }
  sed -n '1,/^plan for host/{/^plan for host/d;p}' "$out/validate.txt"
  log "(each host's plan: $out/validate.txt)"
  log "submitting; the report follows when all hosts are done (at most $LAB_TIMEOUT s)"
  [ "$LAB_HA" = 0 ] || log "two coordinators: agents connected to $(agents_where); submitting through coordinator"
  OP_VIA=a OP_TIMEOUT=$LAB_TIMEOUT platter_op submit "$LAB_CAMPAIGN" --watch | tee "$out/submit.txt" || status=$?
  id=$(head -n1 "$out/submit.txt")
  [ -n "$id" ] || die "submit printed no campaign id (exit status $status)"
  case $status in
    0) ;;
    124) log "the campaign did not finish within $LAB_TIMEOUT s (LAB_TIMEOUT)" ;;
    *) log "submit exited with status $status (1: a step failed or a plan was refused)" ;;
  esac
  OP_VIA=a platter_op report "$id" --format json >"$out/report.json" || true
  [ -s "$out/report.json" ] || die "no report of campaign $id"
  log "campaign $id: checking $out/report.json ($((SECONDS - start)) s)"
  check_report "$out/report.json"
  if [ "$LAB_HA" = 1 ]; then
    # Any coordinator gives the same answer: the report through the other one.
    OP_VIA=b platter_op report "$id" --format json >"$out/report-b.json" || true
    cmp -s "$out/report.json" "$out/report-b.json" ||
      die "coordinator-b's report of $id differs from coordinator's ($out/report.json, $out/report-b.json)"
    log "coordinator-b gives the same report, byte for byte"
  fi
  [ "$status" = 0 ] || die "submit exited with status $status"
}

cmd_logs() {
  export_compose_env
  compose logs --no-color --tail="${LAB_LOG_LINES:-200}" "$@"
}

# Removes everything `up` made. It carries on past errors, so that it also cleans up
# after a half-finished `up`, and says what it could not remove.
cmd_down() {
  local a var img dev kind failed=0 ids=()
  local label=com.docker.compose.project=$LAB_PROJECT
  need_root down
  set +e
  export_compose_env
  # Placeholders, so that the compose file interpolates when `up` never recorded drives.
  for a in "${AGENTS[@]}"; do
    var=${a^^}_DEV
    [ -n "${!var}" ] || export "$var=/dev/null"
  done
  compose down -v --remove-orphans --timeout 10 || failed=1
  # Whatever compose left (e.g. the compose file changed in between).
  for kind in container volume network; do
    if [ "$kind" = container ]; then
      mapfile -t ids < <(docker ps -aq --filter "label=$label")
    else
      mapfile -t ids < <(docker "$kind" ls -q --filter "label=$label")
    fi
    [ "${#ids[@]}" = 0 ] || run docker "$kind" rm -f "${ids[@]}" || failed=1
  done
  for img in "$drives"/*.img; do
    [ -e "$img" ] || continue
    for dev in $(losetup -j "$img" | cut -d: -f1); do
      run losetup -d "$dev" || failed=1
    done
    run rm -f "$img" || failed=1
  done
  run rm -f "$peers_compose" || failed=1
  # The fault suite's coordinator /data (a tmpfs of LAB_DATA_SIZE).
  if mountpoint -q "$data_dir"; then
    run umount "$data_dir" || failed=1
  fi
  [ ! -d "$data_dir" ] || rmdir "$data_dir" || failed=1
  run rm -rf "$pki" "$out" "$LAB_WORK/context" "$envfile" "$envfile.new"
  rmdir "$drives" "$LAB_WORK" 2>/dev/null
  set -e
  log "the image $LAB_IMAGE is kept (docker rmi $LAB_IMAGE removes it)"
  [ "$failed" = 0 ] || die "down could not remove everything (see above)"
  log "down: containers, volumes, network and drives removed"
}

# A qualification across the fleet where one drive is slow: flygecko's drive is throttled
# by its cgroup (FLYGECKO_WRITE_IOPS, set by `ci`), so `qualify.yaml`'s threshold must FAIL
# for flygecko's drive only, the submit must exit 1, and the JUnit XML must name it.
cmd_qualify() {
  local id status=0
  [ -f "$envfile" ] || die "the lab is not up ($envfile missing): $0 up"
  export_compose_env
  mkdir -p "$out"
  OP_TIMEOUT=$LAB_TIMEOUT platter_op submit "$here/qualify.yaml" --watch | tee "$out/qualify.txt" || status=$?
  id=$(head -n1 "$out/qualify.txt")
  [ -n "$id" ] || die "submit printed no campaign id (exit status $status)"
  [ "$status" = 1 ] || die "a qualification with a failing drive must exit 1, not $status"
  platter_op report "$id" --format table --junit "$out/qualify.xml" >"$out/qualify-report.txt" || true
  # Loop drives: health read before and after, "not readable" with the reason, never zeros.
  for host in rc66 rcmonster flygecko; do
    grep -q "^  $host /dev/.*: health not readable: " "$out/qualify-report.txt" \
      || die "the report does not say why $host's drive health is not readable (see $out/qualify-report.txt)"
  done
  ! grep -q "media_errors 0" "$out/qualify-report.txt" || die "a loop drive's health was shown as zeros"
  # The drive ledger, from the coordinator: every agent's drive (a loop device: no serial,
  # so tracked per host), and on flygecko's the run that failed it.
  platter_op drives --host flygecko >"$out/drives.txt" || die "platter drives failed"
  cat "$out/drives.txt"
  local drive
  drive=$(awk '$0 ~ /FAIL/ && $1 ~ /^flygecko\// {print $1; exit}' "$out/drives.txt")
  [ -n "$drive" ] || die "the ledger shows no failed drive of flygecko (see $out/drives.txt)"
  platter_op drive "$drive" >"$out/drive-flygecko.txt" || die "platter drive $drive failed"
  cat "$out/drive-flygecko.txt"
  grep -q "^    FAIL \[.*latency.p99 < 40ms" "$out/drive-flygecko.txt" \
    || die "flygecko's drive page does not name its FAIL (see $out/drive-flygecko.txt)"
  grep -q "^    health not readable: " "$out/drive-flygecko.txt" \
    || die "flygecko's drive does not say why its health is not readable"
  python3 - "$out/qualify.xml" <<'EOF'
import sys
import xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
failed = {c.get("classname") for c in root.iter("testcase") if c.find("failure") is not None}
passed = {c.get("classname") for c in root.iter("testcase") if c.find("failure") is None}
print(f"qualify: failed {sorted(failed)}; passed {sorted(passed)}")
assert failed and all(f.startswith("flygecko.") for f in failed), "only flygecko's drive may fail"
assert {p.split(".")[0] for p in passed} == {"rc66", "rcmonster"}, "rc66 and rcmonster must pass"
msgs = [(f.get("message") or "") + (f.text or "") for f in root.iter("failure")]
assert any("latency.p99" in m for m in msgs), msgs
print("qualify: ok, the JUnit XML names flygecko's drive and the threshold")
EOF
}

# Each drive against its peers, through real agents: every agent's drives (its own and
# LAB_PEER_DRIVES more, all of model PLATTER LAB DRIVE) measured by peers.yaml
# LAB_PEER_RUNS times; then `platter peers` must name flygecko's own drive (throttled by
# `ci`) as the one outlier, and `platter qualification` must count it.
cmd_peers() {
  local i id status slow
  [ -f "$envfile" ] || die "the lab is not up ($envfile missing): $0 up"
  export_compose_env
  mkdir -p "$out"
  slow=flygecko/${FLYGECKO_DEV#/dev/}
  for ((i = 1; i <= LAB_PEER_RUNS; i++)); do
    status=0
    OP_TIMEOUT=$LAB_TIMEOUT platter_op submit "$here/peers.yaml" --watch >"$out/peers-$i.txt" || status=$?
    id=$(head -n1 "$out/peers-$i.txt")
    { [ -n "$id" ] && [ "$status" = 0 ]; } || die "peers run $i: submit exited with status $status (see $out/peers-$i.txt)"
    log "peers run $i of $LAB_PEER_RUNS: $id done"
  done
  status=0
  platter_op peers "PLATTER LAB DRIVE" >"$out/peers.txt" || status=$?
  cat "$out/peers.txt"
  [ "$status" = 1 ] || die "platter peers must exit 1 with an outlier, not $status (see $out/peers.txt)"
  platter_op peers "PLATTER LAB DRIVE" --format json >"$out/peers.json" || true
  python3 - "$out/peers.json" "$slow" "$(((LAB_PEER_DRIVES + 1) * ${#AGENTS[@]}))" "$LAB_PEER_RUNS" <<'EOF'
import json, sys
peers = json.load(open(sys.argv[1]))
slow, drives, runs = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
# The lab's other campaigns (run, qualify) measured the agents' own drives on other
# workloads: groups of their own, three drives each, too few to judge.
[group] = [g for g in peers["groups"] if "count=100" in g["workload"]]
assert len(group["drives"]) == drives, f"{len(group['drives'])} drives in the group, not {drives}"
for g in peers["groups"]:
    if g is not group:
        assert g["not_judged"].startswith("too few peers to judge"), g["not_judged"]
assert not group.get("not_judged"), group.get("not_judged")
for d in group["drives"]:
    assert len(d["runs"]) == runs, f"{d['drive']}: {len(d['runs'])} runs, not {runs}"
outliers = [d["drive"] for d in group["drives"] if d["outlier"]]
assert outliers == [slow], f"outliers {outliers}, expected [{slow}]"
print(f"peers: ok, {drives} drives of PLATTER LAB DRIVE, one median per run each; the one outlier is {slow}")
EOF
  status=0
  platter_op qualification "PLATTER LAB DRIVE" >"$out/peers-qualification.txt" || status=$?
  cat "$out/peers-qualification.txt"
  [ "$status" = 1 ] || die "platter qualification must exit 1 with a peer outlier, not $status"
  grep -q "^PEER OUTLIER $slow: " "$out/peers-qualification.txt" \
    || die "platter qualification does not name $slow as a peer outlier (see $out/peers-qualification.txt)"
}

cmd_ci() {
  local start=$SECONDS
  need_root ci
  trap 'exit 130' INT TERM
  # shellcheck disable=SC2064
  trap "ci_end $start" EXIT
  export FLYGECKO_WRITE_IOPS=${FLYGECKO_WRITE_IOPS:-50}
  cmd_up
  cmd_run
  cmd_qualify
  cmd_peers
}

ci_end() {
  local rc=$? start=$1
  trap - EXIT
  set +e
  if [ "$rc" != 0 ]; then
    log "ci: failed; the last container logs:"
    LAB_LOG_LINES=40 cmd_logs
  fi
  (cmd_down) || { [ "$rc" != 0 ] || rc=1; }
  if [ "$rc" = 0 ]; then
    log "ci: passed in $((SECONDS - start)) s"
  else
    log "ci: FAILED (exit status $rc) after $((SECONDS - start)) s"
  fi
  exit "$rc"
}

# ---- The fault suite: `faults N` ----------------------------------------------------------
#
# Campaigns (faults.yaml, renamed lab-faults-1, -2, …) run back to back in the background
# while the foreground injects N faults, one at a time: after each fault it waits until the
# coordinator answers and every agent is connected again (its recovery time), then a random
# pause, then the next. Faults never overlap: each kind's effect (a journal resent, a
# stream closed as lost, a commit refused) is then attributable to one fault in faults.log.
# LAB_SEED drives every choice (fault kind, target, pause, how long a stop or a full disk
# lasts), so a seed replays the same sequence of faults (the machine's timing differs).

faults_dir=$LAB_WORK/faults
faults_log=$LAB_WORK/faults.log
FAULT_KINDS_ALL="agent-kill agent-restart coordinator-kill agent-stop partition disk-full"
# Two coordinators on PostgreSQL (LAB_HA=1): no coordinator disk to fill; the database is
# killed (crash recovery on restart), paused (every process frozen: connections stay
# open and silent) or frozen by SIGSTOP (the same for the clients; health and status are
# checked during the freeze) instead.
FAULT_KINDS_HA="agent-kill agent-restart coordinator-kill agent-stop partition db-kill db-pause db-freeze"

# A line in faults.log (UTC timestamp) and on stderr.
flog() {
  printf '%s %s\n' "$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ)" "$*" | tee -a "$faults_log" >&2
}

# rand VAR MIN MAX: VAR = a number in [MIN, MAX] from the seeded generator. No `$(…)`: a
# subshell's RANDOM would not advance the suite's sequence.
rand() {
  printf -v "$1" %d $(($2 + RANDOM % ($3 - $2 + 1)))
}

now_ms() { printf '%s' $((${EPOCHREALTIME/./} / 1000)); }

# seconds MS: milliseconds as seconds, e.g. 1.250.
seconds() { printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)); }

# sleep_until MS: sleeps until now_ms reaches MS.
sleep_until() {
  local d=$(($1 - $(now_ms)))
  [ "$d" -le 0 ] || sleep "$(seconds "$d")"
}

# The container of a compose service (docker-compose 1.29 and `docker compose` name them
# differently; the labels are the same).
service_id() {
  docker ps -aq --filter "label=com.docker.compose.project=$LAB_PROJECT" \
    --filter "label=com.docker.compose.service=$1" | head -n1
}

# The host PID of a service's PID 1 (`exec platter …` under sh -c), once it is running
# again (a container that was just killed is being restarted by its restart policy).
service_pid() {
  local id pid deadline=$((SECONDS + 60))
  id=$(service_id "$1")
  [ -n "$id" ] || die "no container for $1"
  while :; do
    pid=$(docker inspect -f '{{if .State.Running}}{{.State.Pid}}{{else}}0{{end}}' "$id")
    [ "$pid" = 0 ] || break
    [ "$SECONDS" -lt "$deadline" ] || die "$1 is not running again after 60 s"
    sleep 0.5
  done
  printf '%s' "$pid"
}

lab_network() {
  docker network ls -q --filter "label=com.docker.compose.project=$LAB_PROJECT" | head -n1
}

# The fault kinds. Each sets `detail` (what faults.log says) and returns when the fault is
# over (the process killed, the container back, the partition healed, the disk freed).
fault_agent_kill() { # SIGKILL of the agent, PID 1 of its container: restart: unless-stopped
  local pid
  pid=$(service_pid "$1")
  run kill -KILL "$pid"
  detail="SIGKILL pid $pid (the container restarts by its restart policy)"
}

fault_agent_restart() { # a reboot: SIGTERM (the agent drains), 10 s grace, start again
  run docker restart -t 10 "$(service_id "$1")" >/dev/null
  detail="docker restart (same boot id: the container reads the machine's)"
}

fault_coordinator_kill() {
  local pid
  pid=$(service_pid "$1")
  run kill -KILL "$pid"
  detail="SIGKILL pid $pid (the container restarts by its restart policy)"
}

fault_db_kill() { # SIGKILL of the PostgreSQL server (PID 1: the container restarts)
  local pid
  pid=$(service_pid postgres)
  run kill -KILL "$pid"
  detail="SIGKILL postgres pid $pid (the container restarts by its restart policy; crash recovery)"
}

fault_db_pause() { # the database's processes frozen: connections open, nothing answers
  local hold
  rand hold 5 20
  run docker pause "$(service_id postgres)" >/dev/null
  sleep "$hold"
  run docker unpause "$(service_id postgres)" >/dev/null
  detail="docker pause postgres for $hold s, unpause"
}

# The database frozen: every process of the PostgreSQL container stopped with SIGSTOP
# (state T) for LAB_FREEZE seconds — longer if the checks below need it — then SIGCONT.
# Not db-pause (the cgroup freezer, whole container): signals to each process, as the
# issue 27 run froze it. The kernel keeps acknowledging TCP for a stopped process, so no
# keepalive or TCP user timeout ends a coordinator's wait; only its own deadlines can.
# During the freeze each coordinator is probed at once (freeze_probe), after SIGCONT its
# health must say serving again (thaw_probe); the outcomes go to faults.log and the
# summary, and a failed check fails the suite once the campaigns are checked.
FREEZE_HEALTH_MS=5000 # `platter health` exits non-zero within this of the freeze,
FREEZE_STATUS_MS=2000 # then `platter status` answers within this, saying "not answering";
THAW_HEALTH_MS=5000   # after SIGCONT health exits 0 (serving) again within this
freeze_failed=0       # failed checks of db-freeze faults
freeze_summary=()     # one line per db-freeze fault, for the summary

# db_signal STOP|CONT: that signal to every process of the database container (`docker
# top`: the server, its children, a health check's pg_isready). STOP signals the server
# (PID 1) first, so that it forks no backend meanwhile, then sends again until the server
# and each of its children is in state T; sets `db_procs` to their count.
db_signal() {
  local sig=$1 id pm pids=() pass p state left=0
  id=$(service_id postgres)
  pm=$(service_pid postgres)
  [ "$sig" = CONT ] || run kill -STOP "$pm"
  # Up to 3 s: a backend in uninterruptible I/O (a busy disk) stops only once it is done.
  for ((pass = 1; pass <= 30; pass++)); do
    mapfile -t pids < <(docker top "$id" -eo pid | tail -n +2)
    [ "${#pids[@]}" != 0 ] || die "docker top lists no process of postgres"
    log "kill -$sig ${pids[*]} (every process of postgres, pass $pass)"
    kill "-$sig" "${pids[@]}" 2>/dev/null || true # one may have ended since
    [ "$sig" = STOP ] || return 0
    left=0 db_procs=0
    for p in $pm $(pgrep -P "$pm"); do
      state=$(sed 's/.*) \(.\).*/\1/' "/proc/$p/stat" 2>/dev/null) || continue
      db_procs=$((db_procs + 1))
      [ "$state" = T ] || left=$((left + 1))
    done
    [ "$left" != 0 ] || return 0
    sleep 0.1
  done
  die "$left of postgres's $db_procs processes still not stopped (state T) after $pass tries"
}

# freeze_probe VIA T0 FILE (in the background): `platter health` on coordinator VIA
# every 0.5 s from T0 (now_ms when the freeze was complete) until it exits non-zero, for
# FREEZE_HEALTH_MS at most; then `platter status` once (its output in FILE.status).
# Writes "HEALTH_MS STATUS_MS STATUS_RC SAID HUNG" to FILE: the time to the first
# non-zero exit (- for none), how long status took, its exit status, 1 if it said "not
# answering", how many health calls timed out (2 s) instead of answering.
freeze_probe() {
  local via=$1 t0=$2 file=$3 t health=- rc said=0 hung=0
  while t=$(now_ms) && [ $((t - t0)) -lt "$FREEZE_HEALTH_MS" ]; do
    rc=0
    OP_VIA=$via OP_QUIET=1 OP_TIMEOUT=2 platter_op health >/dev/null 2>&1 || rc=$?
    if [ "$rc" = 124 ]; then
      hung=$((hung + 1))
    elif [ "$rc" != 0 ]; then
      health=$(($(now_ms) - t0))
      break
    fi
    sleep_until $((t + 500))
  done
  t=$(now_ms)
  rc=0
  OP_VIA=$via OP_QUIET=1 OP_TIMEOUT=$((FREEZE_STATUS_MS / 1000 + 1)) platter_op status >"$file.status" 2>&1 || rc=$?
  t=$(($(now_ms) - t))
  ! grep -q "not answering" "$file.status" || said=1
  printf '%s %s %s %s %s\n' "$health" "$t" "$rc" "$said" "$hung" >"$file"
}

# thaw_probe VIA T1 FILE (in the background): `platter health` on coordinator VIA every
# 0.5 s from T1 (SIGCONT) until it exits 0, for THAW_HEALTH_MS at most; writes the time
# that took to FILE (- for never).
thaw_probe() {
  local via=$1 t1=$2 file=$3 t serving=-
  while t=$(now_ms) && [ $((t - t1)) -lt "$THAW_HEALTH_MS" ]; do
    if OP_VIA=$via OP_QUIET=1 OP_TIMEOUT=2 platter_op health >/dev/null 2>&1; then
      serving=$(($(now_ms) - t1))
      break
    fi
    sleep_until $((t + 500))
  done
  printf '%s\n' "$serving" >"$file"
}

# fault_db_freeze I: the I-th fault, database frozen (see above).
fault_db_freeze() {
  local n=$1 hold lo=${LAB_FREEZE% *} hi=${LAB_FREEZE#* } t0 t1 via name f probes=()
  local health status_ms status_rc said hung serving line lines=() problems=() p
  rand hold "$lo" "$hi"
  db_frozen=1 # faults_end sends SIGCONT should the suite end meanwhile
  db_signal STOP
  t0=$(now_ms)
  flog "fault $n: postgres frozen: $db_procs processes in state T; probing coordinator and coordinator-b"
  for via in a b; do
    freeze_probe "$via" "$t0" "$faults_dir/freeze-$n-$via" &
    probes+=($!)
  done
  sleep_until $((t0 + hold * 1000))
  wait "${probes[@]}" || true
  db_signal CONT
  t1=$(now_ms)
  db_frozen=
  probes=()
  for via in a b; do
    thaw_probe "$via" "$t1" "$faults_dir/thaw-$n-$via" &
    probes+=($!)
  done
  wait "${probes[@]}" || true
  for via in a b; do
    name=coordinator
    [ "$via" = a ] || name=coordinator-b
    f=$faults_dir/freeze-$n-$via
    read -r health status_ms status_rc said hung <"$f" || health=- status_ms=0 status_rc=probe-failed said=0 hung=0
    read -r serving <"$faults_dir/thaw-$n-$via" || serving=-
    if [ "$health" = - ]; then
      line="health still 0 (serving) $(seconds "$FREEZE_HEALTH_MS") s into the freeze"
      [ "$hung" = 0 ] || line+=" ($hung call(s) unanswered within 2 s)"
      problems+=("$name: $line")
    else
      line="health non-zero after $(seconds "$health") s"
      [ "$health" -le "$FREEZE_HEALTH_MS" ] ||
        problems+=("$name: health non-zero only after $(seconds "$health") s, not within $(seconds "$FREEZE_HEALTH_MS") s")
    fi
    case $status_rc in
      0)
        line+=", status answered in $(seconds "$status_ms") s"
        [ "$status_ms" -le "$FREEZE_STATUS_MS" ] ||
          problems+=("$name: status answered only after $(seconds "$status_ms") s, not within $(seconds "$FREEZE_STATUS_MS") s")
        if [ "$said" = 1 ]; then
          line+=" saying the store is not answering"
        else
          line+=" without saying the store is \"not answering\""
          problems+=("$name: status did not say the store is \"not answering\" ($f.status)")
        fi
        ;;
      124)
        line+=", status unanswered after $(seconds "$status_ms") s (timed out)"
        problems+=("$name: status did not answer within $(seconds "$FREEZE_STATUS_MS") s (timed out after $(seconds "$status_ms") s)")
        ;;
      *)
        line+=", status exited $status_rc after $(seconds "$status_ms") s"
        problems+=("$name: status exited $status_rc, not 0 ($f.status)")
        ;;
    esac
    if [ "$serving" = - ]; then
      line+=", health not 0 (serving) within $(seconds "$THAW_HEALTH_MS") s of SIGCONT"
      problems+=("$name: health did not exit 0 (serving) within $(seconds "$THAW_HEALTH_MS") s of SIGCONT")
    else
      line+=", serving $(seconds "$serving") s after SIGCONT"
    fi
    lines+=("$name: $line")
  done
  for p in "${problems[@]}"; do
    flog "check FAILED: fault $n db-freeze: $p"
  done
  freeze_failed=$((freeze_failed + ${#problems[@]}))
  detail="SIGSTOP of postgres's $db_procs processes for $(seconds $((t1 - t0))) s (drawn: $hold s), SIGCONT; ${lines[0]}; ${lines[1]}"
  freeze_summary+=("db-freeze (fault $n, $(seconds $((t1 - t0))) s): ${lines[0]}; ${lines[1]}$([ "${#problems[@]}" = 0 ] || echo "; ${#problems[@]} check(s) FAILED")")
}

fault_agent_stop() { # silent past the heartbeat timeout: the coordinator declares it lost
  local pid hold
  rand hold $((LAB_HEARTBEAT + 2)) $((LAB_HEARTBEAT + 8))
  pid=$(service_pid "$1")
  run kill -STOP "$pid"
  sleep "$hold"
  run kill -CONT "$pid"
  detail="SIGSTOP pid $pid for $hold s (heartbeat timeout $LAB_HEARTBEAT s), SIGCONT"
}

fault_partition() { # the container leaves the lab network, then joins with its name again
  local id net
  id=$(service_id "$1")
  net=$(lab_network)
  run docker network disconnect "$net" "$id"
  sleep "$LAB_PARTITION"
  run docker network connect --alias "$1" "$net" "$id"
  detail="network disconnect for $LAB_PARTITION s"
}

fault_disk_full() { # the coordinator's /data: fill, hold, free
  local hold left
  rand hold 5 15
  run dd if=/dev/zero of="$data_dir/fill" bs=1M 2>/dev/null || true # ends with ENOSPC
  left=$(df --output=avail -B1 "$data_dir" | tail -n1 | tr -d ' ')
  sleep "$hold"
  run rm -f "$data_dir/fill"
  detail="/data filled ($left bytes left) for $hold s, freed"
}

# `platter agents --output json` of every coordinator that answers, one JSON array per
# line prefixed by the coordinator's name; nothing when none answers.
agents_json() {
  local via json
  for via in a $([ "$LAB_HA" = 0 ] || echo b); do
    if json=$(OP_VIA=$via OP_QUIET=1 OP_TIMEOUT=10 platter_op agents --output json 2>/dev/null); then
      printf '%s %s\n' "$([ "$via" = a ] && echo coordinator || echo coordinator-b)" "$(printf '%s' "$json" | tr -d '\n')"
    fi
  done
}

# Where each agent is connected, e.g. "rc66→coordinator rcmonster→coordinator-b …".
agents_where() {
  agents_json | python3 -c '
import json, sys
where = {}
for line in sys.stdin:
    name, agents = line.split(" ", 1)
    for a in json.loads(agents):
        if a["state"] in ("idle", "busy"):
            where[a["host"]] = (a.get("coordinator") or name).split(":")[0]
print(" ".join(h + "\u2192" + where.get(h, "none") for h in sys.argv[1:]))
' "${AGENTS[@]}"
}

# Until a coordinator answers and every agent is connected (idle or busy) to one of them;
# sets `agent_states`. Non-zero after LAB_RECOVERY_TIMEOUT seconds.
wait_recovered() {
  local deadline=$((SECONDS + LAB_RECOVERY_TIMEOUT)) json
  while :; do
    agent_states=unreachable
    json=$(agents_json)
    if [ -n "$json" ]; then
      agent_states=$(printf '%s\n' "$json" | python3 -c '
import json, sys
states = {}
for line in sys.stdin:
    name, agents = line.split(" ", 1)
    for a in json.loads(agents):
        # Both coordinators list every agent, naming the one that holds it; an agent
        # counts as connected only by the word of the coordinator holding it (another
        # may still believe a killed one for a few seconds).
        held_here = (a.get("coordinator") or name).split(":")[0] == name
        state = a["state"] if held_here else "elsewhere"
        if state in ("idle", "busy") or a["host"] not in states:
            states[a["host"]] = state
print(" ".join(h + ":" + states.get(h, "unknown") for h in sys.argv[1:]))
sys.exit(0 if all(states.get(h) in ("idle", "busy") for h in sys.argv[1:]) else 1)
' "${AGENTS[@]}") && return 0
    fi
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 1
  done
}

campaign_state() {
  local json
  json=$(OP_QUIET=1 OP_TIMEOUT=10 platter_op status "$1" --output json 2>/dev/null) &&
    printf '%s' "$json" | python3 -c 'import json, sys; print(json.load(sys.stdin)["state"])'
}

# The background half: copies of the fault campaign back to back until $faults_dir/stop
# exists; each submitted id goes to campaigns.txt. Submissions are retried through outages.
faults_campaigns() {
  local k=0 id state file
  while [ ! -e "$faults_dir/stop" ]; do
    k=$((k + 1))
    file=$faults_dir/campaign-$k.yaml
    sed -e "0,/^name: *\(.*\)$/s//name: \1-$k/" \
      ${LAB_FAULT_REPEAT:+-e "s/^repeat: .*/repeat: $LAB_FAULT_REPEAT/"} "$LAB_FAULT_CAMPAIGN" >"$file"
    until id=$(OP_QUIET=1 OP_TIMEOUT=30 platter_op submit "$file" 2>>"$faults_dir/submit.err" | head -n1) &&
      [ -n "$id" ]; do
      sleep 2
    done
    printf '%s\n' "$id" >>"$faults_dir/campaigns.txt"
    flog "campaign $k: $id submitted"
    until state=$(campaign_state "$id") && [ "$state" != running ]; do
      sleep 2
    done
    flog "campaign $k: $id $state"
  done
}

# Checks one ended campaign against the coordinator's database (a copy) and its JSON
# report; appends its figures to checks.jsonl. See deploy/README.md, "Fault suite".
check_fault_campaign() {
  python3 - "$1" "$2" "$3" "$faults_dir/checks.jsonl" "${AGENTS[@]}" <<'EOF'
import json, sqlite3, sys
from collections import Counter

cid, db, report, out, hosts = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
EXHAUSTED = "not trying again"  # executor.rs: a step cut off MAX_ATTEMPTS times
con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
r = json.load(open(report))
problems = []
fig = Counter()
name, state = con.execute("SELECT name, state FROM campaigns WHERE id = ?", (cid,)).fetchone()
if state != "done" or r["state"] != "done":
    problems.append(f"campaign state {state} (report: {r['state']}), not done")
plans = con.execute("SELECT id, host, state, steps_total FROM plans WHERE campaign_id = ?", (cid,)).fetchall()
if sorted(p[1] for p in plans) != sorted(hosts):
    problems.append(f"plans for {sorted(p[1] for p in plans)}, expected one for each of {sorted(hosts)}")
excused = set()   # (host, cell, repetition) whose measurement was given up after MAX_ATTEMPTS
expected = set()  # (host, cell, repetition) whose measure step succeeded
failed_why = []
for plan_id, host, pstate, total in plans:
    if pstate != "done":
        problems.append(f"{host}: plan {plan_id} is {pstate}")
    rows = con.execute("SELECT step_index, attempt, state, kind, cell, repetition, error FROM steps WHERE plan_id = ?",
                       (plan_id,)).fetchall()
    latest = {}
    for i, a, st, kind, cell, rep, err in rows:
        fig["step_records"] += 1
        if st == "started" and a > 1:
            fig["reruns"] += 1
        cur = latest.get(i)
        if cur is None or a > cur[0] or (a == cur[0] and cur[1] == "started"):
            latest[i] = (a, st, kind, cell, rep, err)
    if len(latest) != total:
        problems.append(f"{host}: {len(latest)} of {total} steps have records")
    teardowns = 0
    for i, (a, st, kind, cell, rep, err) in sorted(latest.items()):
        fig["steps"] += 1
        fig["max_attempt"] = max(fig["max_attempt"], a)
        if kind == "storage_teardown":
            teardowns += 1
        if st == "succeeded":
            if kind == "storage_teardown":
                fig["teardowns_ran"] += 1
            if kind == "measure":
                expected.add((host, cell, rep))
        elif st in ("failed", "skipped") and EXHAUSTED in err:
            fig[f"{st}_exhausted"] += 1
            failed_why.append(f"{host} step {i} ({kind}) {st}: {err}")
            if kind == "storage_teardown":
                fig["teardowns_ran"] += 1  # it ran MAX_ATTEMPTS times, cut off each time
            if kind == "measure":
                excused.add((host, cell, rep))
        else:
            problems.append(f"{host}: step {i} ({kind}) attempt {a} {st}: {err or 'no end record'}")
    if teardowns == 0:
        problems.append(f"{host}: the plan has no storage teardown step")
    fig["teardowns"] += teardowns
# Samples as stored: one row per (host, cell, repetition, metric) exactly.
rows = con.execute("""SELECT host, cell, repetition, metric, COUNT(*) FROM sample_rows
                      WHERE plan_id IN (SELECT id FROM plans WHERE campaign_id = ?)
                      GROUP BY host, cell, repetition, metric""", (cid,)).fetchall()
metrics = sorted({m for _, _, _, m, _ in rows})
stored = {(h, c, rep, m): n for h, c, rep, m, n in rows}
want = {(h, c, rep, m) for (h, c, rep) in expected for m in metrics}
dups = {k: n for k, n in stored.items() if n > 1}
missing = want - set(stored)
extra = set(stored) - want
fig["samples_expected"] = len(want)
fig["samples_stored"] = sum(stored.values())
fig["duplicates"] = sum(n - 1 for n in dups.values())
fig["missing"] = len(missing)
for k in sorted(dups)[:5]:
    problems.append(f"duplicate: {k} stored {dups[k]} times")
for k in sorted(missing)[:5]:
    problems.append(f"missing: {k}")
for k in sorted(extra)[:5]:
    problems.append(f"sample of a repetition that did not succeed: {k}")
# The same from the report: every cell of every host, each metric, each repetition once.
cells = {n: (cid_, h) for n, cid_, h in con.execute("SELECT n, id, host FROM cells WHERE campaign_id = ?", (cid,))}
by_id = {v[0]: n for n, v in cells.items()}
reported = Counter()
for c in r["cells"]:
    n = by_id.get(c["cell_id"])
    for m in c["metrics"]:
        for x in m["samples"]:
            # The report names a per-run latency percentile "latency.p99 per run".
            metric = m["metric"].removesuffix(" per run")
            reported[(c["host"], n, x["repetition"], metric)] += 1
if set(reported) != want or any(v != 1 for v in reported.values()):
    rdup = sum(v - 1 for v in reported.values() if v > 1)
    problems.append(f"report: {len(want - set(reported))} expected sample(s) absent, "
                    f"{len(set(reported) - want)} unexpected, {rdup} duplicate(s)")
n_measure = len(expected) + len(excused)
if r.get("measurements_missing", 0) != len(excused):
    problems.append(f"report: {r.get('measurements_missing')} measurements missing, "
                    f"expected {len(excused)} (the ones given up after MAX_ATTEMPTS cut-offs)")
refused = con.execute("SELECT COUNT(*) FROM refused_records WHERE plan_id IN (SELECT id FROM plans WHERE campaign_id = ?)",
                      (cid,)).fetchone()[0]
if refused:
    problems.append(f"{refused} record(s) refused")
fig["metrics"] = len(metrics)
fig["measurements"] = n_measure
fig["measurements_given_up"] = len(excused)
line = {"campaign": cid, "name": name, "state": state, **fig, "failed_steps": failed_why, "problems": problems}
with open(out, "a") as f:
    f.write(json.dumps(line) + "\n")
print(f"check {name} ({cid}): {fig['steps']} steps ({fig['reruns']} re-run attempts, max attempt "
      f"{fig['max_attempt']}), {fig['teardowns_ran']}/{fig['teardowns']} teardowns ran, "
      f"{fig['samples_stored']} samples stored of {fig['samples_expected']} expected "
      f"({len(metrics)} metrics), {fig['duplicates']} duplicate(s), {fig['missing']} missing, "
      f"{fig['failed_exhausted']} step(s) failed and {fig['skipped_exhausted']} skipped after MAX_ATTEMPTS cut-offs")
for w in failed_why:
    print(f"  given up: {w}")
for p in problems:
    print(f"check FAILED: {name}: {p}")
sys.exit(1 if problems else 0)
EOF
}

cmd_faults() {
  local n=${1:-} start=$SECONDS i kind target gap k t0 t1 over rec_ms kinds=() targets deck=()
  local -A count=() longest=()
  if ! [[ $n =~ ^[1-9][0-9]*$ ]]; then
    die "usage: $0 faults N (N faults, e.g. 20)"
  fi
  need_root faults
  command -v python3 >/dev/null || die "python3 is needed for the checks"
  local all=$FAULT_KINDS_ALL coordinators=(coordinator)
  if [ "$LAB_HA" = 1 ]; then
    all=$FAULT_KINDS_HA
    coordinators=(coordinator coordinator-b)
  fi
  read -r -a kinds <<<"${LAB_FAULT_KINDS:-$all}"
  for kind in "${kinds[@]}"; do
    [[ " $all " == *" $kind "* ]] ||
      die "fault kind $kind is not one of this topology's (LAB_HA=$LAB_HA): $all"
  done
  LAB_SEED=${LAB_SEED:-$((RANDOM * 32768 + RANDOM))}
  RANDOM=$LAB_SEED
  [ ! -e "$faults_dir" ] || run rm -rf "$faults_dir"
  mkdir -p "$faults_dir"
  : >"$faults_log"
  flog "faults: $n faults, LAB_SEED=$LAB_SEED, kinds: ${kinds[*]}$([ "${LAB_FAULT_ROUNDS:-0}" != 1 ] || echo ' in rounds'); partitions $LAB_PARTITION s," \
    "heartbeat timeout $LAB_HEARTBEAT s, pauses $LAB_GAP s, coordinator /data tmpfs $LAB_DATA_SIZE$([ "$LAB_HA" = 0 ] || echo ", database freezes $LAB_FREEZE s")"
  trap 'exit 130' INT TERM
  # shellcheck disable=SC2064
  trap "faults_end $start" EXIT
  # The coordinator's /data: a small tmpfs on this machine, kept across its restarts.
  mkdir -p "$data_dir"
  mountpoint -q "$data_dir" || run mount -t tmpfs -o "size=$LAB_DATA_SIZE,mode=0755" platter-lab-data "$data_dir"
  export LAB_DATA=$data_dir LAB_SERVE_FLAGS="--heartbeat-timeout $LAB_HEARTBEAT"
  cmd_up
  faults_campaigns &
  runner=$!
  until [ -s "$faults_dir/campaigns.txt" ]; do
    kill -0 "$runner" 2>/dev/null || die "the campaign runner stopped"
    sleep 1
  done
  for ((i = 1; i <= n; i++)); do
    rand gap "${LAB_GAP% *}" "${LAB_GAP#* }"
    sleep "$gap"
    kill -0 "$runner" 2>/dev/null || die "the campaign runner stopped"
    if [ "${LAB_FAULT_ROUNDS:-0}" = 1 ]; then
      # Rounds: every kind once per round, in a random order (a short run covers them all).
      [ "${#deck[@]}" -gt 0 ] || deck=("${kinds[@]}")
      rand k 0 $((${#deck[@]} - 1))
      kind=${deck[k]}
      deck=("${deck[@]:0:k}" "${deck[@]:k+1}")
    else
      rand k 0 $((${#kinds[@]} - 1))
      kind=${kinds[k]}
    fi
    case $kind in
      agent-*)
        rand k 0 $((${#AGENTS[@]} - 1))
        target=${AGENTS[k]}
        ;;
      partition)
        targets=("${AGENTS[@]}" "${coordinators[@]}")
        [ "$LAB_HA" = 0 ] || targets+=(postgres)
        rand k 0 $((${#targets[@]} - 1))
        target=${targets[k]}
        ;;
      coordinator-kill)
        rand k 0 $((${#coordinators[@]} - 1))
        target=${coordinators[k]}
        ;;
      db-*) target=postgres ;;
      *) target=coordinator ;;
    esac
    flog "fault $i/$n: $kind $target"
    t0=$(now_ms)
    case $kind in
      agent-kill) fault_agent_kill "$target" ;;
      agent-restart) fault_agent_restart "$target" ;;
      coordinator-kill) fault_coordinator_kill "$target" ;;
      db-kill) fault_db_kill ;;
      db-pause) fault_db_pause ;;
      db-freeze) fault_db_freeze "$i" ;;
      agent-stop) fault_agent_stop "$target" ;;
      partition) fault_partition "$target" ;;
      disk-full) fault_disk_full ;;
    esac
    t1=$(now_ms)
    sleep 1 # the coordinator notices a closed stream
    if ! wait_recovered; then
      flog "fault $i/$n: $kind $target: NOT recovered within $LAB_RECOVERY_TIMEOUT s ($agent_states)"
      die "fault $i ($kind $target): the lab did not recover within $LAB_RECOVERY_TIMEOUT s: $agent_states"
    fi
    rec_ms=$(($(now_ms) - t1))
    over=$(((t1 - t0) / 1000))
    flog "fault $i/$n: $kind $target: $detail; over after $over s, recovered $(seconds "$rec_ms") s later"
    count[$kind]=$((${count[$kind]:-0} + 1))
    [ "${longest[$kind]:-0}" -ge "$rec_ms" ] || longest[$kind]=$rec_ms
  done
  : >"$faults_dir/stop"
  for kind in "${kinds[@]}"; do
    rec_ms=${longest[$kind]:-0}
    flog "summary: $kind: ${count[$kind]:-0} fault(s), longest recovery $(seconds "$rec_ms") s"
  done
  for k in "${!freeze_summary[@]}"; do
    flog "summary: ${freeze_summary[k]}"
  done
  [ "$freeze_failed" = 0 ] || flog "summary: db-freeze: $freeze_failed check(s) FAILED (the lines \"check FAILED: fault N db-freeze\" above)"
  flog "faults: $n injected in $((SECONDS - start)) s (LAB_SEED=$LAB_SEED); waiting for the campaign under way to end"
  faults_finish "$start"
}

# pg_snapshot FILE: the tables the checks read, copied from the lab's PostgreSQL database
# into a new SQLite file of the same layout (each read in one transaction; the campaigns
# have ended, so nothing changes in between), so that check_fault_campaign reads either.
pg_snapshot() {
  local file=$1 t json=$faults_dir/pg-tables.jsonl
  : >"$json"
  for t in campaigns plans cells steps refused_records sample_rows; do
    # The table's columns (also when it has no rows), then its rows as one JSON array;
    # psql prints both unquoted (-A -t).
    printf '%s ' "$t" >>"$json"
    docker exec "$(service_id postgres)" psql -h /tmp -U platter -d platter -v ON_ERROR_STOP=1 -Atc \
      "SELECT json_build_object('columns', (SELECT json_agg(column_name ORDER BY ordinal_position)
         FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = '$t'),
         'rows', (SELECT COALESCE(json_agg(t), '[]') FROM $t t))" | tr -d '\n' >>"$json"
    printf '\n' >>"$json"
  done
  rm -f "$file"
  python3 - "$json" "$file" <<'EOF'
import json, sqlite3, sys
con = sqlite3.connect(sys.argv[2])
for line in open(sys.argv[1]):
    table, data = line.split(" ", 1)
    data = json.loads(data)
    cols, rows = data["columns"], data["rows"]
    quoted = ", ".join('"' + c + '"' for c in cols)
    con.execute(f"CREATE TABLE {table} ({quoted})")
    con.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * len(cols))})",
                    [[r[c] if not isinstance(r[c], (dict, list)) else json.dumps(r[c]) for c in cols] for r in rows])
con.commit()
print(f"pg_snapshot: {sys.argv[2]}")
EOF
}

# After the last fault: every campaign the coordinator knows (also one whose submission
# was retried after its answer was lost) must end and pass check_fault_campaign; no agent
# may be offline.
faults_finish() {
  local start=$1 deadline=$((SECONDS + LAB_TIMEOUT)) ids=() id failed=0 running
  while kill -0 "$runner" 2>/dev/null; do
    [ "$SECONDS" -lt "$deadline" ] || die "the last campaign did not end within $LAB_TIMEOUT s (LAB_TIMEOUT)"
    sleep 2
  done
  wait "$runner" || die "the campaign runner failed"
  while :; do
    running=$(OP_QUIET=1 OP_TIMEOUT=10 platter_op status --output json |
      python3 -c 'import json, sys; print(sum(c["state"] == "running" for c in json.load(sys.stdin)))' 2>/dev/null) || running=unknown
    [ "$running" != 0 ] || break
    [ "$SECONDS" -lt "$deadline" ] || die "$running campaign(s) still running after $LAB_TIMEOUT s"
    sleep 2
  done
  wait_recovered || die "agents not connected at the end: $agent_states"
  flog "faults: every campaign ended; agents $agent_states"
  mapfile -t ids < <(OP_QUIET=1 OP_TIMEOUT=10 platter_op status --output json |
    python3 -c 'import json, sys; [print(c["campaign_id"]) for c in json.load(sys.stdin)]')
  while read -r id; do
    [[ " ${ids[*]} " == *" $id "* ]] || die "campaign $id was submitted but the coordinator does not know it"
  done <"$faults_dir/campaigns.txt"
  # A consistent copy of the database (the backup API), kept with the results.
  if [ "$LAB_HA" = 1 ]; then
    pg_snapshot "$faults_dir/platter.db"
  else
    python3 -c 'import sqlite3, sys; sqlite3.connect(sys.argv[1]).backup(sqlite3.connect(sys.argv[2]))' \
      "$data_dir/platter.db" "$faults_dir/platter.db"
  fi
  : >"$faults_dir/checks.jsonl"
  for id in "${ids[@]}"; do
    OP_QUIET=1 OP_TIMEOUT=60 platter_op report "$id" --format json >"$faults_dir/report-$id.json" || true
    [ -s "$faults_dir/report-$id.json" ] || die "no report of campaign $id"
    check_fault_campaign "$id" "$faults_dir/platter.db" "$faults_dir/report-$id.json" 2>&1 |
      tee -a "$faults_log" || failed=1
  done
  python3 - "$faults_dir/checks.jsonl" <<'EOF' | tee -a "$faults_log"
import json, sys
c = [json.loads(l) for l in open(sys.argv[1])]
s = lambda k: sum(x.get(k, 0) for x in c)
print(f"summary: {len(c)} campaigns, {s('steps')} steps ({s('reruns')} re-run attempts), "
      f"{s('teardowns_ran')}/{s('teardowns')} teardowns ran, {s('measurements')} measurements "
      f"({s('measurements_given_up')} given up after MAX_ATTEMPTS cut-offs), "
      f"{s('samples_stored')} samples stored of {s('samples_expected')} expected, "
      f"{s('duplicates')} duplicates, {s('missing')} missing, "
      f"{s('failed_exhausted')} failed + {s('skipped_exhausted')} skipped steps (MAX_ATTEMPTS cut-offs), "
      f"{sum(len(x['problems']) for x in c)} problems")
EOF
  [ "$failed" = 0 ] || die "a campaign failed its check (above; $faults_log)"
  [ "$freeze_failed" = 0 ] ||
    die "$freeze_failed check(s) of health and status while the database was frozen failed (db-freeze, above; $faults_log)"
  flog "faults: passed in $((SECONDS - start)) s"
}

faults_end() {
  local rc=$? start=$1 s
  trap - EXIT
  set +e
  [ -z "${runner:-}" ] || kill "$runner" 2>/dev/null
  [ -z "${db_frozen:-}" ] || (db_signal CONT)
  if [ -n "$(service_id coordinator)" ]; then
    mkdir -p "$faults_dir/logs"
    for s in coordinator "${AGENTS[@]}" $([ "$LAB_HA" = 0 ] || echo coordinator-b postgres); do
      docker logs --timestamps "$(service_id "$s")" >"$faults_dir/logs/$s.log" 2>&1
    done
    log "faults: container logs in $faults_dir/logs"
  fi
  (cmd_down) || { [ "$rc" != 0 ] || rc=1; }
  if [ "$rc" = 0 ]; then
    log "faults: passed in $((SECONDS - start)) s; $faults_log"
  else
    flog "faults: FAILED (exit status $rc) after $((SECONDS - start)) s; logs in $faults_dir"
  fi
  exit "$rc"
}

main() {
  while [ $# -gt 0 ]; do
    case $1 in
      --bin)
        PLATTER_BIN=$(realpath "${2:?--bin needs a path}")
        shift 2
        ;;
      --bin=*)
        PLATTER_BIN=$(realpath "${1#--bin=}")
        shift
        ;;
      -h | --help | help)
        usage
        exit 0
        ;;
      -*) die "unknown option $1 (see --help)" ;;
      *) break ;;
    esac
  done
  local cmd=${1:-}
  [ $# -eq 0 ] || shift
  case $cmd in
    up) cmd_up ;;
    run) cmd_run ;;
    agents) cmd_agents ;;
    logs) cmd_logs "$@" ;;
    down) cmd_down ;;
    ci) cmd_ci ;;
    faults) cmd_faults "$@" ;;
    qualify) cmd_qualify ;;
    peers) cmd_peers ;;
    context) cmd_context "$@" ;;
    build) cmd_build ;;
    *)
      usage >&2
      exit 2
      ;;
  esac
}

main "$@"
