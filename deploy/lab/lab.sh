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
#   deploy/lab/lab.sh ci                       up (flygecko's drive throttled); run; qualify;
#                                              down (always) — non-zero on failure
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
LAB_CAMPAIGN=${LAB_CAMPAIGN:-$here/campaign.yaml}
LAB_METRIC=${LAB_METRIC:-wall}
LAB_EXPECT_CELLS=${LAB_EXPECT_CELLS:-2}
LAB_TIMEOUT=${LAB_TIMEOUT:-900}
LAB_PROJECT=${LAB_PROJECT:-platter-lab}
AGENTS=(rc66 rcmonster flygecko)

pki=$LAB_WORK/pki
drives=$LAB_WORK/drives
envfile=$LAB_WORK/lab.env
out=$LAB_WORK/run

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
  run "${c[@]}" -p "$LAB_PROJECT" -f "$here/docker-compose.yml" "$@"
}

# What the compose file reads. The drives come from lab.env once `up` made them.
export_compose_env() {
  export LAB_IMAGE LAB_PORT LAB_PKI="$pki"
  if [ "$LAB_TLS" = 1 ]; then
    export LAB_COORDINATOR_URL=https://coordinator:7461 LAB_SECURITY_FLAGS="--tls-dir /pki"
  else
    export LAB_COORDINATOR_URL=http://coordinator:7461 LAB_SECURITY_FLAGS=--dangerously-insecure
  fi
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

# Whether `platter SUBCOMMAND` has FLAG (binaries from before mutual TLS lack some).
# platter SUBCOMMAND … as an operator on this machine, talking to the published
# coordinator port. OP_TIMEOUT=SECONDS bounds the command (--foreground: Ctrl-C reaches it).
platter_op() {
  local sub=$1 env flags=()
  shift
  if [ "$LAB_TLS" = 1 ]; then
    env=("PLATTER_COORDINATOR=https://127.0.0.1:$LAB_PORT" "PLATTER_TLS_DIR=$pki/operator-lab")
  else
    env=("PLATTER_COORDINATOR=http://127.0.0.1:$LAB_PORT")
    # Clients ask for plaintext explicitly; before mutual TLS an http:// address was enough.
    flags=(--dangerously-insecure)
  fi
  run env "${env[@]}" ${OP_TIMEOUT:+timeout --foreground "$OP_TIMEOUT"} "$PLATTER_BIN" "$sub" "${flags[@]}" "$@"
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

# The image's build context: rootfs/ (binary, its libraries and loader, busybox, /etc)
# and the Dockerfile.
cmd_context() {
  local dir=${1:?usage: lab.sh context DIR}
  local rootfs=$dir/rootfs lib applet
  ensure_binary
  mkdir -p "$rootfs/usr/local/bin"
  install -m 0755 "$PLATTER_BIN" "$rootfs/usr/local/bin/platter"
  cp "$here/Dockerfile" "$dir/Dockerfile"
  if [ "$LAB_BASE" != scratch ]; then
    log "context: the binary only (base image $LAB_BASE brings the userland)"
    return
  fi
  if ldd "$PLATTER_BIN" | grep -q 'not found'; then
    die "ldd cannot resolve every library of $PLATTER_BIN"
  fi
  # Every library ldd resolves (`name => /path (addr)`) and the loader (`/path (addr)`),
  # each at the path the binary and the loader look for it.
  while read -r lib; do
    mkdir -p "$rootfs$(dirname "$lib")"
    cp -L "$lib" "$rootfs$lib"
  done < <(ldd "$PLATTER_BIN" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }')
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
  printf 'root:x:0:0:root:/root:/bin/sh\n' >"$rootfs/etc/passwd"
  printf 'root:x:0:\n' >"$rootfs/etc/group"
  printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$rootfs/etc/nsswitch.conf"
  log "context: $dir ($(du -sh "$rootfs" | cut -f1): platter, $(find "$rootfs" -name '*.so*' | wc -l) libraries, busybox with $(find "$rootfs/bin" -type l | wc -l) applets)"
}

cmd_build() {
  local ctx=$LAB_WORK/context start=$SECONDS
  rm -rf "$ctx"
  mkdir -p "$ctx"
  cmd_context "$ctx"
  run docker build -t "$LAB_IMAGE" --build-arg "BASE=$LAB_BASE" "$ctx"
  rm -rf "$ctx"
  rmdir "$LAB_WORK" 2>/dev/null || true # when only the image was asked for
  log "image $LAB_IMAGE built in $((SECONDS - start)) s"
}

# Certificates: a CA, the coordinator (reached as `coordinator` inside the lab network and
# as 127.0.0.1/localhost from this machine), one agent identity per host, one operator.
make_pki() {
  local a
  if [ "$LAB_TLS" != 1 ]; then
    # Plaintext: the directories the compose file mounts only have to exist.
    mkdir -p "$pki/coordinator" "${AGENTS[@]/#/$pki/agent-}"
    return
  fi
  if [ -f "$pki/ca/ca.pem" ]; then
    log "certificates: reusing $pki"
    return
  fi
  run "$PLATTER_BIN" certs init --dir "$pki"
  run "$PLATTER_BIN" certs issue coordinator coordinator localhost 127.0.0.1 --dir "$pki"
  for a in "${AGENTS[@]}"; do
    run "$PLATTER_BIN" certs issue agent "$a" --dir "$pki"
  done
  run "$PLATTER_BIN" certs issue operator lab --dir "$pki"
}

# One image file and loop device per agent; lab.env records which.
make_drives() {
  local a img dev
  mkdir -p "$drives"
  : >"$envfile.new"
  for a in "${AGENTS[@]}"; do
    img=$drives/$a.img
    [ -f "$img" ] || run truncate -s "$LAB_DRIVE_SIZE" "$img"
    dev=$(losetup -j "$img" | cut -d: -f1 | head -n1)
    if [ -z "$dev" ]; then
      dev=$(run losetup --find --show "$img")
    fi
    log "drive of $a: $dev ($img)"
    printf '%s_DEV=%s\n' "${a^^}" "$dev" >>"$envfile.new"
  done
  mv "$envfile.new" "$envfile"
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
  OP_TIMEOUT=$LAB_TIMEOUT platter_op submit "$LAB_CAMPAIGN" --watch | tee "$out/submit.txt" || status=$?
  id=$(head -n1 "$out/submit.txt")
  [ -n "$id" ] || die "submit printed no campaign id (exit status $status)"
  case $status in
    0) ;;
    124) log "the campaign did not finish within $LAB_TIMEOUT s (LAB_TIMEOUT)" ;;
    *) log "submit exited with status $status (1: a step failed or a plan was refused)" ;;
  esac
  platter_op report "$id" --format json >"$out/report.json" || true
  [ -s "$out/report.json" ] || die "no report of campaign $id"
  log "campaign $id: checking $out/report.json ($((SECONDS - start)) s)"
  check_report "$out/report.json"
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
  for a in "${AGENTS[@]}"; do
    img=$drives/$a.img
    [ -e "$img" ] || continue
    for dev in $(losetup -j "$img" | cut -d: -f1); do
      run losetup -d "$dev" || failed=1
    done
    run rm -f "$img" || failed=1
  done
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
  platter_op report "$id" --format table --junit "$out/qualify.xml" >/dev/null || true
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
    qualify) cmd_qualify ;;
    context) cmd_context "$@" ;;
    build) cmd_build ;;
    *)
      usage >&2
      exit 2
      ;;
  esac
}

main "$@"
