// Follows a run's whole log (GET /runs/{runId}/events, from its first event) through the
// official AG-UI client (@ag-ui/client HttpAgent: its verifier and its apply rules), as a page
// re-joining the run would. Prints what the client's hooks saw, as JSON: the tool calls it was
// told are complete (onNewToolCall) with their arguments, the calls whose end it heard
// (onToolCallEndEvent), the steps it saw start, and the conversation it holds at the end.
//
//   node agui-follow.mjs http://127.0.0.1:PORT RUN_ID THREAD_ID
import assert from "node:assert/strict";
import { HttpAgent } from "@ag-ui/client";

const [base, runId, threadId] = process.argv.slice(2);
assert.ok(base && runId && threadId, "usage: node agui-follow.mjs <base> <runId> <threadId>");
const agent = new HttpAgent({
  url: `${base}/runs/${runId}/events`,
  threadId,
  // The run exists: the client reads its log instead of starting one.
  fetch: (url) => fetch(url, { headers: { Accept: "text/event-stream" } }),
});
const seen = { completed: [], ended: [], steps: [], messages: [] };
await agent.runAgent({ runId }, {
  onNewToolCall: ({ toolCall }) =>
    void seen.completed.push({ id: toolCall.id, arguments: toolCall.function.arguments }),
  onToolCallEndEvent: ({ event }) => void seen.ended.push(event.toolCallId),
  onStepStartedEvent: ({ event }) => void seen.steps.push(event.stepName),
});
seen.messages = agent.messages.map((m) => ({
  role: m.role,
  calls: (m.toolCalls ?? []).map((c) => c.id),
}));
console.log(JSON.stringify(seen));
