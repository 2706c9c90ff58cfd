#!/usr/bin/env bash
# End to end with a real local model (not part of CI): llama.cpp's llama-server with
# SmolLM2-135M-Instruct (both from PyPI packages, see scripts/llama-server.sh), `agent-tower serve
# --model openai:smollm2 --base-url …` in front of it, and the official AG-UI client driving one
# chat and one tool call through it (tests/conformance/local-model-e2e.mjs).
#
#   bash scripts/local-model-e2e.sh
set -euo pipefail
cd "$(dirname "$0")/.."

{ read -r server; read -r model; read -r templates; } < <(bash scripts/llama-server.sh)
llama_port=${LLAMA_PORT:-18090}
agent_port=${AGENT_PORT:-18091}
logs=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT

wait_for() {
  until curl -sf "$1" > /dev/null; do
    kill -0 "$2" 2>/dev/null || { echo "$3 died; its log: $4" >&2; cat "$4" >&2; exit 1; }
    sleep 0.5
  done
}

# SmolLM2 speaks ChatML; Qwen2.5's template adds tools in a format llama.cpp parses.
"$server" -m "$model" --host 127.0.0.1 --port "$llama_port" -c 4096 -np 1 --jinja \
  --chat-template-file "$templates/Qwen-Qwen2.5-7B-Instruct.jinja" > "$logs/llama.log" 2>&1 &
pids+=($!)
wait_for "127.0.0.1:$llama_port/health" "${pids[-1]}" llama-server "$logs/llama.log"

cargo build --release --features cli
target/release/agent-tower serve --addr "127.0.0.1:$agent_port" --store none \
  --model openai:smollm2 --base-url "http://127.0.0.1:$llama_port/v1" > "$logs/agent.log" 2>&1 &
pids+=($!)
wait_for "127.0.0.1:$agent_port/health" "${pids[-1]}" agent-tower "$logs/agent.log"

cd tests/conformance
[[ -d node_modules/@ag-ui/client ]] || npm ci --no-audit --no-fund
node local-model-e2e.mjs "http://127.0.0.1:$agent_port/"
