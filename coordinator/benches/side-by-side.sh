#!/usr/bin/env bash
# The coordinator's benchmarks of two builds side by side, interleaved (before, after, before,
# after …): how issue 28's before and after were measured (BENCHMARKS.md).
#
#   coordinator/benches/side-by-side.sh BEFORE_DIR AFTER_DIR OUT
#
# BEFORE_DIR and AFTER_DIR are worktrees whose benches are already built in their own
# target dir (`CARGO_TARGET_DIR=DIR/target cargo bench -p platter --no-run`, which also
# builds DIR/target/release/platter). The compiled bench binaries are run directly, each
# run under `flock /tmp/bench.lock` so no other benchmark that takes the lock runs beside
# it. OUT (a directory; a second call adds runs to it) gets one raw log per run and
# summary.md: a table per bench with every run, after/before per pair and the medians.
#
# Environment: PAIRS (default 3: store_write and report_scale), FLEET_PAIRS (default 2;
# fleet_scale also reads its own FLEET_* variables, e.g. FLEET_IDLE_SECS),
# PG_URL (default the test server below; empty: SQLite only), FLEET_ARGS (default
# "10000 1000"), REPORT_ARGS (default "--samples 1000000 --metrics 6"), ORDER (default
# "before after": which side of each pair runs first), BENCHES (default all five:
# store_write-sqlite store_write-pg report_scale-sqlite report_scale-pg fleet_scale).
set -euo pipefail

[ $# -eq 3 ] || { echo "usage: $0 BEFORE_DIR AFTER_DIR OUT" >&2; exit 2; }
BEFORE=$(realpath "$1")
AFTER=$(realpath "$2")
OUT=$3
PAIRS=${PAIRS:-3}
FLEET_PAIRS=${FLEET_PAIRS:-2}
PG_URL=${PG_URL-postgres://platter:platter@127.0.0.1:5432/platter_test}
FLEET_ARGS=${FLEET_ARGS:-10000 1000}
REPORT_ARGS=${REPORT_ARGS:---samples 1000000 --metrics 6}
ORDER=${ORDER:-before after}
BENCHES=${BENCHES:-store_write-sqlite store_write-pg report_scale-sqlite report_scale-pg fleet_scale}
mkdir -p "$OUT"

# The newest compiled bench binary NAME in DIR's target.
bench_bin() {
    local dir=$1 name=$2 f
    f=$(find "$dir/target/release/deps" -maxdepth 1 -type f -executable -name "$name-*" \
        -printf '%T@ %p\n' | sort -n | tail -1 | cut -d' ' -f2-)
    [ -n "$f" ] || { echo "no $name bench built in $dir/target" >&2; exit 1; }
    echo "$f"
}

for d in "$BEFORE" "$AFTER"; do
    [ -x "$d/target/release/platter" ] || { echo "no $d/target/release/platter" >&2; exit 1; }
    for b in store_write report_scale fleet_scale; do bench_bin "$d" $b >/dev/null; done
done

{
    echo "started $(date -u '+%Y-%m-%d %H:%M:%S') UTC"
    for d in "$BEFORE" "$AFTER"; do
        echo "$d: $(git -C "$d" rev-parse HEAD) $(git -C "$d" status --porcelain | tr '\n' ' ')"
    done
} | tee -a "$OUT/meta.txt"

# drop_schemas FROM TO: drops the filled schemas (over 50 MB) that PostgreSQL runs made
# between those Unix times (store::testing::fresh_postgres names them t_<time>_<hex>).
# report_scale's `ANALYZE` reads every table of the database: with a dozen runs' millions
# of rows left behind it overran the store's 10 s deadline and the run failed.
drop_schemas() {
    psql "$PG_URL" -Atq -v ON_ERROR_STOP=1 <<SQL
SET client_min_messages = warning;
SELECT format('DROP SCHEMA %I CASCADE', n.nspname)
FROM pg_namespace n JOIN pg_class c ON c.relnamespace = n.oid
WHERE n.nspname ~ '^t_[0-9]+_[0-9a-f]{8}\$'
  AND split_part(n.nspname, '_', 2)::bigint BETWEEN $1 AND $2
GROUP BY n.nspname HAVING sum(pg_total_relation_size(c.oid)) > 50e6
\\gexec
SQL
}

# run TAG SIDE ENV… -- BENCH ARGS…: one run, logged to OUT/TAG-SIDE-N.log.
run() {
    local tag=$1 side=$2 dir
    shift 2
    case $side in before) dir=$BEFORE ;; after) dir=$AFTER ;; esac
    local envs=()
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    local bench=$1
    shift
    local bin n log
    bin=$(bench_bin "$dir" "$bench")
    n=$(find "$OUT" -maxdepth 1 -name "$tag-$side-*.log" | wc -l)
    log=$OUT/$tag-$side-$((n + 1)).log
    {
        echo "# $(date -u '+%H:%M:%S') UTC, load $(cut -d' ' -f1-3 /proc/loadavg)"
        echo "# ${envs[*]} $bin --bench $*"
    } >"$log"
    echo "$(date -u +%H:%M:%S) $tag $side $((n + 1))"
    local t0
    t0=$(date +%s)
    # Benches find their data relative to the package, as cargo runs them.
    (cd "$dir/coordinator" &&
        flock /tmp/bench.lock env "${envs[@]}" PLATTER_BIN="$dir/target/release/platter" \
            "$bin" --bench "$@") >>"$log" 2>&1 || echo "# exit $?" >>"$log"
    echo "# done $(date -u '+%H:%M:%S') UTC" >>"$log"
    case $tag in *-pg) drop_schemas "$t0" "$(date +%s)" ;; esac
}

