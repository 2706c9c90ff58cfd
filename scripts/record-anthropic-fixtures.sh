#!/usr/bin/env bash
# Records the Anthropic fixtures of tests/fixtures/anthropic/ from the real Messages API: the
# first step of a thinking, tool-using turn (thinking_tool_calls.sse) and the step after its tool
# results (answer.sse), and cuts the first one mid-arguments again (tool_call_cut.sse). The error
# fixture (overloaded.http) cannot be asked for; it stays as Anthropic documents it.
#
#   ANTHROPIC_API_KEY=… bash scripts/record-anthropic-fixtures.sh [model]
set -euo pipefail
cd "$(dirname "$0")/.."
: "${ANTHROPIC_API_KEY:?set ANTHROPIC_API_KEY}"

python3 - "${1:-claude-sonnet-4-5}" <<'PY'
import json, os, sys, urllib.request
from pathlib import Path

model = sys.argv[1]
out = Path("tests/fixtures/anthropic")
add = {"name": "add", "description": "Adds two numbers.", "input_schema": {
    "type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
    "required": ["a", "b"]}}
question = {"role": "user", "content": [{"type": "text", "text": "What are 2 + 3 and 40 + 2?"}]}

def post(messages):
    body = {"model": model, "max_tokens": 8192, "stream": True, "tools": [add],
            "thinking": {"type": "enabled", "budget_tokens": 2048}, "messages": messages}
    request = urllib.request.Request("https://api.anthropic.com/v1/messages",
        data=json.dumps(body).encode(), method="POST", headers={
            "content-type": "application/json", "anthropic-version": "2023-06-01",
            "x-api-key": os.environ["ANTHROPIC_API_KEY"]})
    with urllib.request.urlopen(request) as response:
        head = [f"status: {response.status}"] + [
            f"{name}: {response.headers[name]}" for name in ("content-type", "request-id")]
        return head, response.read().decode()

def events(body):
    return [json.loads(line[6:]) for line in body.splitlines() if line.startswith("data: ")]

def write(name, note, head, body):
    comment = [f"# Recorded from Anthropic's Messages API ({model}) by "
               "scripts/record-anthropic-fixtures.sh.", f"# {note}"]
    (out / name).write_text("\n".join(comment + head) + "\n\n" + body)

first_head, first = post([question])
write("thinking_tool_calls.sse", "The first step: thinking, then calls of `add`.", first_head, first)

# The assistant turn as it must go back: thinking with its signature, text, the calls.
blocks, results = {}, []
for event in events(first):
    if event["type"] == "content_block_start":
        blocks[event["index"]] = dict(event["content_block"])
        if blocks[event["index"]]["type"] == "tool_use":
            blocks[event["index"]]["input"] = ""
    elif event["type"] == "content_block_delta":
        block, delta = blocks[event["index"]], event["delta"]
        kind = delta["type"]
        if kind == "thinking_delta": block["thinking"] += delta["thinking"]
        elif kind == "signature_delta": block["signature"] = block.get("signature", "") + delta["signature"]
        elif kind == "text_delta": block["text"] += delta["text"]
        elif kind == "input_json_delta": block["input"] += delta["partial_json"]
for block in blocks.values():
    if block["type"] == "tool_use":
        block["input"] = json.loads(block["input"] or "{}")
        total = block["input"].get("a", 0) + block["input"].get("b", 0)
        results.append({"type": "tool_result", "tool_use_id": block["id"], "content": str(total)})
assistant = {"role": "assistant", "content": [blocks[i] for i in sorted(blocks)]}
head, answer = post([question, assistant, {"role": "user", "content": results}])
write("answer.sse", "The step after the tool results: the answer.", head, answer)

# Cut in the middle of the last call's arguments, the connection dropped.
frames = first.split("\n\n")
last = max(i for i, f in enumerate(frames) if "input_json_delta" in f)
write("tool_call_cut.sse", "The first step, its connection dropped in the middle of the last "
      "call's arguments.", first_head[:2] + ["x-replay-end: abort"], "\n\n".join(frames[:last]) + "\n\n")
PY
echo "recorded into tests/fixtures/anthropic/"
