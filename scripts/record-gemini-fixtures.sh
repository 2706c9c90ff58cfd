#!/usr/bin/env bash
# Records the Gemini fixtures of tests/fixtures/gemini/ from the real API: the first step of a
# thinking, tool-using turn (thinking_tool_calls.sse), the step after its function responses
# (answer.sse), and that answer cut after its first event (cut.sse). The safety stop and the
# quota error cannot be asked for; they stay as Google documents them.
#
#   GEMINI_API_KEY=… bash scripts/record-gemini-fixtures.sh [model]
set -euo pipefail
cd "$(dirname "$0")/.."
: "${GEMINI_API_KEY:?set GEMINI_API_KEY}"

python3 - "${1:-gemini-2.5-flash}" <<'PY'
import json, os, sys, urllib.request
from pathlib import Path

model = sys.argv[1]
out = Path("tests/fixtures/gemini")
add = {"name": "add", "description": "Adds two numbers.", "parameters": {
    "type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
    "required": ["a", "b"]}}
question = {"role": "user", "parts": [{"text": "What are 2 + 3 and 40 + 2?"}]}

def post(contents):
    body = {"contents": contents, "tools": [{"functionDeclarations": [add]}],
            "generationConfig": {"thinkingConfig": {"includeThoughts": True, "thinkingBudget": 1024}}}
    request = urllib.request.Request(
        f"https://generativelanguage.googleapis.com/v1beta/models/{model}:streamGenerateContent?alt=sse",
        data=json.dumps(body).encode(), method="POST", headers={
            "content-type": "application/json", "x-goog-api-key": os.environ["GEMINI_API_KEY"]})
    with urllib.request.urlopen(request) as response:
        head = [f"status: {response.status}", f"content-type: {response.headers['content-type']}"]
        return head, response.read().decode()

def chunks(body):
    return [json.loads(line[6:]) for line in body.splitlines() if line.startswith("data: ")]

def write(name, note, head, body):
    comment = [f"# Recorded from Google's Gemini API ({model}) by scripts/record-gemini-fixtures.sh.",
               f"# {note}"]
    with open(out / name, "w", newline="") as f:
        f.write("\n".join(comment + head) + "\n\n" + body)

head, first = post([question])
write("thinking_tool_calls.sse", "The first step: thoughts, then calls of `add`.", head, first)
parts = [p for c in chunks(first) for p in c["candidates"][0]["content"].get("parts", [])]
calls = [p["functionCall"] for p in parts if "functionCall" in p]
model_turn = {"role": "model", "parts": [p for p in parts if not p.get("thought")]}
responses = {"role": "user", "parts": [{"functionResponse": {"name": c["name"],
    "response": {"result": str(c["args"]["a"] + c["args"]["b"])}}} for c in calls]}
head, answer = post([question, model_turn, responses])
write("answer.sse", "The step after the function responses: the answer.", head, answer)
first_event = answer.split("\r\n\r\n")[0] + "\r\n\r\n"
write("cut.sse", "The answer, its connection dropped after its first event.",
      head + ["x-replay-end: abort"], first_event)
PY
echo "recorded into tests/fixtures/gemini/"