# pair TAG ENV… -- BENCH ARGS…: one run of each side, in ORDER, if TAG is in BENCHES (and
# PG_URL is set for a PostgreSQL one).
pair() {
    case " $BENCHES " in *" $1 "*) ;; *) return 0 ;; esac
    case $1 in *-pg) [ -n "$PG_URL" ] || return 0 ;; esac
    local side
    for side in $ORDER; do run "$1" "$side" "${@:2}"; done
}

# Round by round, so a set stopped early still has pairs of every bench.
rounds=$((PAIRS > FLEET_PAIRS ? PAIRS : FLEET_PAIRS))
for round in $(seq "$rounds"); do
    if [ "$round" -le "$PAIRS" ]; then
        pair store_write-sqlite PLATTER_BENCH_POSTGRES= -- store_write
        pair store_write-pg PLATTER_BENCH_POSTGRES="$PG_URL" -- store_write
        # shellcheck disable=SC2086 # REPORT_ARGS is a list of arguments
        pair report_scale-sqlite PLATTER_BENCH_POSTGRES= -- report_scale $REPORT_ARGS
        # shellcheck disable=SC2086
        pair report_scale-pg PLATTER_BENCH_POSTGRES="$PG_URL" -- report_scale $REPORT_ARGS
    fi
    if [ "$round" -le "$FLEET_PAIRS" ]; then
        # shellcheck disable=SC2086
        pair fleet_scale PLATTER_BENCH_POSTGRES= -- fleet_scale $FLEET_ARGS
    fi
done
echo "finished $(date -u '+%Y-%m-%d %H:%M:%S') UTC" | tee -a "$OUT/meta.txt"

# The figures out of the logs, a Markdown table per bench.
python3 - "$OUT" >"$OUT/summary.md" <<'EOF'
import glob, os, re, statistics, sys

out = sys.argv[1]

def num(s):
    return float(s.replace(",", ""))

def store_write(t):
    r = {}
    m = re.search(r"store_write \([^)]*\):.* in ([\d.]+) s = (\d+) samples/s", t)
    if m:
        r["samples/s"] = num(m[2])
    m = re.search(r"reference \(PostgreSQL.*= (\d+) samples/s; platter / reference: ([\d.]+)", t)
    if m:
        r["reference samples/s"] = num(m[1])
        r["platter/reference (time)"] = num(m[2])
    return r

