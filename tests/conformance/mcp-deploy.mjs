// A deploy under an MCP call: the official v2 client (2026-07-28) calls the agent through the
// first of two instances on one store; mid-answer the first is stopped (SIGTERM, a drain shorter
// than the run) and requests go to the second, as behind a load balancer. The call is answered
// `input_required` with the run as its state; the client calls again, reaches the second
// instance, which continues the run and answers the call with the whole answer: one run, one
// answer, nothing asked twice of the client.
//
//   node mcp-deploy.mjs FIRST_BASE SECOND_BASE FIRST_PID
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

const [first, second, pid] = process.argv.slice(2);
assert.ok(first && second && pid, "usage: node mcp-deploy.mjs <first> <second> <first-pid>");

// The load balancer: every request to whichever instance is current.
let current = first;
const balanced = (url, init) => {
  const target = new URL(url);
  return fetch(new URL(target.pathname + target.search, current), init);
};
const client = new Client(
  { name: "mcp-deploy", version: "1.0.0" },
  { capabilities: {}, versionNegotiation: { mode: { pin: "2026-07-28" } } },
);
await client.connect(new StreamableHTTPClientTransport(new URL("/mcp", first), { fetch: balanced }));
const [tool] = (await client.listTools()).tools;

const threadId = randomUUID();
let stopped = false;
const result = await client.callTool(
  { name: tool.name, arguments: { prompt: "answer slowly please", threadId } },
  {
    onprogress: (p) => {
      if (p.message === "answering" && !stopped) {
        stopped = true;
        current = second;
        process.kill(Number(pid), "SIGTERM");
      }
    },
  },
);
assert.ok(stopped, "the first instance was stopped mid-answer");
assert.ok(!result.isError, JSON.stringify(result));
const thread = await (await fetch(new URL(`/threads/${threadId}`, second))).json();
assert.equal(thread.runs.length, 1, "one run, continued");
assert.equal(result.structuredContent.runId, thread.runs[0].runId);
assert.equal(thread.runs[0].status, "finished");
assert.equal(result.content[0].text, thread.messages.at(-1).content, "the whole answer, as the thread keeps it");
assert.ok(result.content[0].text.split(" ").length >= 100, "the slow answer to its end");
console.log(`ok the call answered through the second instance: ${result.content[0].text.length} chars`);
await client.close();
console.log("mcp-deploy: passed");
