// Opens a thread (GET /threads/{threadId}/events) and continues it with one user message, both
// through the official AG-UI client (@ag-ui/client HttpAgent: its verifier and its apply rules),
// as a page would that was given a thread begun elsewhere (an editor's session, say). Prints, as
// JSON, the conversation the client held after opening it and after the next run.
//
//   node agui-continue.mjs http://127.0.0.1:PORT THREAD_ID "next user message"
import assert from "node:assert/strict";
import { HttpAgent } from "@ag-ui/client";

const [base, threadId, words] = process.argv.slice(2);
assert.ok(base && threadId && words, "usage: node agui-continue.mjs <base> <threadId> <words>");
const said = (messages) => messages.map((m) => ({ role: m.role, content: m.content }));

// Opening: the thread's log read as a run, its conversation applied by the client.
const agent = new HttpAgent({
  url: `${base}/threads/${threadId}/events`,
  threadId,
  fetch: (url) => fetch(url, { headers: { Accept: "text/event-stream" } }),
});
await agent.runAgent();
const opened = said(agent.messages);

// Continuing: a run of the same thread with what the client holds and the new message.
const next = new HttpAgent({ url: base, threadId, initialMessages: agent.messages });
next.addMessage({ id: crypto.randomUUID(), role: "user", content: words });
await next.runAgent();
console.log(JSON.stringify({ opened, continued: said(next.messages) }));
