// One run through the official AG-UI client (@ag-ui/client HttpAgent) whose model is cut off
// while a tool call's arguments stream. Prints what the client's hooks saw, as JSON: the calls
// started, the calls the client was told are complete (TOOL_CALL_END, onNewToolCall), the
// RUN_ERROR's code, and the events on the wire (checked against the official schemas).
//
// Each further argument the user then says, in a next turn of the same thread: what the client
// holds, the cut call included, in the client's order, is what it sends.
//
//   node agui-cut-call.mjs http://127.0.0.1:PORT/ [NEXT…]
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { HttpAgent } from "@ag-ui/client";
import { checkWire, tappedFetch } from "./sse.mjs";

const [url, ...next] = process.argv.slice(2);
assert.ok(url, "usage: node agui-cut-call.mjs <url>");
const bodies = [];
const agent = new HttpAgent({
  url,
  threadId: randomUUID(),
  initialMessages: [{ id: randomUUID(), role: "user", content: "What is the weather in Paris?" }],
  fetch: tappedFetch(bodies),
});
const seen = { started: [], ended: [], completed: [], code: null };
try {
  await agent.runAgent({ runId: randomUUID() }, {
    onToolCallStartEvent: ({ event }) => void seen.started.push(event.toolCallId),
    onToolCallEndEvent: ({ event, toolCallArgs }) =>
      void seen.ended.push({ id: event.toolCallId, args: toolCallArgs }),
    onNewToolCall: ({ toolCall }) => void seen.completed.push(toolCall.function.arguments),
    onRunErrorEvent: ({ event }) => void (seen.code = event.code),
  });
} catch {
  // The run failed: what the hooks saw is the point.
}
seen.events = checkWire(await bodies[0]).map((e) => e.type);
seen.sent = [];
for (const text of next) {
  agent.addMessage({ id: randomUUID(), role: "user", content: text });
  seen.sent.push(agent.messages.map((m) => m.role));
  await agent.runAgent({ runId: randomUUID() });
}
seen.held = agent.messages.map((m) => ({ role: m.role, content: m.content }));
console.log(JSON.stringify(seen));
