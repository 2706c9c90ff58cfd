// Two runs of one thread through the official AG-UI client (@ag-ui/client HttpAgent) against
// `agent-tower serve --model anthropic:…`: the first streams signed thinking and two tool calls,
// the second is posted with the client's own copy of the conversation. Prints, as JSON, the
// client's messages after the first run (role, the encrypted values of messages and of tool calls) and
// the event types of both runs (checked against the official schemas).
//
//   node agui-reasoning.mjs http://127.0.0.1:PORT/
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { HttpAgent } from "@ag-ui/client";
import { checkWire, tappedFetch } from "./sse.mjs";

const url = process.argv[2];
assert.ok(url, "usage: node agui-reasoning.mjs <url>");
const bodies = [];
const agent = new HttpAgent({
  url,
  threadId: randomUUID(),
  initialMessages: [{ id: randomUUID(), role: "user", content: "What are 2 + 3 and 40 + 2?" }],
  fetch: tappedFetch(bodies),
});
await agent.runAgent({ runId: randomUUID() });
const first = agent.messages.map(({ role, encryptedValue, toolCalls }) => ({
  role,
  encryptedValue,
  calls: toolCalls?.map((call) => call.encryptedValue ?? null),
}));
agent.addMessage({ id: randomUUID(), role: "user", content: "Thanks. And 1 + 1?" });
await agent.runAgent({ runId: randomUUID() });
const runs = [];
for (const body of bodies) runs.push(checkWire(await body).map((e) => e.type));
console.log(JSON.stringify({ first, runs }));
