#!/usr/bin/env bash
# deploy/debian/test.sh: the Debian packages `platter` and `platter-agent` end to end, as
# root, on this machine (systemd need not be PID 1; it must be installed, for
# systemd-analyze). deploy/README.md, "Debian packages", says what they promise.
#
#   1. builds both .debs with `cargo deb --no-build --strip` from the release binaries
#      (build them first: cargo build --release --bin platter --bin platter-agent);
#   2. checks their contents (stripped binaries, units, conffiles), installs them with
#      dpkg -i, checks the units with systemd-analyze verify, the user `platter`, the
#      owners and modes of the state and TLS directories, which unit is enabled;
#   3. runs the installed binaries as their units would (EnvironmentFile, User=,
#      ExecCondition=, ExecStart= read from the installed unit files; PID 1 need not be
#      systemd): the coordinator as `platter` over mutual TLS (`platter certs`), an agent
#      as root, and a campaign (/bin/true, 3 repetitions) that must complete;
#   4. builds the packages again with a higher version and upgrades: local edits of
#      /etc/default/platter{,-agent}, the agent's enabled state, its journal and the
#      coordinator's store must be kept, and both must work again;
#   5. purges both: the user, /var/lib/platter and the conffiles go, the agent's journal
#      stays; then installs the agent with a /etc/default/platter-agent naming a
#      coordinator (the postinst must enable it) and purges it with
#      /etc/platter-agent/purge-journals, which must remove the journal.
#
# It refuses to start when the packages or their directories are already on this machine
# (it would purge them); on failure it stops what it started, shows the logs and purges
# what it installed (PLATTER_DEB_TEST_KEEP=1 leaves everything in place for a look).
# About a minute with built binaries; each step prints a "== step" line.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
target=${CARGO_TARGET_DIR:-$repo/target}
work=$(mktemp -d /tmp/platter-deb-test.XXXXXX)
pki=$work/pki
operator=$pki/operator-pkgtest-ci
host=pkgtest
coordinator_unit=/usr/lib/systemd/system/platter-coordinator.service
agent_unit=/usr/lib/systemd/system/platter-agent.service
wants=/etc/systemd/system/multi-user.target.wants
started=$SECONDS
installed=0
coordinator_pid=
agent_pid=

step() { printf '\n== %s (%d s)\n' "$*" $((SECONDS - started)); }
note() { printf '   %s\n' "$*"; }
die() {
  printf '\nFAIL: %s\n' "$*" >&2
  exit 1
}

stop_pid() { # stop_pid PID NAME: SIGTERM, then SIGKILL after 15 s
  local pid=$1 name=$2 _
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 150); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    note "$name did not stop on SIGTERM within 15 s: SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
}

stop_all() {
  stop_pid "$agent_pid" agent
  agent_pid=
  stop_pid "$coordinator_pid" coordinator
  coordinator_pid=
}