def report_scale(t):
    r = {}
    m = re.search(r"filled .* in ([\d.]+) s", t)
    if m:
        r["fill s"] = num(m[1])
    for name, pat in [("json", r"report --format json\s+([\d.]+) s\s+peak RSS\s+([\d.]+)"),
                      ("table", r"report --format table\s+([\d.]+) s\s+peak RSS\s+([\d.]+)"),
                      ("compare", r"compare\s+([\d.]+) s\s+peak RSS\s+([\d.]+)")]:
        m = re.search(pat, t)
        if m:
            r[f"{name} s"] = num(m[1])
            r[f"{name} MiB"] = num(m[2])
    return r

def fleet_scale(t):
    r = {}
    def cell(label):
        m = re.search(r"^\| " + re.escape(label) + r"[^|]*\| ([^|]*) \|", t, re.M)
        return m[1] if m else None
    c = cell("connect time, all")
    if c:
        r["connect all s"] = num(re.match(r"([\d.]+)", c)[1])
    c = cell("coordinator RSS: started / all connected / after idle / after fan-out")
    if c:
        v = [num(x) for x in re.findall(r"[\d.]+", c)]
        r["RSS connected MiB"], r["RSS after fan-out MiB"] = v[1], v[3]
    c = cell("coordinator VmHWM")
    if c:
        r["VmHWM MiB"] = num(re.match(r"([\d.]+)", c)[1])
    c = cell("CPU while connecting: coordinator")
    if c:
        r["CPU connecting s"] = num(re.match(r"([\d.]+)", c)[1])
    m = re.search(r"^\| idle \d+ s: coordinator CPU \| ([\d.]+) s", t, re.M)
    if m:
        r["idle CPU s"] = num(m[1])
    c = cell("plan fan-out, from submit start")
    if c:
        v = c.split(" / ")
        if len(v) == 4 and re.match(r"[\d.]+", v[3]):
            r["fan-out all s"] = num(re.match(r"([\d.]+)", v[3])[1])
    c = cell("other processes' CPU on this machine")
    if c:
        r["others' cores (connect)"] = num(re.findall(r"[\d.]+", c)[0])
    c = cell("agents connected (bench / coordinators say)")
    if c:
        r["connected"] = num(re.match(r"(\d+)", c)[1])
    return r

parse = {"store_write": store_write, "report_scale": report_scale, "fleet_scale": fleet_scale}
tags = sorted({os.path.basename(p).rsplit("-", 2)[0] for p in glob.glob(f"{out}/*-*-*.log")})
order = ["store_write-sqlite", "store_write-pg", "report_scale-sqlite", "report_scale-pg", "fleet_scale"]
tags.sort(key=lambda t: order.index(t) if t in order else 99)
for tag in tags:
    runs = {}
    for side in ("before", "after"):
        logs = sorted(glob.glob(f"{out}/{tag}-{side}-*.log"),
                      key=lambda p: int(p.rsplit("-", 1)[1][:-4]))
        runs[side] = []
        for p in logs:
            t = open(p).read()
            r = parse[tag.split("-")[0]](t)
            if "# exit" in t:
                r["failed"] = True
            runs[side].append(r)
    keys = []
    for r in runs["before"] + runs["after"]:
        keys += [k for k in r if k != "failed" and k not in keys]
    print(f"### {tag}\n")
    print("| figure | " + " | ".join(f"pair {i + 1}: before / after (ratio)" for i in range(len(runs["before"])))
          + " | median before / after (ratio) |")
    print("|---|" + "---|" * (len(runs["before"]) + 1))
    for k in keys:
        cells, bs, as_ = [], [], []
        for b, a in zip(runs["before"], runs["after"]):
            if k in b and k in a:
                bs.append(b[k]); as_.append(a[k])
                cells.append(f"{b[k]:,.6g} / {a[k]:,.6g} ({a[k] / b[k]:.3f})" if b[k] else f"{b[k]:g} / {a[k]:g}")
            else:
                cells.append("failed" if b.get("failed") or a.get("failed") else "-")
        if bs:
            mb, ma = statistics.median(bs), statistics.median(as_)
            ratios = [a / b for b, a in zip(bs, as_) if b]
            med = f"{mb:,.6g} / {ma:,.6g} ({ma / mb:.3f}; median of ratios {statistics.median(ratios):.3f})" if mb else "-"
        else:
            med = "-"
        print(f"| {k} | " + " | ".join(cells) + f" | {med} |")
    print()
EOF
cat "$OUT/summary.md"
