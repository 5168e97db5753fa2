#!/bin/sh
# Short steps in a fleet (issue 12: >= 500 steps/s per host when fsync is cheap): a
# coordinator (`platter serve`) and N agents (`platter agent`), plaintext on loopback, store
# and journals on /dev/shm, 1000 × /bin/true per host; prints the wall time from submit to
# the end of `platter watch` and steps/s per host. Usage: P=target/release/platter
# coordinator/benches/fleet-steps.sh N
set -eu
P=${P:-target/release/platter}
N=${1:-1}
D=$(mktemp -d /dev/shm/fleet.XXXX)
PORT=7611
$P serve --listen 127.0.0.1:$PORT --db $D/c.db --dangerously-insecure > $D/serve.log 2>&1 &
SERVE=$!
sleep 0.5
HOSTS=""
i=1
while [ $i -le $N ]; do
  $P agent --coordinator http://127.0.0.1:$PORT --name h$i --state-dir $D/h$i --dangerously-insecure > $D/h$i.log 2>&1 &
  HOSTS="$HOSTS h$i"
  i=$((i+1))
done
sleep 2
LIST=$(echo $HOSTS | sed 's/ /, /g')
printf 'name: short\nhosts: { names: [%s] }\nworkload: { command: { run: /bin/true } }\nrepeat: 1000\n' "$LIST" > $D/c.yaml
export PLATTER_COORDINATOR=http://127.0.0.1:$PORT
start=$(date +%s.%N)
$P submit $D/c.yaml --dangerously-insecure > /dev/null
$P watch short --dangerously-insecure > /dev/null 2>&1 || true
end=$(date +%s.%N)
python3 -c "t=$end-$start; print('hosts=$N wall=%.2f s  steps/s per host=%.0f' % (t, 1000/t))"
kill $SERVE; pkill -f "agent --coordinator http://127.0.0.1:$PORT" || true
sleep 0.5
rm -rf $D