cleanup() {
  local status=$?
  set +e
  stop_all
  if [ "$status" != 0 ]; then
    local log
    for log in "$work"/*.log; do
      [ -s "$log" ] || continue
      printf '\n--- last lines of %s\n' "$log" >&2
      tail -n 40 "$log" >&2
    done
    if [ "${PLATTER_DEB_TEST_KEEP:-0}" = 1 ]; then
      printf '\nPLATTER_DEB_TEST_KEEP=1: packages, state and %s left in place\n' "$work" >&2
      return
    fi
    if [ "$installed" = 1 ]; then
      printf '\ncleaning up: purging the packages this test installed\n' >&2
      mkdir -p /etc/platter-agent && touch /etc/platter-agent/purge-journals
      dpkg --purge platter-agent platter >/dev/null 2>&1
      rm -rf /etc/platter /etc/platter-agent /var/lib/platter-agent /var/lib/platter-agent.lock /var/lib/platter
    fi
  fi
  rm -rf "$work"
  if [ "$status" = 0 ]; then
    printf '\nPASS: deploy/debian/test.sh (%d s)\n' $((SECONDS - started))
  else
    printf '\nFAIL: deploy/debian/test.sh (exit status %s, after %d s)\n' "$status" $((SECONDS - started)) >&2
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- helpers ----------------------------------------------------------------------------

# A unit file's value of KEY (the last one).
unit_value() { sed -n "s/^$2=//p" "$1" | tail -n 1; }

# run_as_unit UNIT LOG: starts the unit's ExecStart in the background as systemd would
# (EnvironmentFile=, User=/Group=, working directory /), after its ExecCondition=; sets
# RUN_PID. Returns 1 (starting nothing) when the condition fails, as systemd would skip it.
run_as_unit() {
  local unit=$1 log=$2 envfile user group cond exec
  envfile=$(unit_value "$unit" EnvironmentFile)
  envfile=${envfile#-}
  user=$(unit_value "$unit" User)
  group=$(unit_value "$unit" Group)
  cond=$(unit_value "$unit" ExecCondition)
  exec=$(unit_value "$unit" ExecStart)
  [ -n "$exec" ] || die "$unit has no ExecStart="
  # systemd writes a literal $ as $$; the shell's word splitting of an unquoted $VAR is
  # systemd's for $VAR in ExecStart=.
  cond=${cond//\$\$/\$}
  local run=(env)
  [ -z "$user" ] || run=(setpriv --reuid="$user" --regid="${group:-$user}" --init-groups)
  (
    cd /
    set -a
    # shellcheck disable=SC1090
    [ ! -r "$envfile" ] || . "$envfile"
    set +a
    if [ -n "$cond" ] && ! eval "$cond"; then
      exit 3
    fi
    eval "exec ${run[*]} $exec" >"$log" 2>&1
  ) &
  RUN_PID=$!
  # The condition fails fast; a started service keeps running.
  sleep 0.5
  if ! kill -0 "$RUN_PID" 2>/dev/null; then
    local s=0
    wait "$RUN_PID" || s=$?
    RUN_PID=
    [ "$s" = 3 ] && return 1
    die "$unit: ExecStart exited at once with status $s (log: $(tail -n 5 "$log" 2>/dev/null))"
  fi
}

# The `platter` CLI as the test's operator, talking to the coordinator under test.
op() {
  PLATTER_COORDINATOR=https://127.0.0.1:$port PLATTER_TLS_DIR=$operator PLATTER_CONFIG=$work/client.toml \
    timeout 60 /usr/bin/platter "$@"
}

wait_for() { # wait_for SECONDS WHAT COMMAND…
  local limit=$1 what=$2 deadline=$((SECONDS + $1))
  shift 2
  until "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$deadline" ] || die "$what: not within $limit s"
    sleep 0.5
  done
}

agent_connected() { op agents --output json | python3 -c '
import json, sys
agents = json.load(sys.stdin)
sys.exit(0 if any(a.get("host") == sys.argv[1] and a.get("state") in ("idle", "busy") for a in agents) else 1)
' "$host"; }

start_coordinator() {
  run_as_unit "$coordinator_unit" "$work/coordinator.log" ||
    die "the coordinator's ExecCondition failed although /etc/platter/tls/cert.pem exists"
  coordinator_pid=$RUN_PID
  wait_for 30 "the coordinator answering platter health" op health
  [ "$(ps -o user= -p "$coordinator_pid")" = platter ] || die "the coordinator does not run as platter: $(ps -o user=,args= -p "$coordinator_pid")"
  note "coordinator: pid $coordinator_pid as user platter, https://127.0.0.1:$port"
}

start_agent() {
  run_as_unit "$agent_unit" "$work/agent.log" || die "the agent's ExecCondition failed although PLATTER_COORDINATOR is set"
  agent_pid=$RUN_PID
  wait_for 30 "the agent $host connected (platter agents)" agent_connected
  [ "$(ps -o user= -p "$agent_pid")" = root ] || die "the agent does not run as root"
  note "agent: pid $agent_pid as root, host $host"
}

# run_campaign NAME: submits a /bin/true campaign of 3 repetitions on $host and checks
# its report.
run_campaign() {
  local name=$1 id status=0
  cat >"$work/$name.yaml" <<EOF
name: $name
description: deploy/debian/test.sh, /bin/true three times on the packaged agent
hosts: { names: [$host] }
workload:
  command:
    run: /bin/true
repeat: 3
EOF
  op submit "$work/$name.yaml" --watch >"$work/$name.out" 2>"$work/$name.err" || status=$?
  id=$(head -n 1 "$work/$name.out")
  [ "$status" = 0 ] || die "platter submit --watch of $name exited with $status: $(tail -n 5 "$work/$name.err")"
  [ -n "$id" ] || die "platter submit printed no campaign id"
  op report "$id" --format json >"$work/$name.json" || die "no report of campaign $id"
  python3 - "$work/$name.json" <<'EOF' || die "campaign $id: its report is not what it should be (above)"
import json, sys
r = json.load(open(sys.argv[1]))
problems = []
if r["state"] != "done":
    problems.append(f"state {r['state']}, not done")
if r["steps_failed"]:
    problems.append(f"{r['steps_failed']} step(s) failed: {r['failures']}")
if r["refused"]:
    problems.append(f"plan refused: {r['refused']}")
samples = [x for c in r["cells"] for m in c["metrics"] if m["metric"] == "wall"
           for x in m["samples"] if x["value"] is not None]
if len(samples) != 3:
    problems.append(f"{len(samples)} samples of wall, not 3")
for p in problems:
    print("   report:", p)
sys.exit(1 if problems else 0)
EOF
  note "campaign $name ($id): done, 3 samples of wall"
  CAMPAIGN_ID=$id
}

owner_mode() { stat -c '%U:%G %a' "$1"; }
expect_owner_mode() { # PATH "USER:GROUP MODE"
  [ -e "$1" ] || die "$1 does not exist"
  local got
  got=$(owner_mode "$1")
  [ "$got" = "$2" ] || die "$1 is $got, not $2"
  note "$1: $got"
}

# Where systemd is PID 1 the packages' scripts start and restart the units themselves
# (the coordinator at installation and after the upgrade); this test runs the binaries
# itself, so it stops them after each dpkg -i. (Where systemd is not PID 1, as in CI, the
# scripts only enable units, and this does nothing.)
stop_systemd_units() {
  [ -d /run/systemd/system ] || return 0
  systemctl stop platter-coordinator.service platter-agent.service 2>/dev/null || true
}

pkg_status() { dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null || echo not-installed; }
pkg_version() { dpkg-query -W -f='${Version}' "$1"; }

journal_sums() { (cd /var/lib/platter-agent && find . -type f -print0 | sort -z | xargs -0r sha256sum); }

# --- 0. preconditions ---------------------------------------------------------------------

step "preconditions"
[ "$(id -u)" = 0 ] || die "run as root (dpkg -i, a system user, an agent as root)"
for tool in cargo-deb dpkg dpkg-deb dpkg-query systemd-analyze setpriv python3 readelf deb-systemd-helper adduser; do
  command -v "$tool" >/dev/null || die "$tool is missing (cargo-deb: cargo install cargo-deb --locked)"
done
for bin in platter platter-agent; do
  [ -x "$target/release/$bin" ] ||
    die "no $target/release/$bin: build it first (cargo build --release --bin platter --bin platter-agent)"
done
for pkg in platter platter-agent; do
  [ "$(pkg_status "$pkg")" = not-installed ] ||
    die "the package $pkg is on this machine ($(pkg_status "$pkg")): this test installs and purges it; dpkg --purge $pkg first"
done
for path in /var/lib/platter /var/lib/platter-agent /var/lib/platter-agent.lock /etc/platter /etc/platter-agent /etc/default/platter /etc/default/platter-agent; do
  [ ! -e "$path" ] || die "$path exists: this test would remove it (a leftover of an earlier run? remove it first)"
done
! getent passwd platter >/dev/null || die "a user platter exists: this test creates and removes it"
! getent group platter >/dev/null || die "a group platter exists: this test creates and removes it"
if [ -d /run/systemd/system ]; then
  note "systemd is PID 1: the units the packages' scripts start are stopped after each dpkg -i"
else
  note "systemd is not PID 1 here: the binaries are run by this script as their units would"
fi
note "work dir $work"
: >"$work/client.toml"

# --- 1. build -----------------------------------------------------------------------------

build_debs() { # build_debs DIR [cargo deb options]
  local dir=$1 pkg
  shift
  mkdir -p "$dir"
  for pkg in platter platter-agent; do
    cargo deb -p "$pkg" --no-build --strip --output "$dir/" "$@" >"$work/cargo-deb.log" 2>&1 ||
      { cat "$work/cargo-deb.log" >&2; die "cargo deb -p $pkg failed"; }
  done
  ls "$dir"/platter_*.deb "$dir"/platter-agent_*.deb >/dev/null 2>&1 || die "cargo deb made no .deb in $dir"
}

step "build the packages: cargo deb --no-build --strip"
build_debs "$work/v1"
deb_coordinator=$(ls "$work"/v1/platter_*.deb)
deb_agent=$(ls "$work"/v1/platter-agent_*.deb)
version1=$(dpkg-deb -f "$deb_coordinator" Version)
note "$(basename "$deb_coordinator") ($(du -h "$deb_coordinator" | cut -f1)), $(basename "$deb_agent") ($(du -h "$deb_agent" | cut -f1))"

step "package contents"
check_contents() { # DEB BINARY UNIT DEFAULT
  local deb=$1 bin=$2 unit=$3 default=$4 list x
  list=$(dpkg-deb -c "$deb" | awk '{print $NF}')
  for x in "./usr/bin/$bin" "./usr/lib/systemd/system/$unit" "./etc/default/$default"; do
    grep -qx "$x" <<<"$list" || die "$(basename "$deb") lacks $x"
  done
  # (Whole outputs in variables: `grep -q` on a pipe may end it early, and pipefail
  # would take tar's SIGPIPE for a failure.)
  x=$(dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles)
  grep -qx "/etc/default/$default" <<<"$x" || die "$(basename "$deb"): /etc/default/$default is not a conffile"
  list=$(dpkg-deb --ctrl-tarfile "$deb" | tar -t)
  for x in postinst prerm postrm; do
    grep -qx "./$x" <<<"$list" || die "$(basename "$deb") has no $x"
  done
  rm -rf "$work/x"
  mkdir -p "$work/x"
  dpkg-deb -x "$deb" "$work/x"
  # Debug info (.debug_info, .debug_line, …; .debug_gdb_scripts is Rust's loaded section,
  # which strip keeps) and the symbol table.
  local sections
  sections=$(readelf -SW "$work/x/usr/bin/$bin" | grep -oE '\.(debug_[a-z_]+|symtab)' | grep -v '^\.debug_gdb_scripts$' | tr '\n' ' ' || true)
  [ -z "$sections" ] || die "$(basename "$deb"): usr/bin/$bin is not stripped (sections: $sections)"
  note "$(basename "$deb"): /usr/bin/$bin (stripped, $(du -h "$work/x/usr/bin/$bin" | cut -f1)), $unit, conffile /etc/default/$default"
  rm -rf "$work/x"
}
check_contents "$deb_coordinator" platter platter-coordinator.service platter
check_contents "$deb_agent" platter-agent platter-agent.service platter-agent
[[ "$(dpkg-deb -f "$deb_coordinator" Depends)" == *adduser* ]] || die "platter does not depend on adduser"

# --- 2. install -----------------------------------------------------------------------------

step "dpkg -i both packages"
installed=1
dpkg -i "$deb_coordinator" "$deb_agent" </dev/null 2>&1 | tee "$work/dpkg-install.log" ||
  die "dpkg -i failed"
stop_systemd_units
for pkg in platter platter-agent; do
  [ "$(pkg_status "$pkg")" = installed ] || die "$pkg is $(pkg_status "$pkg") after dpkg -i"
done
grep -q "platter-agent: not enabled" "$work/dpkg-install.log" ||
  die "the agent's postinst did not say how to enable it"

step "systemd-analyze verify of the installed units"
# Without systemd as PID 1 verify still loads the units with their dependencies from
# /usr/lib/systemd/system and checks every key and that each Exec*= binary exists.
systemd-analyze verify "$coordinator_unit" "$agent_unit" 2>&1 | tee "$work/verify.log" ||
  die "systemd-analyze verify failed"
! grep -q . "$work/verify.log" || die "systemd-analyze verify had something to say (above)"
note "both units verify cleanly"

step "the user, directories, conffiles and enabled units"
IFS=: read -r _ _ uid gid _ home shell < <(getent passwd platter) || die "no user platter"
[ "$uid" -lt 1000 ] || die "platter is not a system user (uid $uid)"
[ "$(getent group platter | cut -d: -f3)" = "$gid" ] || die "platter's primary group is not platter"
[ "$home" = /var/lib/platter ] || die "platter's home is $home"
[ "$shell" = /usr/sbin/nologin ] || die "platter's shell is $shell"
note "user platter: uid $uid, group platter, home $home, shell $shell"
expect_owner_mode /var/lib/platter "platter:platter 750"
expect_owner_mode /var/lib/platter-agent "root:root 700"
expect_owner_mode /etc/platter/tls "root:platter 750"
expect_owner_mode /etc/platter-agent/tls "root:root 700"
[ "$(unit_value "$coordinator_unit" User)" = platter ] || die "the coordinator's unit does not run as platter"
[ -z "$(unit_value "$agent_unit" User)" ] || die "the agent's unit must run as root (it has User=)"
for pkg in platter platter-agent; do
  conf=/etc/default/$pkg
  expect_owner_mode "$conf" "root:root 644"
  grep -q "^ $conf " <<<"$(dpkg-query -W -f='${Conffiles}\n' "$pkg")" || die "$conf is not a conffile of $pkg"
done
[ -L "$wants/platter-coordinator.service" ] || die "the coordinator's unit is not enabled"
[ ! -e "$wants/platter-agent.service" ] || die "the agent's unit is enabled although no coordinator is set"
note "enabled: platter-coordinator.service; not enabled: platter-agent.service (no coordinator set)"

step "the units are skipped until configured (ExecCondition)"
! run_as_unit "$coordinator_unit" "$work/skipped.log" || die "the coordinator started without a TLS identity"
! run_as_unit "$agent_unit" "$work/skipped.log" || die "the agent started without PLATTER_COORDINATOR"
note "coordinator without /etc/platter/tls/cert.pem, agent without PLATTER_COORDINATOR: both skipped"

# --- 3. run ----------------------------------------------------------------------------------

step "TLS identities with platter certs, in /etc/platter/tls and /etc/platter-agent/tls"
/usr/bin/platter certs init --dir "$pki" >/dev/null
/usr/bin/platter certs issue coordinator localhost 127.0.0.1 --dir "$pki" >/dev/null
/usr/bin/platter certs issue agent "$host" --dir "$pki" >/dev/null
/usr/bin/platter certs issue operator pkgtest-ci --dir "$pki" >/dev/null
install -o root -g platter -m 0640 "$pki"/coordinator-localhost/{ca,cert,key}.pem /etc/platter/tls/
install -o root -g root -m 0600 "$pki/agent-$host"/{ca,cert,key}.pem /etc/platter-agent/tls/
note "coordinator localhost/127.0.0.1, agent $host, operator pkgtest-ci"

step "local edits of /etc/default/platter and /etc/default/platter-agent"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
sed -i "s|^PLATTER_SERVE_ARGS=.*|PLATTER_SERVE_ARGS=\"--listen 127.0.0.1:$port\"|" /etc/default/platter
echo "# local edit by deploy/debian/test.sh" >>/etc/default/platter
sed -i "s|^#PLATTER_COORDINATOR=.*|PLATTER_COORDINATOR=https://127.0.0.1:$port|; s|^#PLATTER_HOST=.*|PLATTER_HOST=$host|" \
  /etc/default/platter-agent
echo "# local edit by deploy/debian/test.sh" >>/etc/default/platter-agent
grep -q "^PLATTER_COORDINATOR=https://127.0.0.1:$port$" /etc/default/platter-agent ||
  die "could not set PLATTER_COORDINATOR in /etc/default/platter-agent"
cp /etc/default/platter "$work/default-platter.edited"
cp /etc/default/platter-agent "$work/default-platter-agent.edited"
note "coordinator on 127.0.0.1:$port; agent $host pointed at it"
# What an operator does next (README): enable the agent. systemctl works on the unit
# files when systemd is not running.
systemctl enable platter-agent.service >/dev/null 2>&1 || deb-systemd-helper enable platter-agent.service
[ -L "$wants/platter-agent.service" ] || die "systemctl enable platter-agent did not enable it"

step "start the coordinator (as platter) and the agent (as root) from their units"
start_coordinator
start_agent
[ -s /var/lib/platter/platter.db ] || die "no store at /var/lib/platter/platter.db"
expect_owner_mode /var/lib/platter/platter.db "platter:platter $(stat -c %a /var/lib/platter/platter.db)"

step "a campaign: /bin/true, 3 repetitions"
run_campaign deb-smoke
first_campaign=$CAMPAIGN_ID
stop_all
[ -n "$(ls -A /var/lib/platter-agent)" ] || die "the agent left no journal in /var/lib/platter-agent"
journal_sums >"$work/journal.before"
note "journal: $(wc -l <"$work/journal.before") file(s) in /var/lib/platter-agent"

# --- 4. upgrade ------------------------------------------------------------------------------

step "build a higher version and upgrade with dpkg -i"
version2=$version1+test2
build_debs "$work/v2" --deb-version "$version2" --fast
dpkg --compare-versions "$version2" gt "$version1" || die "$version2 is not above $version1"
dpkg -i "$work"/v2/platter_*.deb "$work"/v2/platter-agent_*.deb </dev/null 2>&1 | tee "$work/dpkg-upgrade.log" ||
  die "dpkg -i (upgrade) failed"
stop_systemd_units
for pkg in platter platter-agent; do
  [ "$(pkg_version "$pkg")" = "$version2" ] || die "$pkg is at $(pkg_version "$pkg"), not $version2"
done
note "both at $version2"

step "after the upgrade: local edits, journal, store, owners, enabled units"
cmp -s /etc/default/platter "$work/default-platter.edited" || die "the upgrade changed /etc/default/platter"
cmp -s /etc/default/platter-agent "$work/default-platter-agent.edited" || die "the upgrade changed /etc/default/platter-agent"
for f in /etc/default/platter /etc/default/platter-agent; do
  ! ls "$f".dpkg-* >/dev/null 2>&1 || die "the upgrade left $(ls "$f".dpkg-*)"
done
note "/etc/default/platter and /etc/default/platter-agent kept with their local edits"
journal_sums | cmp -s - "$work/journal.before" || die "the upgrade changed the agent's journal"
note "journal kept, byte for byte"
[ -s /var/lib/platter/platter.db ] || die "the upgrade lost the store"
expect_owner_mode /var/lib/platter "platter:platter 750"
expect_owner_mode /var/lib/platter-agent "root:root 700"
[ -L "$wants/platter-coordinator.service" ] || die "the upgrade disabled the coordinator's unit"
[ -L "$wants/platter-agent.service" ] || die "the upgrade disabled the agent's unit"
note "both units still enabled"

step "the upgraded coordinator and agent: the old campaign is there, a new one runs"
start_coordinator
start_agent
op status "$first_campaign" --output json >"$work/status.json" || die "platter status $first_campaign failed"
python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))
sys.exit(0 if s["campaign_id"] == sys.argv[2] and s["state"] == "done" and s["steps_failed"] == 0 else 1)
' "$work/status.json" "$first_campaign" ||
  die "the store lost campaign $first_campaign or it is not done: $(head -c 400 "$work/status.json")"
note "campaign $first_campaign still there, done"
run_campaign deb-smoke-upgraded
stop_all
journal_sums >"$work/journal.before-purge"

# --- 5. purge --------------------------------------------------------------------------------

step "dpkg --purge both (no /etc/platter-agent/purge-journals)"
dpkg --purge platter-agent platter </dev/null 2>&1 | tee "$work/dpkg-purge.log" || die "dpkg --purge failed"
for pkg in platter platter-agent; do
  [ "$(pkg_status "$pkg")" = not-installed ] || die "$pkg is $(pkg_status "$pkg") after purge"
done
! getent passwd platter >/dev/null || die "purge left the user platter"
! getent group platter >/dev/null || die "purge left the group platter"
for gone in /var/lib/platter /etc/default/platter /etc/default/platter-agent /usr/bin/platter /usr/bin/platter-agent \
  "$coordinator_unit" "$agent_unit" "$wants/platter-coordinator.service" "$wants/platter-agent.service" \
  /etc/platter-agent/purge-journals /var/lib/platter-agent.lock; do
  if [ -e "$gone" ] || [ -L "$gone" ]; then die "purge left $gone"; fi
done
note "removed: packages, user and group platter, /var/lib/platter, conffiles, units and their links"
[ -d /var/lib/platter-agent ] || die "purge removed the agent's journal without /etc/platter-agent/purge-journals"
journal_sums | cmp -s - "$work/journal.before-purge" || die "purge changed the agent's journal"
grep -q "kept the journal" "$work/dpkg-purge.log" || die "purge did not say it kept the journal"
note "kept: /var/lib/platter-agent (the journal), as documented"
# The TLS identities this test put there are the operator's files: kept, then removed here.
[ -f /etc/platter/tls/key.pem ] || die "purge removed a TLS identity it did not make (/etc/platter/tls)"
[ -f /etc/platter-agent/tls/key.pem ] || die "purge removed a TLS identity it did not make (/etc/platter-agent/tls)"
note "kept: the TLS identities put in /etc/platter/tls and /etc/platter-agent/tls"
rm -rf /etc/platter /etc/platter-agent

step "install the agent with a coordinator already set: the postinst enables it"
cat >/etc/default/platter-agent <<EOF
PLATTER_COORDINATOR=https://127.0.0.1:$port
EOF
dpkg -i --force-confdef --force-confold "$work"/v2/platter-agent_*.deb </dev/null 2>&1 | tee "$work/dpkg-preseed.log" ||
  die "dpkg -i of the agent with a preseeded /etc/default/platter-agent failed"
stop_systemd_units
[ -L "$wants/platter-agent.service" ] || die "the postinst did not enable the agent although a coordinator is set"
grep -q "^PLATTER_COORDINATOR=https://127.0.0.1:$port$" /etc/default/platter-agent ||
  die "dpkg replaced the preseeded /etc/default/platter-agent"
journal_sums | cmp -s - "$work/journal.before-purge" || die "installing again changed the kept journal"
expect_owner_mode /var/lib/platter-agent "root:root 700"
note "enabled at installation; the kept journal is the agent's again"

step "dpkg --purge platter-agent with /etc/platter-agent/purge-journals"
touch /etc/platter-agent/purge-journals
dpkg --purge platter-agent </dev/null 2>&1 | tee "$work/dpkg-purge2.log" || die "dpkg --purge platter-agent failed"
[ "$(pkg_status platter-agent)" = not-installed ] || die "platter-agent is $(pkg_status platter-agent) after purge"
for gone in /var/lib/platter-agent /etc/platter-agent /etc/default/platter-agent "$wants/platter-agent.service"; do
  if [ -e "$gone" ] || [ -L "$gone" ]; then die "purge with purge-journals left $gone"; fi
done
installed=0
note "removed: the journal, /etc/platter-agent (with purge-journals), the conffile, the link"

step "nothing of the packages is left"
leftovers=$(find /etc /etc/default /var/lib /usr/bin /usr/lib/systemd/system /etc/systemd/system/*.wants \
  /var/lib/systemd/deb-systemd-helper-enabled /var/lib/systemd/deb-systemd-helper-masked \
  -maxdepth 2 -name '*platter*' 2>/dev/null | sort -u || true)
[ -z "$leftovers" ] || die "left after purging: $(tr '\n' ' ' <<<"$leftovers")"
note "no platter files in /etc, /var/lib, /usr/bin, the unit directories or deb-systemd-helper's state"
