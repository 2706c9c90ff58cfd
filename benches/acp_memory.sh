#!/usr/bin/env bash
# Peak memory of `agent-tower acp --store none` serving one prompt of W words, which the
# scripted model echoes a chunk a word, to a client that reads every line: what one large prompt
# costs the agent, beside what an empty one does.
#
#   cargo build --release --features cli && bash benches/acp_memory.sh [binary]
#
# Environment: ACP_WORDS (the prompts' sizes in words, default "10 100000 800000 1600000").
set -euo pipefail
cd "$(dirname "$0")/.."
agent=${1:-target/release/agent-tower}
[ -x "$agent" ] || { echo "build it first: cargo build --release --features cli" >&2; exit 1; }
command -v /usr/bin/time >/dev/null || { echo "needs /usr/bin/time (Debian: time)" >&2; exit 1; }

echo "| prompt | words | lines read | peak RSS |"
echo "|---:|---:|---:|---:|"
for words in ${ACP_WORDS:-10 100000 800000 1600000}; do
  python3 - "$agent" "$words" <<'PY'
import json, subprocess, sys
agent, words = sys.argv[1], int(sys.argv[2])
proc = subprocess.Popen(["/usr/bin/time", "-f", "%M", agent, "acp", "--store", "none"],
    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
def send(message):
    proc.stdin.write((json.dumps({"jsonrpc": "2.0", **message}) + "\n").encode())
    proc.stdin.flush()
def answer(id):
    lines = 0
    while True:
        line = proc.stdout.readline()
        assert line, "the agent ended"
        lines += 1
        message = json.loads(line)
        if message.get("id") == id:
            return message, lines
send({"id": 1, "method": "initialize", "params": {"protocolVersion": 1}})
answer(1)
send({"id": 2, "method": "session/new", "params": {"cwd": "/tmp", "mcpServers": []}})
session = answer(2)[0]["result"]["sessionId"]
text = " ".join(["word"] * words)
send({"id": 3, "method": "session/prompt",
      "params": {"sessionId": session, "prompt": [{"type": "text", "text": text}]}})
result, lines = answer(3)
assert result["result"]["stopReason"] == "end_turn", result
proc.stdin.close()
peak_kib = int(proc.stderr.read().decode().strip().splitlines()[-1])
print(f"| {len(text) / 1e6:.1f} MB | {words:,} | {lines:,} | {peak_kib / 1024:.0f} MiB |")
PY
done
