#!/usr/bin/env bash
# Times the official AG-UI encoders next to ours, on one machine in one run (by hand, not in CI):
#   bash benches/peers/run.sh
# Installs PyPI ag-ui-protocol 1.0.0 and npm @ag-ui/encoder 1.0.0 under target/peers/.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work="$root/target/peers"
mkdir -p "$work/node"

python3 -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet "ag-ui-protocol==1.0.0"
(cd "$work/node" && [ -f package.json ] || npm init -y >/dev/null)
(cd "$work/node" && npm install --silent --no-audit --no-fund "@ag-ui/encoder@1.0.0" "@ag-ui/core@1.0.0")
cp "$here/encode.mjs" "$work/node/encode.mjs"

echo "== peers (10,000 TEXT_MESSAGE_CONTENT events, SSE-encoded) =="
"$work/venv/bin/python" "$here/encode.py"
node "$work/node/encode.mjs"

echo "== agent-tower (cargo bench --bench overhead -- tokens) =="
cd "$root"
cargo bench --quiet --bench overhead -- tokens 2>/dev/null |
  awk '/^allocations/ {print; next} /^tokens\// {name=$1} /thrpt:/ && name != "" {gsub(/\[|\]/,""); print name ": " $4 " " $5 " (median)"; name=""}'
