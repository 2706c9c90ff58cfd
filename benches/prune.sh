#!/usr/bin/env bash
# A run's first event at 1,000 runs/s on SQLite (the load bench's paced phase), without and then
# with `agent-tower prune` deleting a backlog of about 110,000 ended runs meanwhile.
#
#   bash benches/prune.sh
#
# Builds the release binary and the load bench (`cargo bench --bench load --features cli`) and
# drives one `agent-tower serve` started here (LOAD_URL).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --features cli --quiet
BIN=target/release/agent-tower
DIR=$(mktemp -d)
DB="sqlite://$DIR/runs.db"
ADDR=127.0.0.1:18777
"$BIN" serve --addr $ADDR --store "$DB" --scripted-knobs --busy-thread queue --no-ui 2>"$DIR/serve.log" &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true; rm -rf "$DIR"' EXIT
until curl -fsS "http://$ADDR/health" >/dev/null 2>&1; do sleep 0.2; done
load() {
  env LOAD_URL="http://$ADDR" LOAD_STORES=sqlite LOAD_LONG= LOAD_IDLE= "$@" \
    cargo bench --quiet --bench load --features cli 2>/dev/null | grep -E "short|paced"
}
echo "== a backlog: 100,000 runs"; load LOAD_SHORT=50x1000,50x1000 LOAD_PACED=
echo "== paced, nothing else"; load LOAD_SHORT= LOAD_PACED=1000x10
( sleep 1; "$BIN" prune --store "$DB" --older-than 0s 2>"$DIR/prune.log" ) &
PRUNER=$!
echo "== paced, pruning the backlog meanwhile"; load LOAD_SHORT= LOAD_PACED=1000x10
wait $PRUNER
grep -o "pruned=[0-9]*" "$DIR/prune.log"
